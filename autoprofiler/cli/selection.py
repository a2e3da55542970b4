"""The problems a command works on: ``--levels``/``--ids`` and the load, every rejected source
reported with why, an empty selection an error that says what was asked."""

from __future__ import annotations

from pathlib import Path

from autoprofiler.cli.console import fail, warn
from autoprofiler.problem import LoadReport, Problem, ProblemError, load_problems


def number_list(text: str) -> list[int]:
    """``"1,3,10-20"`` as numbers (raises ``ValueError``)."""
    values: list[int] = []
    for part in text.split(","):
        low, dash, high = part.strip().partition("-")
        if not dash:
            values.append(int(low))
            continue
        first, last = int(low), int(high)
        if first > last:
            raise ValueError(f"{part.strip()} is an empty range")
        values.extend(range(first, last + 1))
    return values


def asked(levels: str | None, ids: str | None) -> str:
    """The selection as the user gave it: ``--levels 1 --ids 3-5`` (empty when none)."""
    return " ".join(f"--{n} {v}" for n, v in (("levels", levels), ("ids", ids)) if v)


def selected(problems: list[Problem], levels: str | None, ids: str | None) -> list[Problem]:
    """Those of ``problems`` (already loaded, e.g. from the store) that the selection keeps."""
    wanted_levels = set(number_list(levels)) if levels else None
    wanted_ids = set(number_list(ids)) if ids else None
    return [
        p
        for p in problems
        if (wanted_levels is None or p.level in wanted_levels)
        and (wanted_ids is None or p.problem_id in wanted_ids)
    ]


def load_report(path: Path, levels: str | None = None, ids: str | None = None) -> LoadReport:
    """What loads from ``path`` under the selection (the options already checked); a path that
    holds nothing loadable is one error line."""
    try:
        return load_problems(
            path, number_list(levels) if levels else None, number_list(ids) if ids else None
        )
    except ProblemError as exc:
        fail(str(exc))


def load_or_fail(path: Path, levels: str | None = None, ids: str | None = None) -> LoadReport:
    """Load problems for a command: each rejected source is one warning line with why; no
    usable problem is one error line (the rejection itself when there was one)."""
    report = load_report(path, levels, ids)
    if not report.problems and len(report.errors) == 1:
        fail(report.errors[0])
    for message in report.errors:
        warn(f"rejected: {message}")
    if not report.problems:
        selection = asked(levels, ids)
        if report.errors:
            fail(f"{path}: no usable problems ({len(report.errors)} rejected)")
        fail(f"{path}: no problems with {selection}" if selection else f"{path}: no problems")
    return report
