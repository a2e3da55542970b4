"""Running evaluation and recording jobs on many GPUs: a local worker pool or a Ray cluster."""

from __future__ import annotations

from autoprofiler.execute.base import (
    Executor,
    ExecutorError,
    Job,
    JobResult,
    JobState,
)
from autoprofiler.execute.evaluation import Evaluated, evaluate_job, evaluate_many
from autoprofiler.execute.local import LocalExecutor, visible_gpus
from autoprofiler.execute.ray_executor import RayExecutor  # ray itself is imported on use
from autoprofiler.execute.recording import RecordedChunk, record_job, record_many

EXECUTORS = ("local", "ray")


def open_executor(
    kind: str = "local", workers: int | None = None, ray_address: str | None = None
) -> Executor:
    """A ``LocalExecutor`` (``workers``: how many, default one per visible GPU or one CPU
    worker) or a ``RayExecutor`` (joining ``ray_address``, default a new local cluster);
    raises ``ExecutorError`` with a one-line message."""
    if kind == "local":
        if ray_address:
            raise ExecutorError("--ray-address needs --executor ray")
        return LocalExecutor(workers)
    if kind == "ray":
        return RayExecutor(ray_address, workers)
    raise ExecutorError(f"executor must be one of {', '.join(EXECUTORS)}, not {kind!r}")


__all__ = [
    "EXECUTORS",
    "Evaluated",
    "Executor",
    "ExecutorError",
    "Job",
    "JobResult",
    "JobState",
    "LocalExecutor",
    "RayExecutor",
    "RecordedChunk",
    "evaluate_job",
    "evaluate_many",
    "open_executor",
    "record_job",
    "record_many",
    "visible_gpus",
]
