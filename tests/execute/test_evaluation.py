"""Evaluations through a ``LocalExecutor``: stored by the driver once per key, a candidate that
kills its executor worker each time recorded as failed with the reason (and tried again by the
next run), and a ``TreeScorer`` that evaluates a batch on workers agreeing with one that
evaluates in-process."""

from __future__ import annotations

from pathlib import Path

from autoprofiler.evaluate import FailureKind
from autoprofiler.evaluate.baselines import reference_as_candidate
from autoprofiler.execute import LocalExecutor, evaluate_many
from autoprofiler.learn import TreeScorer
from autoprofiler.problem import Problem
from autoprofiler.profile import RecordedProfiler, import_recordings
from autoprofiler.store import Store
from autoprofiler.tree import fixed_tree
from tests.learn.conftest import BUDGET_S, CONTEXT, DEVICE, EVAL_CONFIG, RECORDINGS, TRAIN
from tests.learn.gated_rewriter import GatedRewriter

from .conftest import CONFIG

# A candidate whose import kills the executor's worker that called evaluate(): its parent is
# the zygote (or the supervisor) that started it, whose parent is that worker.
KILLS_ITS_WORKER = (
    "import os, signal\n"
    "_stat = open(f'/proc/{os.getppid()}/stat').read()\n"
    "os.kill(int(_stat.rpartition(')')[2].split()[1]), signal.SIGKILL)\n"
)


def test_results_are_stored_once_and_a_worker_killer_is_recorded_failed(
    examples: list[Problem], tmp_path: Path
) -> None:
    first, second = examples[:2]
    hostile = KILLS_ITS_WORKER + reference_as_candidate(first)
    pairs = [
        (first, reference_as_candidate(first)),
        (second, reference_as_candidate(second)),
        (first, reference_as_candidate(first)),  # asked twice, evaluated once
        (first, hostile),
    ]
    with Store(tmp_path / "store.sqlite") as store, LocalExecutor(workers=2) as executor:
        results = list(evaluate_many(pairs, CONFIG, executor=executor, store=store))
        assert len(results) == 3 and store.count("evaluations") == 3
        again = list(evaluate_many(pairs, CONFIG, executor=executor, store=store))
        assert store.count("evaluations") == 3
    by_source = {done.source: done.result for done in results}
    assert by_source[reference_as_candidate(first)].correct
    assert by_source[reference_as_candidate(second)].correct
    killed = by_source[hostile]
    assert not killed.correct and killed.failure_kind is FailureKind.KILLED_BY_SIGNAL
    assert killed.failure_message.startswith("executor: worker lost on each of 2 attempts")
    assert "killed by SIGKILL" in killed.failure_message
    # The verdicts are reused; the lost evaluation is recorded but tried again.
    assert {done.source: done.result.from_cache for done in again} == {
        reference_as_candidate(first): True,
        reference_as_candidate(second): True,
        hostile: False,
    }


def test_a_scorer_on_workers_scores_like_one_in_process(tmp_path: Path) -> None:
    with Store(tmp_path / "store.sqlite") as store:
        import_recordings(RECORDINGS, store)
        problems = {
            p.name: p for h in store.iter_profile_records() if (p := store.get_problem(h[0]))
        }
        train = [problems[name] for name in TRAIN]

        def scorer(executor=None) -> TreeScorer:
            return TreeScorer(
                RecordedProfiler(store, DEVICE),
                GatedRewriter(),
                store,
                budget_s=BUDGET_S,
                eval_config=EVAL_CONFIG,
                context=CONTEXT,
                executor=executor,
            )

        tree = fixed_tree("full")
        with LocalExecutor(workers=2) as executor:
            parallel = scorer(executor)
            on_workers = parallel.score(tree, train)
        assert parallel.stats.evaluations_run == len(train)
        serial = scorer()
        in_process = serial.score(tree, train)
        assert serial.stats.evaluations_run == 0  # everything the workers stored is found
    assert [o.candidate_hash for o in in_process.outcomes] == [
        o.candidate_hash for o in on_workers.outcomes
    ]
    assert in_process.value == on_workers.value
    assert all(o.correct for o in on_workers.outcomes)
