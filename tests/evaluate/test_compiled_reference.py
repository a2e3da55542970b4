"""torch.compile of the reference judged in the trusted reference process alone, on the CPU
(Inductor's C++ backend): its outputs checked against the reference's, its timing stored once
per problem like the reference's, and the candidate source never run."""

from __future__ import annotations

import dataclasses

import pytest

from autoprofiler.evaluate import FailureKind, evaluate, evaluate_compiled_reference
from autoprofiler.evaluate.baselines import compiled_candidate
from autoprofiler.evaluate.runner import compile_check_seeds
from autoprofiler.problem import problem_from_source
from autoprofiler.store import Store

from .test_evaluate import FAST

CONFIG = dataclasses.replace(FAST, compile_timeout_s=240, run_timeout_s=60)  # Inductor's C++

NOISY = """import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return x + torch.rand_like(x)  # a new draw every call: eager and compiled differ

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
"""


@pytest.mark.slow
def test_torch_compile_of_the_reference_is_judged_and_stored_without_a_candidate_process(
    scale_problem, tmp_path
) -> None:
    source = compiled_candidate(scale_problem)
    never_run = source + "\nraise SystemExit('a candidate process ran this file')\n"
    with Store(tmp_path / "s.sqlite") as store:
        result = evaluate_compiled_reference(scale_problem, never_run, CONFIG, store=store)
        assert result.correct, result.failure_message
        assert result.correctness_trials == len(compile_check_seeds(CONFIG)) == 3
        assert result.candidate == result.compiled_reference is not None
        assert result.speedup == pytest.approx(
            result.reference.median_ms / result.compiled_reference.median_ms
        )
        assert result.timed_s > 0 and result.wall_s >= result.timed_s
        assert store.count("baselines") == 2  # the reference and torch.compile, per problem
        again = evaluate_compiled_reference(scale_problem, never_run, CONFIG, store=store)
        assert again.from_cache and again.speedup == result.speedup
        # a candidate judged later, with the compile baseline asked for, reuses what is stored
        timed = dataclasses.replace(CONFIG, time_compile_baseline=True)
        other = evaluate(scale_problem, source, timed, store=store)
        assert other.correct, other.failure_message
        assert other.compiled_reference == result.compiled_reference
        assert store.count("baselines") == 2


@pytest.mark.slow
def test_a_compiled_reference_whose_outputs_differ_is_wrong_values(tmp_path) -> None:
    problem = problem_from_source(NOISY, "noisy", "<test>")
    result = evaluate_compiled_reference(problem, compiled_candidate(problem), CONFIG)
    assert not result.correct and result.failure_kind is FailureKind.WRONG_VALUES
    assert result.failure_message.startswith("torch.compile of the reference (seed ")
    assert result.speedup is None and result.compiled_reference is not None


def test_a_reference_that_does_not_build_is_a_reference_error() -> None:
    broken = NOISY.replace("return []", "raise RuntimeError('no init inputs today')")
    problem = problem_from_source(broken, "broken", "<test>")
    result = evaluate_compiled_reference(problem, compiled_candidate(problem), CONFIG)
    assert result.failure_kind is FailureKind.REFERENCE_ERROR
    assert result.failure_message.startswith("the reference: ")
    assert "\n" not in result.failure_message


def test_an_executor_job_can_ask_for_the_trusted_verdict() -> None:
    from autoprofiler.execute.evaluation import evaluate_job

    broken = NOISY.replace("return []", "raise RuntimeError('no init inputs today')")
    problem = problem_from_source(broken, "broken", "<test>")
    _, trusted = evaluate_job(problem, compiled_candidate(problem), CONFIG, True)
    _, as_candidate = evaluate_job(problem, compiled_candidate(problem), CONFIG)
    assert trusted.failure_message.startswith("the reference: ")
    assert not as_candidate.failure_message.startswith("the reference: ")
    assert trusted.failure_kind is as_candidate.failure_kind is FailureKind.REFERENCE_ERROR


@pytest.mark.slow
def test_a_compile_baseline_timed_slow_is_timed_again_at_the_first_large_win(
    scale_problem, tmp_path
) -> None:
    """As for the reference (test_evaluate): a stored torch.compile timing ten times too slow
    would make a torch.compile candidate a 10x win over it; the win has it timed again."""
    from autoprofiler.evaluate import runner

    timed = dataclasses.replace(CONFIG, time_compile_baseline=True)
    source = compiled_candidate(scale_problem)
    runner.REFERENCES.close()  # no warm process remembers a timing of this problem
    with Store(tmp_path / "s.sqlite") as store:
        first = evaluate(scale_problem, source, timed, store=store)
        assert first.correct, first.failure_message
        key, problem_hash, device, kind, stored = next(
            row for row in store.iter_baselines() if row[3] == "compile"
        )
        slow = {**stored, "stats": {k: v * 10 if k.endswith("_ms") else v
                                    for k, v in stored["stats"].items()}}  # fmt: skip
        store.put_baseline(key, problem_hash, device, kind, slow)
        runner.REFERENCES.close()  # a new run: the slow timing comes from the store
        again = evaluate(scale_problem, source + "# again\n", timed, store=store)
        assert again.correct, again.failure_message
        assert again.speedup_vs_compile < runner.CONFIRM_SPEEDUP
        assert again.compiled_reference.median_ms < slow["stats"]["median_ms"]
        assert store.get_baseline(key)["stats"]["median_ms"] == again.compiled_reference.median_ms
