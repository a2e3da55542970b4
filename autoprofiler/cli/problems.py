"""``autoprofiler problems``: what loads from a path, and what is rejected and why."""

from __future__ import annotations

from pathlib import Path

from rich.table import Table

from autoprofiler.cli.console import print_table
from autoprofiler.cli.options import (
    IdsOption,
    JsonOption,
    LevelsOption,
    OutputOption,
    ProblemsArgument,
)
from autoprofiler.cli.results import emit
from autoprofiler.cli.selection import load_or_fail


def problems_command(
    path: ProblemsArgument,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    as_json: JsonOption = False,
    output: OutputOption = None,
) -> None:
    """List the problems that load from PATH, and those rejected and why (on stderr)."""
    report = load_or_fail(path, levels, ids)
    rows = [{"problem": p.key, "hash": p.content_hash, "origin": p.origin} for p in report.problems]

    def show() -> None:
        table = Table(title=f"{len(rows)} problems from {path}")
        for column in ("problem", "hash", "origin"):
            table.add_column(column)
        for row in rows:
            table.add_row(*row.values())
        print_table(table)

    data = {"path": str(Path(path)), "problems": rows, "rejected": report.errors}
    emit(data, as_json=as_json, output=output, show=show)
