"""The ``Executor`` interface: run picklable jobs on workers, retry lost ones, never twice.

A ``Job`` is a module-level function, its arguments and a key naming what it computes (an
evaluation key, a recording chunk). ``Executor.run`` takes jobs and yields one ``JobResult`` per
distinct key as each finishes, so the caller (the driver, the only writer of the store) keeps
whatever finished when the run is stopped. Backends implement four small hooks; the loop that
dedups, retries and stops lives here once.
"""

from __future__ import annotations

import logging
import time
import traceback
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from enum import Enum
from typing import Any

log = logging.getLogger(__name__)

POLL_S = 0.5  # how long the driver blocks waiting for results before checking again
MAX_ATTEMPTS = 2  # a job whose worker is lost runs once more, elsewhere


class ExecutorError(RuntimeError):
    """An executor cannot start or a job raised; the message is one line."""


class JobState(str, Enum):
    """How a job ended: ``done``; ``failed`` (it raised); ``lost`` (its worker died each try)."""

    DONE = "done"
    FAILED = "failed"
    LOST = "lost"


@dataclass(frozen=True)
class Job:
    """``fn(*args)`` on a worker. ``fn`` must be importable by name (a module-level function);
    ``key`` names the result: jobs with a key already given are not run again."""

    key: str
    fn: Callable[..., Any]
    args: tuple = ()
    label: str = ""


@dataclass
class JobResult:
    """What became of one job: its value when done, else a one-line ``error``; the workers it
    ran on (one per attempt) and the seconds its last attempt took on the worker."""

    key: str
    state: JobState
    value: Any = None
    error: str = ""
    workers: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    label: str = ""

    @property
    def ok(self) -> bool:
        return self.state is JobState.DONE

    @property
    def attempts(self) -> int:
        return len(self.workers)


@dataclass(frozen=True)
class Reply:
    """What a worker sends back for one attempt: the value, or the job's exception in one line."""

    value: Any = None
    error: str = ""
    wall_s: float = 0.0


def call_job(fn: Callable[..., Any], args: tuple) -> Reply:
    """Run ``fn(*args)`` on a worker; an exception becomes a ``Reply`` with its one-line error.

    ``KeyboardInterrupt`` and ``SystemExit`` propagate: the worker is being stopped.
    """
    began = time.perf_counter()
    try:
        value = fn(*args)
    except Exception as exc:
        log.debug("job raised:\n%s", traceback.format_exc())
        return Reply(error=one_line(exc), wall_s=time.perf_counter() - began)
    return Reply(value=value, wall_s=time.perf_counter() - began)


def one_line(exc: BaseException) -> str:
    """``"TypeName: first line of the message"``, at most 300 characters."""
    text = str(exc).strip().splitlines()
    return f"{type(exc).__name__}: {text[0] if text else ''}".rstrip(": ")[:300]


@dataclass(frozen=True)
class Finished:
    """A backend's report of one attempt: its reply, or why the worker was lost."""

    key: str
    worker: str
    reply: Reply | None = None
    lost: str = ""


class Executor(ABC):
    """Runs jobs on workers (one per GPU, or CPU workers).

    Contract of ``run``: every distinct key runs at most once to completion and gets exactly
    one ``JobResult``, yielded as soon as it is known (completion order). A job that raises is
    ``FAILED`` at once (its error is deterministic); a job whose worker dies (killed, crashed,
    node lost) runs once more on another worker where there is one, then is ``LOST`` with the
    reason. Leaving the iteration early (``break``, Ctrl-C) stops the workers of unfinished
    jobs; results already yielded stand, and the executor can run again (one ``run`` at a
    time). Close it when done (it is a context manager).

    Backends implement ``slots``, ``_place``, ``_collect``, ``_abandon`` and ``close``.
    """

    name: str = "executor"

    @property
    @abstractmethod
    def slots(self) -> int:
        """How many jobs run at once."""

    @abstractmethod
    def _place(self, job: Job, avoid: list[str]) -> bool:
        """Start ``job`` on a free worker, preferably not one in ``avoid`` (where it was lost);
        False when no suitable worker is free now."""

    @abstractmethod
    def _collect(self, timeout_s: float) -> list[Finished]:
        """Attempts that ended (waiting up to ``timeout_s`` for the first one)."""

    @abstractmethod
    def _abandon(self) -> None:
        """Stop every attempt in flight; their results are not wanted."""

    @abstractmethod
    def close(self) -> None:
        """Stop the workers and release what the executor holds."""

    def __enter__(self) -> Executor:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def run(self, jobs: Iterable[Job]) -> Iterator[JobResult]:
        """Run ``jobs`` and yield their results as they finish (see the class docstring)."""
        queue: list[Job] = []
        seen: set[str] = set()
        for job in jobs:
            if job.key in seen:
                log.debug("job %s given twice; runs once", job.label or job.key)
                continue
            seen.add(job.key)
            queue.append(job)
        tried: dict[str, list[str]] = {}
        running: dict[str, Job] = {}
        finished: set[str] = set()
        try:
            while queue or running:
                queue = self._start(queue, running, tried)
                for event in self._collect(POLL_S):
                    job = running.pop(event.key, None)
                    if job is None or job.key in finished:
                        log.warning("dropped a second result for job %s", event.key)
                        continue
                    tried.setdefault(job.key, []).append(event.worker)
                    if event.reply is None and len(tried[job.key]) < MAX_ATTEMPTS:
                        log.warning(
                            "%s: worker %s lost (%s); running it again elsewhere",
                            job.label or job.key,
                            event.worker,
                            event.lost,
                        )
                        queue.insert(0, job)
                        continue
                    finished.add(job.key)
                    yield _result(job, event, tried[job.key])
        finally:
            if running:
                log.info("stopping %d unfinished jobs", len(running))
                self._abandon()

    def _start(
        self, queue: list[Job], running: dict[str, Job], tried: dict[str, list[str]]
    ) -> list[Job]:
        """Place what fits on free workers; returns the jobs still waiting, in order."""
        waiting = []
        for index, job in enumerate(queue):
            if len(running) >= self.slots:
                return waiting + queue[index:]
            if self._place(job, tried.get(job.key, [])):
                running[job.key] = job
            else:
                waiting.append(job)
        return waiting


def _result(job: Job, event: Finished, workers: list[str]) -> JobResult:
    reply = event.reply
    if reply is None:
        error = f"worker lost on each of {len(workers)} attempts; last: {event.lost}"
        return JobResult(job.key, JobState.LOST, error=error, workers=workers, label=job.label)
    state = JobState.FAILED if reply.error else JobState.DONE
    return JobResult(
        job.key, state, reply.value, reply.error, workers, reply.wall_s, label=job.label
    )
