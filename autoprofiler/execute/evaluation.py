"""Evaluating many candidates through an executor; the driver alone writes the store.

``evaluate_job`` is the picklable job a worker runs: ``evaluate()`` of one candidate for one
problem with no store (it spawns its own isolated worker process, on the GPU the executor's
worker is pinned to). ``evaluate_many`` answers what it can from the store, sends the rest as
jobs keyed by their evaluation key (so a pair asked for twice is evaluated once), and stores
and yields each result as it arrives.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable, Iterator
from typing import NamedTuple

from autoprofiler.evaluate import (
    EvalConfig,
    EvalResult,
    FailureKind,
    evaluate,
    evaluate_compiled_reference,
)
from autoprofiler.evaluate.build import lane_for, needs_build
from autoprofiler.evaluate.runner import (
    cached_evaluation,
    evaluation_key,
    store_evaluation,
)
from autoprofiler.execute.base import Executor, ExecutorError, Job, JobResult, JobState
from autoprofiler.problem import Problem, source_hash
from autoprofiler.store import Store

log = logging.getLogger(__name__)

LOST_PREFIX = "executor: "  # how a result whose workers were lost begins its failure message


class Evaluated(NamedTuple):
    """One evaluation: the problem, the candidate source and its verdict."""

    problem: Problem
    source: str
    result: EvalResult


def evaluate_job(
    problem: Problem, source: str, config: EvalConfig, compiled_reference: bool = False
) -> tuple[str, EvalResult]:
    """The job: judge ``source`` against ``problem`` here (``compiled_reference``: it is
    torch.compile of the reference, judged in the trusted process alone); returns the
    evaluation key as this worker computes it (its device names the result) and the result."""
    judge = evaluate_compiled_reference if compiled_reference else evaluate
    result = judge(problem, source, config, store=None)
    return evaluation_key(problem, source_hash(source), config), result


def _lost(problem: Problem, source: str, reason: str) -> EvalResult:
    result = EvalResult(problem_hash=problem.content_hash, candidate_hash=source_hash(source))
    result.failure_kind = FailureKind.KILLED_BY_SIGNAL
    result.failure_message = LOST_PREFIX + reason
    return result


def _reusable(result: EvalResult | None) -> bool:
    """A stored result worth reusing: not one whose workers were lost (a rerun tries again)."""
    return result is not None and not result.failure_message.startswith(LOST_PREFIX)


def evaluate_many(
    pairs: Iterable[tuple[Problem, str]],
    config: EvalConfig,
    *,
    executor: Executor | None = None,
    store: Store | None = None,
    use_cache: bool = True,
    compiled_reference: bool = False,
) -> Iterator[Evaluated]:
    """Evaluate each ``(problem, candidate source)`` once, yielding results as they finish.

    Results found in ``store`` come first (when ``use_cache``); the rest run as jobs on
    ``executor`` (in this process, one by one, when None) and are written to ``store`` as they
    arrive, so an interrupted run keeps what finished. A job whose workers were lost gives a
    failed result, recorded with the reason but not reused (the next run tries it again); a
    job that raised (an unusable sandbox) raises ``ExecutorError``. Replays
    (``config.replay_device``) read the store, so they run here. The cache is looked up with
    this process's device label: run the driver on the kind of device the workers have.
    ``compiled_reference``: every source is torch.compile of its problem's reference, as
    autoprofiler writes it (``evaluate_compiled_reference``: no candidate process runs).
    """
    replay = config.replay_device is not None  # replays read the store: they run here
    jobs: list[Job] = []
    asked: dict[str, tuple[Problem, str]] = {}
    for problem, source in pairs:
        key = evaluation_key(problem, source_hash(source), config)
        if key in asked:
            continue
        asked[key] = (problem, source)
        if store is not None and use_cache and not replay:
            cached = cached_evaluation(store, problem, source, config)
            if cached is not None and _reusable(cached):
                yield Evaluated(problem, source, cached)
                continue
        job_args = (problem, source, config, compiled_reference)
        jobs.append(Job(key, evaluate_job, job_args, label=problem.key))
    if executor is None or replay:
        todo = [asked[job.key] for job in jobs]
        yield from _evaluate_here(todo, config, store, replay, compiled_reference)
        return
    results = executor.run(jobs)
    try:
        for done in results:
            problem, source = asked[done.key]
            yield Evaluated(problem, source, _stored(done, problem, source, config, store))
    finally:
        results.close()  # stops the workers of unfinished jobs when the caller stops early


def _evaluate_here(
    pairs: list[tuple[Problem, str]],
    config: EvalConfig,
    store: Store | None,
    replay: bool,
    compiled_reference: bool = False,
) -> Iterator[Evaluated]:
    """One by one in this process, with the CUDA extensions and Triton kernels of later
    candidates built in the build lane meanwhile. A candidate with an extension waits for its
    own build run (at most the compile limit, then that run is stopped: the timed run builds
    itself, and the two must not build in one folder at once); one with Triton kernels only
    does not: when its build run is not over, the timed run compiles them itself (on the H200
    a first candidate that waited took 7 s more, docs/results/evaluator_throughput.md)."""
    judge = evaluate_compiled_reference if compiled_reference else evaluate
    lane = None if replay or compiled_reference else lane_for(config)
    if lane is not None:
        for problem, source in pairs:
            lane.submit(problem, source)
    try:
        for problem, source in pairs:
            if lane is not None and needs_build(source):
                lane.settle(source, config.compile_timeout_s)
            log.info("%s: judging candidate %s", problem.key, source_hash(source))
            result = judge(problem, source, config, store=store, use_cache=False)
            yield Evaluated(problem, source, result)
    finally:
        if lane is not None:
            lane.close()


def _stored(
    done: JobResult, problem: Problem, source: str, config: EvalConfig, store: Store | None
) -> EvalResult:
    """The job's result (failed when its workers were lost), written to ``store``."""
    if done.state is JobState.FAILED:
        raise ExecutorError(f"{problem.key}: {done.error}")
    if done.state is JobState.LOST:
        log.warning("%s: %s", problem.key, done.error)
        key, result = done.key, _lost(problem, source, done.error)
    else:
        key, result = done.value
    if store is not None:
        store_evaluation(store, problem, source, config, result, key)
    return result
