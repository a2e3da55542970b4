"""``-v/--verbose`` and ``-q/--quiet``: taken before the command and after it alike.

The two flags are made once here (``verbosity_params``) and given to every command by
:class:`autoprofiler.cli.command_group.CommandGroup`. ``-v`` logs progress (INFO); ``-q`` keeps
to the results (no notes on stderr, errors only in the log, ``profile`` prints summary lines).
"""

from __future__ import annotations

import logging
from typing import Annotated, Any

import typer

LOG_FORMAT = "%(levelname)s %(name)s: %(message)s"
_LEVELS = {"verbose": logging.INFO, "quiet": logging.ERROR}
_chosen: dict[str, str] = {}  # the invocation's choice: {"level": "verbose" | "quiet"}


def reset() -> None:
    """Forget the previous invocation's choice (many invocations share a test process)."""
    _chosen.clear()
    logging.basicConfig(level=logging.WARNING, format=LOG_FORMAT)
    logging.getLogger().setLevel(logging.WARNING)


def quiet() -> bool:
    """Whether ``-q`` was given."""
    return _chosen.get("level") == "quiet"


def _choose(ctx: typer.Context, param: typer.CallbackParam, value: bool) -> None:
    if not value or ctx.resilient_parsing:
        return
    level = str(param.name)
    if _chosen.setdefault("level", level) != level:
        raise typer.BadParameter("-v and -q ask for opposite things: give one of them")
    logging.getLogger().setLevel(_LEVELS[level])


def _flags(
    verbose: Annotated[
        bool,
        typer.Option("--verbose", "-v", callback=_choose, expose_value=False, help="Log progress."),
    ] = False,
    quiet: Annotated[
        bool,
        typer.Option(
            "--quiet", "-q", callback=_choose, expose_value=False, help="Print the results only."
        ),
    ] = False,
) -> None:
    """Stands for the two flags; typer builds them from this signature."""


_template = typer.Typer(add_completion=False)
_template.command()(_flags)


def verbosity_params() -> list[Any]:
    """Fresh ``-v`` and ``-q`` parameters, of the click that typer runs on."""
    return list(typer.main.get_command(_template).params)
