"""Bench results for a report: from a store (every bench run in it, learning curves read again
from their studies) or from the JSON file that ``autoprofiler bench -o`` writes."""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from autoprofiler.bench.result import BenchResult
from autoprofiler.bench.runner import RUN_SPACE, learning_curve
from autoprofiler.learn.study import StudyStorage
from autoprofiler.store import Store, StoreError, is_sqlite_file


class ReportError(ValueError):
    """Nothing to report from the given source; the message is one line."""


def _from_store(path: Path) -> list[BenchResult]:
    try:
        store = Store(path)
    except StoreError as exc:
        raise ReportError(str(exc)) from None
    with store:
        studies = StudyStorage(store)
        benches = []
        for _, data in store.iter_space(RUN_SPACE):
            bench = BenchResult.from_dict(data)
            budgets = tuple(
                replace(b, trials=learning_curve(studies.trials(b.study)) or b.trials)
                for b in bench.budgets
            )
            benches.append(replace(bench, budgets=budgets))
    return benches


def _from_json(path: Path) -> list[BenchResult]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        rows = data if isinstance(data, list) else [data]
        return [BenchResult.from_dict(row) for row in rows]
    except KeyError as exc:
        raise ReportError(f"{path}: not bench results: no {exc.args[0]!r} field") from None
    except (OSError, UnicodeDecodeError, ValueError, TypeError, AttributeError) as exc:
        raise ReportError(f"{path}: not bench results: {exc}") from None


def load_benches(path: str | Path, names: Sequence[str] = ()) -> list[BenchResult]:
    """The bench results in ``path`` (a store or a results JSON file), those in ``names`` only
    when given. Raises ``ReportError`` when there is nothing to report."""
    path = Path(path)
    try:
        is_store = is_sqlite_file(path)
    except OSError as exc:
        raise ReportError(f"{path}: cannot read: {exc.strerror or exc}") from None
    benches = _from_store(path) if is_store else _from_json(path)
    if names:
        unknown = sorted(set(names) - {b.name for b in benches})
        if unknown:
            known = ", ".join(b.name for b in benches) or "none"
            raise ReportError(f"{path}: no bench named {', '.join(unknown)} (benches: {known})")
        benches = [b for b in benches if b.name in names]
    if not benches:
        raise ReportError(f"{path}: holds no bench results (run autoprofiler bench first)")
    return benches
