"""Fixtures for the executor tests: three small example problems, evaluated on the CPU."""

from __future__ import annotations

from pathlib import Path

import pytest

from autoprofiler.evaluate import EvalConfig
from autoprofiler.evaluate.baselines import reference_as_candidate
from autoprofiler.problem import Problem, load_problems

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "problems"
NAMES = ("05_elementwise_chain", "09_reduction", "12_transpose_copy")
CONFIG = EvalConfig(device="cpu", correctness_trials=2, timing_budget_ms=20.0)


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    """Workers inherit this: the examples at their small size, one thread each."""
    monkeypatch.setenv("AUTOPROFILER_EXAMPLE_SIZE", "small")
    monkeypatch.setenv("OMP_NUM_THREADS", "1")


@pytest.fixture(scope="session")
def examples() -> list[Problem]:
    chosen = {p.name: p for p in load_problems(EXAMPLES).problems if p.name in NAMES}
    return [chosen[name] for name in NAMES]


def suite(problems: list[Problem]) -> list[tuple[Problem, str]]:
    """Each problem's reference as its candidate, and one wrong candidate (another
    problem's reference)."""
    return [(p, reference_as_candidate(p)) for p in problems] + [
        (problems[0], reference_as_candidate(problems[-1]))
    ]


def verdicts(results) -> dict[tuple[str, str], tuple]:
    """What must not depend on where an evaluation ran: the verdict, not the timings."""
    return {
        (r.problem_hash, r.candidate_hash): (r.compiled, r.correct, r.failure_kind) for r in results
    }
