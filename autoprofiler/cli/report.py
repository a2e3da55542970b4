"""``autoprofiler report``: bench results as one self-contained HTML page."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autoprofiler.cli.console import fail, note
from autoprofiler.cli.options import OutputFileOption, checked, must_exist


def report_command(
    source: Annotated[
        Path,
        typer.Argument(
            callback=checked(must_exist),
            help="A store, or the JSON written by 'autoprofiler bench -o'.",
        ),
    ],
    output: OutputFileOption = Path("report.html"),
    bench: Annotated[
        list[str] | None,
        typer.Option("--bench", help="Only these benches (default: every one); repeatable."),
    ] = None,
    figures: Annotated[
        Path | None,
        typer.Option("--figures", help="Also write the plots as PNG files into this folder."),
    ] = None,
    page_note: Annotated[
        str | None,
        typer.Option("--note", help="A paragraph under the page's title (where it came from)."),
    ] = None,
) -> None:
    """Write bench results as one self-contained HTML page (-o).

    The page holds the tables per budget, plots (quality against profiling cost and against
    the number of metrics, per-problem winners, learning curves) and the learned trees.
    """
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
        written = write_report(benches, output, page_note)
        pictures = write_figures(benches, figures) if figures is not None else []
    except OSError as exc:
        fail(f"cannot write {exc.filename or output}: {exc.strerror or exc}")
    note(f"wrote {written} (bench {', '.join(b.name for b in benches)})")
    if pictures:
        note(f"wrote {len(pictures)} figures into {figures}")
