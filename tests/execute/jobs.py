"""Picklable jobs for the executor tests: run in real worker processes (local or Ray)."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path


def where(value: int) -> tuple[int, int, str]:
    """``value``, the worker's pid and what GPUs it may see."""
    return value, os.getpid(), os.environ.get("CUDA_VISIBLE_DEVICES", "<unset>")


def variable(name: str) -> str | None:
    """The worker's value of the environment variable ``name``."""
    return os.environ.get(name)


def fails(message: str) -> None:
    raise ValueError(message)


def wait_to_be_killed(folder: str, name: str, doomed: int) -> int:
    """On the first ``doomed`` attempts, write this worker's pid to ``folder/<name>.<attempt>.pid``
    and sleep (for the test to kill the worker); later, return the attempt number."""
    attempt = len(list(Path(folder).glob(f"{name}.*.try"))) + 1
    (Path(folder) / f"{name}.{attempt}.try").touch()
    if attempt > doomed:
        return attempt
    path = Path(folder) / f"{name}.{attempt}.pid"
    path.with_suffix(".tmp").write_text(str(os.getpid()))
    path.with_suffix(".tmp").rename(path)
    time.sleep(120)
    return attempt


def kill_self(folder: str, name: str, times: int) -> int:
    """SIGKILL this worker on the first ``times`` attempts (counted in ``folder``); then
    return the attempt number."""
    marks = Path(folder)
    attempt = len(list(marks.glob(f"{name}.*.try"))) + 1
    (marks / f"{name}.{attempt}.try").touch()
    if attempt <= times:
        os.kill(os.getpid(), signal.SIGKILL)
    return attempt
