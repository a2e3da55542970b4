"""The committed H200 reproduction bench (``docs/results/data/reproduction_h200.json``: 21 test
problems, seven fixed configurations, nine budgets), real results to report on without
running anything, and copies of it with one outcome changed."""

from __future__ import annotations

import functools
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

from autoprofiler.bench import BenchResult, ConfigScore

ROOT = Path(__file__).resolve().parents[2]
RESULTS = ROOT / "docs" / "results" / "data" / "reproduction_h200.json"


@functools.cache
def reproduction() -> BenchResult:
    return BenchResult.from_dict(json.loads(RESULTS.read_text(encoding="utf-8")))


def _changed(bench: BenchResult, config: ConfigScore, problem: str, **changes: Any) -> ConfigScore:
    outcomes = [
        replace(o, **changes) if bench.names.get(o.problem_hash) == problem else o
        for o in config.score.outcomes
    ]
    return replace(config, score=bench.objective().score(outcomes))


def with_outcome(bench: BenchResult, config: str, problem: str, **changes: Any) -> BenchResult:
    """``bench`` with the outcome of ``problem`` (by name) under the fixed configuration
    ``config``, or under every learned tree when ``config`` is ``learned``, changed."""
    if config == "learned":
        budgets = tuple(
            replace(b, learned=_changed(bench, b.learned, problem, **changes))
            for b in bench.budgets
        )
        return replace(bench, budgets=budgets)
    fixed = tuple(
        _changed(bench, c, problem, **changes) if c.name == config else c for c in bench.fixed
    )
    return replace(bench, fixed=fixed)
