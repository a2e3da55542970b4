"""A command's results, one shape for every command: as JSON on stdout with ``--json``, else
as the command shows them; and written to ``-o FILE`` when given (the same JSON)."""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import typer

from autoprofiler.cli.console import fail, note

if TYPE_CHECKING:
    from autoprofiler.evaluate import EvalResult


def to_json(data: Any) -> str:
    """The JSON text of results (plain data: dicts, lists, numbers, strings)."""
    return json.dumps(data, indent=1)


def keyed(rows: Sequence[tuple[str, EvalResult]]) -> list[dict[str, Any]]:
    """Evaluation results as JSON rows, each naming its problem."""
    return [{"problem": key, **result.to_dict()} for key, result in rows]


def write_text(path: Path, text: str, what: str = "results") -> None:
    """Write ``text`` to ``path`` (its folder made), noting it; a failure is one error line."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    except OSError as exc:
        fail(f"{path}: cannot write the {what}: {exc.strerror or exc}")
    note(f"wrote {path}")


def emit(
    data: Any,
    *,
    as_json: bool,
    output: Path | None,
    show: Callable[[], None],
    text: str | None = None,
) -> None:
    """Print the results (``data`` as JSON with ``as_json``, else ``show()``), then write them
    to ``output`` when given. ``text`` is the JSON text when it is not ``to_json(data)``."""
    written = to_json(data) if text is None else text
    if as_json:
        typer.echo(written)
    else:
        show()
    if output is not None:
        write_text(output, written)
