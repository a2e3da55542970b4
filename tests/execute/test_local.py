"""``LocalExecutor`` with real worker processes: pinning, one result per key, workers killed
with ``os.kill`` mid-job (retried elsewhere, then lost), and the one-line errors."""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from pathlib import Path

import pytest

from autoprofiler.execute import (
    ExecutorError,
    Job,
    JobState,
    LocalExecutor,
    open_executor,
)

from .jobs import fails, variable, wait_to_be_killed, where

KILL_LIMIT_S = 60.0


def test_workers_are_pinned_and_each_key_runs_once() -> None:
    jobs = [Job(f"k{i}", where, (i,)) for i in range(6)]
    jobs += [Job("k1", where, (99,)), Job("bad", fails, ("boom\nsecond line",))]
    with LocalExecutor(gpus=["0", "1"]) as executor:  # pinning needs no GPU to be checked
        assert executor.worker_names == ["gpu0", "gpu1"]
        results = {r.key: r for r in executor.run(jobs)}
        again = list(executor.run([Job("k0", where, (0,))]))  # the pool serves a second run
    assert sorted(results) == sorted({job.key for job in jobs})
    assert results["k1"].value[0] == 1  # the first job given under a key is the one run
    assert results["bad"].state is JobState.FAILED
    assert results["bad"].error == "ValueError: boom" and results["bad"].attempts == 1
    done = [r for r in results.values() if r.ok]
    assert {(r.workers[0], r.value[2]) for r in done} <= {("gpu0", "0"), ("gpu1", "1")}
    pids = {r.value[1] for r in done}
    assert len(pids) <= 2 and again[0].value[1] in pids  # the same processes throughout
    assert all(pid_gone(pid) for pid in pids)  # and gone once the executor is closed


def test_cpu_workers_hide_gpus_and_share_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OMP_NUM_THREADS")
    with LocalExecutor(workers=2, gpus=[]) as executor:
        assert executor.worker_names == ["cpu0", "cpu1"]
        (result,) = executor.run([Job("one", variable, ("OMP_NUM_THREADS",))])
        (hidden,) = executor.run([Job("gpus", where, (0,))])
    assert result.value == str(max(1, (os.cpu_count() or 1) // 2))
    assert hidden.value[2] == ""


def pid_gone(pid: int, wait_s: float = 10.0) -> bool:
    deadline = time.monotonic() + wait_s
    while time.monotonic() < deadline:
        try:
            os.kill(pid, 0)
        except ProcessLookupError:
            return True
        time.sleep(0.05)
    return False


def kill_workers_as_they_wait(folder: Path, stop: threading.Event) -> None:
    """SIGKILL the worker of every pid file that appears in ``folder``."""
    killed: set[Path] = set()
    while not stop.is_set():
        for path in set(folder.glob("*.pid")) - killed:
            os.kill(int(path.read_text()), signal.SIGKILL)
            killed.add(path)
        time.sleep(0.05)


def test_a_worker_killed_mid_job_is_retried_elsewhere_and_one_killed_twice_is_lost(
    tmp_path: Path,
) -> None:
    stop = threading.Event()
    killer = threading.Thread(target=kill_workers_as_they_wait, args=(tmp_path, stop))
    killer.start()
    jobs = [
        Job("once", wait_to_be_killed, (str(tmp_path), "once", 1), label="once"),
        Job("twice", wait_to_be_killed, (str(tmp_path), "twice", 2), label="twice"),
    ]
    began = time.monotonic()
    try:
        with LocalExecutor(workers=2) as executor:
            results = {r.key: r for r in executor.run(jobs)}
    finally:
        stop.set()
        killer.join()
    assert time.monotonic() - began < KILL_LIMIT_S
    once, twice = results["once"], results["twice"]
    assert once.state is JobState.DONE and once.value == 2
    assert twice.state is JobState.LOST and twice.value is None
    assert "killed by SIGKILL" in twice.error and "2 attempts" in twice.error
    for result in (once, twice):
        assert result.attempts == 2
        assert result.workers[0] != result.workers[1]  # retried on the other worker
    assert sorted(p.name for p in tmp_path.glob("*.try")) == [
        "once.1.try",
        "once.2.try",
        "twice.1.try",
        "twice.2.try",
    ]  # never a third run


def test_bad_executor_choices_are_one_line(monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(ExecutorError, match=r"^executor must be one of local, ray, not 'x'$"):
        open_executor("x")
    with pytest.raises(ExecutorError, match=r"^--ray-address needs --executor ray$"):
        open_executor("local", ray_address="auto")
    with pytest.raises(ExecutorError, match="at least 1"):
        LocalExecutor(workers=0)
    monkeypatch.setitem(sys.modules, "ray", None)  # as if ray were not installed
    with pytest.raises(ExecutorError) as missing:
        open_executor("ray")
    assert str(missing.value) == "the ray executor needs ray: pip install 'autoprofiler[ray]'"


def test_a_job_that_does_not_pickle_is_one_line() -> None:
    with (
        LocalExecutor(workers=1) as executor,
        pytest.raises(ExecutorError, match=r"cannot be sent: .*lambda"),
    ):
        list(executor.run([Job("lambda", lambda: 1, label="lambda")]))
