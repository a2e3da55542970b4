"""The ``autoprofiler`` group: ``-v``/``-q`` on every command, and a usage error (a bad or
missing option, an unknown command, a CUDA device on a machine without one) as one ``error:``
line with exit code 2."""

from __future__ import annotations

import sys
from typing import Any

import typer
from typer.core import TyperGroup

from autoprofiler.cli import verbosity
from autoprofiler.cli.console import fail

# click's UsageError, of the click that typer runs on (typer may carry a copy of its own).
_UsageError = typer.BadParameter.__bases__[0]


def _commands(group: Any) -> list[Any]:
    """Every command below ``group``, groups included."""
    found = []
    for command in group.commands.values():
        found.append(command)
        if isinstance(command, TyperGroup):
            found.extend(_commands(command))
    return found


def _one_line(error: Exception) -> None:
    """Print a usage error as one line and leave with 2 (a bare group's help goes through)."""
    if type(error).__name__ == "NoArgsIsHelpError":
        raise error
    fail(" ".join(error.format_message().split()))


class CommandGroup(TyperGroup):
    """The root group. Each command below it (not a group) takes ``-v`` and ``-q`` too, so
    that they may follow the command as well as come before it."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.params.extend(verbosity.verbosity_params())
        for command in _commands(self):
            if not isinstance(command, TyperGroup):
                command.params.extend(verbosity.verbosity_params())

    def make_context(self, *args: Any, **kwargs: Any) -> Any:
        verbosity.reset()
        try:
            return super().make_context(*args, **kwargs)
        except _UsageError as exc:
            _one_line(exc)

    def invoke(self, ctx: Any) -> Any:
        try:
            return super().invoke(ctx)
        except _UsageError as exc:
            _one_line(exc)
        except RuntimeError as exc:
            if not _is_no_gpu_error(exc):
                raise
            fail(str(exc))


def _is_no_gpu_error(error: BaseException) -> bool:
    """Whether ``error`` is the evaluator's "no CUDA GPU here". Only a command that loaded the
    evaluator can raise it, so one that did not (``tree show``, say) never imports the evaluator,
    nor torch with it, to ask."""
    runner = sys.modules.get("autoprofiler.evaluate.runner")
    return runner is not None and isinstance(error, runner.NoGPUError)
