"""The ``autoprofiler`` app: the options before any command, and every command mounted.

The commands live one per module beside this one and import only the shared modules
(``console``, ``options``, ``selection``, ...), never this one.
"""

from __future__ import annotations

from typing import Annotated

import typer

from autoprofiler.cli import (
    baselines,
    bench,
    evaluation,
    learn,
    optimize,
    problems,
    profile,
    prompts,
    replies,
    report,
    tree,
)
from autoprofiler.cli.command_group import CommandGroup
from autoprofiler.cli.console import fail

app = typer.Typer(
    cls=CommandGroup,
    help="Learn what to profile when optimizing GPU kernels.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
)


def _print_version(asked: bool) -> None:
    if asked:
        from autoprofiler import __version__

        typer.echo(f"autoprofiler {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    """Learn what to profile when optimizing GPU kernels."""
    from autoprofiler.profile.base import ProfilerError
    from autoprofiler.profile.composite import hardware_from_env
    from autoprofiler.profile.ncu import options_from_env

    try:
        options_from_env()  # a bad sampling setting stops every command before it starts
        hardware_from_env()
    except ProfilerError as exc:
        fail(str(exc))


app.command("problems")(problems.problems_command)
app.command("eval")(evaluation.eval_command)
app.command("baselines")(baselines.baselines_command)
app.add_typer(tree.tree_app, name="tree")
app.command("profile")(profile.profile_command)
app.command("optimize")(optimize.optimize_command)
app.add_typer(prompts.prompts_app, name="prompts")
app.add_typer(replies.replies_app, name="replies")
app.command("learn")(learn.learn_command)
app.command("bench")(bench.bench_command)
app.command("report")(report.report_command)
