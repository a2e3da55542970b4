"""The results log of ``optimize`` and ``profile``: each problem's row written as it finishes,
so that a run cut short (Ctrl-C, SIGTERM, a kill) keeps what it did and ``--resume`` goes on
from there.

The log is ``-o FILE`` when FILE ends in ``.jsonl``, else ``<store>-<command>.jsonl`` beside
the store (``.autoprofiler/store-optimize.jsonl``). Its first line records the command and its
options, then one JSON row per finished problem. A run without ``--resume`` starts the log
afresh; with ``--resume`` the options must be the same (else one error line) and the problems
already in the log are skipped.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Annotated, Any

import typer

from autoprofiler.cli.console import fail, note

LOG_SUFFIX = ".jsonl"
_KIND = "autoprofiler run"
# Options that change where results go or how they are shown, not what they are.
_NOT_COMPARED = frozenset(
    {"resume", "as_json", "output", "store", "no_cache", "count_flagged", "candidates_dir"}
    | {"executor", "workers", "ray_address", "retime_reference"}
)

ResumeOption = Annotated[
    bool,
    typer.Option(
        "--resume",
        help="Go on from the results log of an earlier run with the same options, skipping "
        "the problems it holds.",
    ),
]


def log_path(command: str, store: Path, output: Path | None) -> Path:
    """Where ``command`` logs its rows: ``output`` when it is a ``.jsonl`` file, else beside
    the store."""
    if output is not None and output.suffix == LOG_SUFFIX:
        return output
    return store.with_name(f"{store.stem}-{command}{LOG_SUFFIX}")


def final_output(output: Path | None) -> Path | None:
    """The file the results are written to at the end: ``output``, unless it is the log."""
    return None if output is None or output.suffix == LOG_SUFFIX else output


@dataclass
class RunLog:
    """A run's log: its file and the rows of earlier runs by problem key (resumed ones)."""

    path: Path
    done: dict[str, dict[str, Any]] = field(default_factory=dict)

    def add(self, row: dict[str, Any]) -> None:
        """Append one finished problem's row, on disk before this returns."""
        self.done[row["problem"]] = row
        _append(self.path, row)


def _plain(value: Any) -> Any:
    """An option's value as JSON: paths absolute, enums by value."""
    if isinstance(value, Path):
        return str(value.resolve())
    if isinstance(value, Enum):
        return value.value
    if isinstance(value, (list, tuple)):
        return [_plain(v) for v in value]
    return value


def _append(path: Path, row: dict[str, Any]) -> None:
    with path.open("a", encoding="utf-8") as handle:
        handle.write(json.dumps(row) + "\n")
        handle.flush()
        os.fsync(handle.fileno())


def _read(path: Path, command: str) -> tuple[dict[str, Any], list[dict[str, Any]]]:
    """The options and rows in ``path``; a line cut short by a kill is left out."""
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"--resume: {path}: cannot read: {exc}")
    rows = []
    for line in lines:
        try:
            rows.append(json.loads(line))
        except ValueError:
            continue
    header = rows.pop(0) if rows else None
    if not isinstance(header, dict) or header.get("kind") != f"{_KIND} {command}":
        fail(f"--resume: {path} is not a results log of autoprofiler {command}")
    return header.get("options", {}), [r for r in rows if isinstance(r, dict) and "problem" in r]


def _shown(value: Any) -> str:
    if value is None:
        return "(not given)"
    return ",".join(map(str, value)) if isinstance(value, list) else str(value)


def open_run_log(
    ctx: typer.Context, command: str, store: Path, output: Path | None, resume: bool
) -> RunLog:
    """The log of this run of ``command`` (its options from ``ctx``): fresh, or with
    ``resume`` the earlier one, checked to have been written with the same options."""
    path = log_path(command, store, output)
    options = {k: _plain(v) for k, v in sorted(ctx.params.items()) if k not in _NOT_COMPARED}
    log = RunLog(path)
    if resume and path.is_file():
        earlier, rows = _read(path, command)
        for name in sorted(options.keys() | earlier.keys()):
            if options.get(name) != earlier.get(name):
                flag = next((p.opts[0] for p in ctx.command.params if p.name == name), name)
                was, now = _shown(earlier.get(name)), _shown(options.get(name))
                fail(
                    f"--resume: {path} was written with {flag} {was}, not {flag} {now}: "
                    "give the same options, or leave out --resume"
                )
        log.done = {row["problem"]: row for row in rows}
        note(f"resuming {path} ({len(log.done)} done)")
    elif resume:
        note(f"--resume: {path} does not exist yet: starting from the first problem")
    header = {"kind": f"{_KIND} {command}", "options": options}
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("", encoding="utf-8")
        for row in (header, *log.done.values()):  # a row cut short by a kill is dropped
            _append(path, row)
    except OSError as exc:
        fail(f"{path}: cannot write the results log: {exc.strerror or exc}")
    return log


def _interrupt(signum: int, frame: object) -> None:
    raise KeyboardInterrupt


@contextmanager
def sigterm_as_ctrl_c() -> Iterator[None]:
    """Within: SIGTERM stops the run as Ctrl-C does (what finished is kept, workers stop)."""
    try:
        previous = signal.signal(signal.SIGTERM, _interrupt)
    except ValueError:  # not the main thread: leave SIGTERM as it is
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)
