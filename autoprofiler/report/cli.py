"""``autoprofiler report``: the bench results as one self-contained HTML page. Mounted on the
main app as ``app.command(name="report")(report_command)``."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer


def report_command(
    source: Annotated[
        Path, typer.Argument(help="A store, or the JSON written by 'autoprofiler bench -o'.")
    ],
    out: Annotated[Path, typer.Option("--out", "-o", help="The HTML file to write.")] = Path(
        "report.html"
    ),
    bench: Annotated[
        list[str] | None,
        typer.Option("--bench", help="Only these benches (default: every one); repeatable."),
    ] = None,
    figures: Annotated[
        Path | None,
        typer.Option(help="Also write the plots as PNG files into this folder."),
    ] = None,
) -> None:
    """Write bench results as one self-contained HTML page.

    The page holds the tables per budget, plots (quality against profiling cost and against
    the number of metrics, per-problem winners, learning curves) and the learned trees.
    """
    from autoprofiler.cli import console, fail
    from autoprofiler.report.load import ReportError, load_benches

    try:
        from autoprofiler.report.html import write_figures, write_report
    except ImportError as exc:
        fail(f"the report needs matplotlib ({exc}): pip install 'autoprofiler[report]'")
    try:
        benches = load_benches(source, bench or ())
    except ReportError as exc:
        fail(str(exc))
    try:
        written = write_report(benches, out)
        pictures = write_figures(benches, figures) if figures is not None else []
    except OSError as exc:
        fail(f"cannot write {exc.filename or out}: {exc.strerror or exc}")
    names = ", ".join(b.name for b in benches)
    console.print(f"wrote {written} (bench {names})", highlight=False)
    if pictures:
        console.print(f"wrote {len(pictures)} figures into {figures}", highlight=False)
