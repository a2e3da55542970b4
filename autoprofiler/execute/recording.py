"""Recording profiles through an executor, a chunk of problems per job.

``record_job`` is the picklable job: ``record_profiles`` of a chunk of problems and groups with
this worker's profilers (ncu on the GPU the worker is pinned to) into a scratch store, returned
whole as bytes. ``record_many`` sends the (problem, group) pairs the store still lacks as jobs
and merges each returned store into its own as it arrives (``merge_recorded``), so the driver
alone writes the store and a stopped run keeps every chunk that finished.
"""

from __future__ import annotations

import logging
import math
import tempfile
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from autoprofiler.execute.base import Executor, ExecutorError, Job, JobState
from autoprofiler.problem import Problem
from autoprofiler.profile.recording import (
    RecordingReport,
    merge_recorded,
    pending_problems,
    record_profiles,
)
from autoprofiler.store import Store, content_key

log = logging.getLogger(__name__)

MAX_CHUNK = 16


@dataclass
class RecordedChunk:
    """What one ``record_job`` did, and the scratch store it recorded into (SQLite bytes)."""

    report: RecordingReport
    store_bytes: bytes


@dataclass(frozen=True)
class ChunkDone:
    """A chunk finished (or lost, all failed), for progress: its label, the profiles it
    recorded and failed, and how many chunks the run has."""

    label: str
    recorded: int
    failed: int
    chunks: int


def record_job(
    problems: list[Problem], groups: list[str], device: str, stop_at: float | None = None
) -> RecordedChunk:
    """The job: record ``groups`` of ``problems`` under ``device`` with this worker's default
    profilers, starting nothing that would run past ``stop_at`` (a ``time.time()``)."""
    from autoprofiler.profile import default_profiler

    deadline_s = None if stop_at is None else max(stop_at - time.time(), 0.0)
    with tempfile.TemporaryDirectory(prefix="autoprofiler-record-") as folder:
        path = Path(folder) / "chunk.sqlite"
        with Store(path) as scratch:
            report = record_profiles(
                problems,
                groups,
                scratch,
                device,
                default_profiler(device),
                chunk_size=len(problems),
                deadline_s=deadline_s,
            )
        return RecordedChunk(report, path.read_bytes())


def _merge(store: Store, device: str, chunk: RecordedChunk) -> None:
    with tempfile.TemporaryDirectory(prefix="autoprofiler-merge-") as folder:
        path = Path(folder) / "chunk.sqlite"
        path.write_bytes(chunk.store_bytes)
        with Store(path) as scratch:
            merge_recorded(store, scratch, device)


def _record_jobs(
    store: Store,
    problems: Sequence[Problem],
    group_names: Sequence[str],
    device: str,
    *,
    workers: int = 1,
    chunk_size: int | None = None,
    retry_failed: bool = False,
    stop_at: float | None = None,
) -> tuple[list[Job], int]:
    """The jobs recording what ``store`` lacks, and how many (problem, group) pairs it has.

    A job records one group for ``chunk_size`` problems (default: enough chunks to keep
    ``workers`` busy, at most ``MAX_CHUNK`` problems each): one profiler start-up per job, as
    ``record_profiles`` pays one per chunk and group.
    """
    jobs = []
    skipped = 0
    for group in group_names:
        todo = pending_problems(store, device, group, problems, retry_failed)
        skipped += len(problems) - len(todo)
        size = chunk_size or min(MAX_CHUNK, math.ceil(len(todo) / workers) or 1)
        for start in range(0, len(todo), size):
            chunk = todo[start : start + size]
            key = content_key("record", device, group, [p.content_hash for p in chunk])
            label = f"{group} of {chunk[0].key}..{chunk[-1].key}"
            jobs.append(Job(key, record_job, (chunk, [group], device, stop_at), label))
    return jobs, skipped


def record_many(
    executor: Executor,
    store: Store,
    problems: Sequence[Problem],
    group_names: Sequence[str],
    device: str,
    *,
    chunk_size: int | None = None,
    retry_failed: bool = False,
    stop_at: float | None = None,
    on_chunk: Callable[[ChunkDone], None] | None = None,
) -> RecordingReport:
    """Record each (problem, group) once in ``store`` under ``device`` on ``executor``'s
    workers; resumable like ``record_profiles``. A chunk whose workers were lost is logged and
    counted failed (not recorded as a failure: a rerun tries it again); a chunk that raised
    (the profiler cannot run at all) raises ``ExecutorError``. ``on_chunk`` hears of each
    chunk as it finishes."""
    began = time.monotonic()
    for problem in problems:
        store.put_problem(problem)
    jobs, skipped = _record_jobs(
        store,
        problems,
        group_names,
        device,
        workers=executor.slots,
        chunk_size=chunk_size,
        retry_failed=retry_failed,
        stop_at=stop_at,
    )
    by_key = {job.key: job for job in jobs}
    report = RecordingReport(skipped=skipped)
    for done in executor.run(jobs):
        if done.state is JobState.FAILED:
            raise ExecutorError(f"recording {done.label}: {done.error}")
        if done.state is JobState.LOST:
            log.warning("recording %s: %s", done.label, done.error)
            chunk_problems, chunk_groups = by_key[done.key].args[:2]
            lost = RecordingReport(failed=len(chunk_problems) * len(chunk_groups))
            chunk = RecordedChunk(lost, b"")
        else:
            chunk = done.value
            _merge(store, device, chunk)
            log.info("recorded %s: %d profiles", done.label, chunk.report.recorded)
        report.recorded += chunk.report.recorded
        report.failed += chunk.report.failed
        report.stopped_early |= chunk.report.stopped_early
        if on_chunk is not None:
            on_chunk(ChunkDone(done.label, chunk.report.recorded, chunk.report.failed, len(jobs)))
    report.seconds = time.monotonic() - began
    return report
