"""Fixtures for the learner's tests: a store holding the real H200 recordings of the example
problems, shared by the session so that evaluations are cached across tests, and the tiny
problems and scorer the learner is tested with.

Every candidate is evaluated for real on the CPU (``AUTOPROFILER_EXAMPLE_SIZE=small``); the
``GatedRewriter`` only ever writes two candidates per problem (the reference itself, or a far
slower but correct one), so the whole suite evaluates a handful of programs. Torch runs one
thread per worker: on a shared machine, waiting for a descheduled second thread adds
milliseconds at random to a 0.1 ms kernel.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from autoprofiler.evaluate import EvalConfig
from autoprofiler.learn import Objective, TreeScorer
from autoprofiler.problem import Problem
from autoprofiler.profile import RecordedProfiler, import_recordings
from autoprofiler.rewrite.base import RewriteContext, Rewriter
from autoprofiler.store import Store

from .gated_rewriter import GatedRewriter

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "data" / "recordings" / "examples_h200.jsonl.gz"
DEVICE = "H200"
TRAIN = ("05_elementwise_chain", "09_reduction")
VALIDATION = ("12_transpose_copy",)
EVAL_CONFIG = EvalConfig(device="cpu")
CONTEXT = RewriteContext(device="cpu")
BUDGET_S = 20.0


@pytest.fixture(autouse=True)
def _one_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("AUTOPROFILER_EXAMPLE_SIZE", "small")


@pytest.fixture(scope="session")
def store_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A store file with the recordings imported; its evaluations accumulate over the session."""
    path = tmp_path_factory.mktemp("learn") / "store.sqlite"
    with Store(path) as store:
        import_recordings(RECORDINGS, store)
    return path


@pytest.fixture
def store(store_path: Path) -> Iterator[Store]:
    with Store(store_path) as opened:
        yield opened


@pytest.fixture
def problems(store: Store) -> dict[str, Problem]:
    """The recorded example problems by name."""
    hashes = dict.fromkeys(h for h, *_ in store.iter_profile_records())
    found = [store.get_problem(h) for h in hashes]
    return {p.name: p for p in found if p is not None}


@pytest.fixture
def train(problems: dict[str, Problem]) -> list[Problem]:
    return [problems[name] for name in TRAIN]


@pytest.fixture
def validation(problems: dict[str, Problem]) -> list[Problem]:
    return [problems[name] for name in VALIDATION]


def make_scorer(
    store: Store,
    rewriter: Rewriter | None = None,
    budget_s: float | None = BUDGET_S,
    objective: Objective | None = None,
) -> TreeScorer:
    """A scorer over the recordings, evaluating on the CPU like the CLI does.

    The gated rewriter's candidates run the reference's own ops, which the evaluator flags
    (``same_op_as_reference``): by default the scorer counts flagged candidates at their
    speedups, or every tree would score the failure speedup.
    """
    return TreeScorer(
        RecordedProfiler(store, DEVICE),
        rewriter or GatedRewriter(),
        store,
        budget_s=budget_s,
        objective=objective or Objective(count_flagged=True),
        eval_config=EVAL_CONFIG,
        context=CONTEXT,
    )
