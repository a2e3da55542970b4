"""Where a command's evaluations and recordings run (``--executor``, ``--workers``,
``--ray-address``), with their progress on stderr; Ctrl-C keeps what finished."""

from __future__ import annotations

from typing import TYPE_CHECKING

from autoprofiler.cli.console import fail
from autoprofiler.cli.progress import Progress, eval_verdict

if TYPE_CHECKING:
    from autoprofiler.evaluate import EvalConfig, EvalResult
    from autoprofiler.execute import Executor
    from autoprofiler.execute.recording import ChunkDone
    from autoprofiler.problem import Problem
    from autoprofiler.profile import RecordingReport
    from autoprofiler.store import Store


def make_executor(kind: str, workers: int | None, ray_address: str | None) -> Executor:
    """The executor the options ask for (a context manager), or one error line."""
    from autoprofiler.execute import ExecutorError, open_executor

    try:
        return open_executor(kind, workers, ray_address)
    except ExecutorError as exc:
        fail(str(exc))


def evaluate_all(
    pairs: list[tuple[Problem, str]],
    config: EvalConfig,
    executor: Executor,
    db: Store,
    use_cache: bool = True,
) -> list[tuple[str, EvalResult]]:
    """``(problem key, EvalResult)`` for each of ``pairs`` in order, evaluated on ``executor``
    (stored as they finish), each one's verdict shown as it finishes. Ctrl-C keeps what
    finished and leaves with 130; an executor error is one line."""
    from autoprofiler.execute import ExecutorError, evaluate_many

    results = {}
    try:
        with Progress("eval", len(pairs)) as progress:
            for done in evaluate_many(
                pairs, config, executor=executor, store=db, use_cache=use_cache
            ):
                results[(done.problem.content_hash, done.source)] = done.result
                cached = done.result.from_cache
                verdict = eval_verdict(done.result) + (", cached" if cached else "")
                seconds = None if cached else done.result.wall_s or None
                progress.finished(done.problem.key, verdict, seconds)
    except ExecutorError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail(f"interrupted: {len(results)} of {len(pairs)} results kept in the store", 130)
    return [(p.key, results[(p.content_hash, source)]) for p, source in pairs]


def record_all(
    executor: Executor,
    db: Store,
    problems: list[Problem],
    groups: list[str],
    device_key: str,
) -> RecordingReport:
    """``record_many``, a progress line per chunk; Ctrl-C keeps the chunks that finished."""
    from autoprofiler.execute import ExecutorError, record_many

    try:
        with Progress("record") as progress:
            progress.status(f"{len(groups)} groups of {len(problems)} problems")

            def chunk_done(chunk: ChunkDone) -> None:
                progress.total(chunk.chunks)
                verdict = f"{chunk.recorded} recorded, {chunk.failed} failed"
                progress.finished(chunk.label, verdict)

            return record_many(executor, db, problems, groups, device_key, on_chunk=chunk_done)
    except ExecutorError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted: the chunks recorded so far are kept in the store", 130)
