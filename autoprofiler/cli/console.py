"""Where the command's words go: results on stdout; errors, warnings, notes and progress on
stderr, so that ``--json`` output stays parseable and a piped table stays whole."""

from __future__ import annotations

from typing import NoReturn

import typer
from rich.console import Console
from rich.measure import Measurement
from rich.table import Table

from autoprofiler.cli.verbosity import quiet

console = Console(soft_wrap=True)
# Wide enough for any table a command prints; only a measure, never an output width.
_UNBOUNDED = 1_000_000


def messages() -> Console:
    """A console on stderr (made per use, so that it follows the environment of the moment)."""
    return Console(stderr=True, soft_wrap=True)


def fail(message: str, code: int = 2) -> NoReturn:
    """Print one red ``error:`` line and leave with ``code``."""
    messages().print(f"[red]error:[/red] {message}", highlight=False, markup=True)
    raise typer.Exit(code)


def warn(message: str) -> None:
    """One yellow line on stderr, ``-q`` or not: something was left out, and why."""
    messages().print(f"[yellow]{message}[/yellow]", highlight=False)


def note(message: str) -> None:
    """One line of what the command is doing, on stderr; none with ``-q``."""
    if not quiet():
        messages().print(message, highlight=False, markup=False)


def print_table(table: Table) -> None:
    """Print ``table`` whole: folded to a terminal's width; at its own width elsewhere (a file,
    a pipe, a CI log), where no terminal limits the line."""
    for column in table.columns:
        column.overflow = "fold"
    if console.is_terminal:
        console.print(table)
        return
    wide = console.options.update_width(_UNBOUNDED)
    width = max(Measurement.get(console, wide, table).maximum, console.width)
    Console(file=console.file, width=width, soft_wrap=True).print(table)
