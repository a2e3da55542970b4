"""The build lane: candidates' CUDA extensions and Triton kernels compiled on the CPU cores
ahead of their runs.

A candidate that calls ``torch.utils.cpp_extension.load_inline`` spends most of its evaluation
in ``nvcc`` (KernelBench's own few-shot example: 46 s of a 55 s evaluation), one with Triton
kernels seconds in LLVM, ``ptxas`` and the C compiler at its first launch, and the GPU idles
meanwhile. :class:`BuildLane` starts such candidates, several at once, in build-only runs: the
candidate's own process (fresh, under the containment supervisor, no GPU visible) imports it
and constructs ``ModelNew`` (on the CPU, or on the meta device when only Triton is to be
built), so that an extension lands in the candidate's own extension folder, the one its timed
run uses (:func:`~autoprofiler.evaluate.runner.candidate_folder`); on a GPU it then runs the
forward once on meta tensors with Triton compiling for the timing lane's GPU
(:mod:`~autoprofiler.evaluate.triton_build`), so that the kernels land in the candidate's own
Triton cache. Its timed run then finds them built and only loads them. A build run hands
nothing to the verdict: one that fails, hangs or is cut short only means the timed run builds
(and fails) as it would have without the lane.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import re
import subprocess
import sys
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, replace
from pathlib import Path

from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.containment import supervised_command
from autoprofiler.evaluate.runner import (
    candidate_folder,
    cuda_arch_list,
    default_work_root,
    on_gpu,
    sole_run,
    stop_process,
    worker_env,
)
from autoprofiler.problem import Problem, source_hash

log = logging.getLogger(__name__)

EXTENSION_BUILD = re.compile(r"\bload_inline\b|cpp_extension\.load\b|\bcpp_extension import load\b")
TRITON_KERNEL = re.compile(r"^\s*@\s*triton\.(?:jit|autotune|heuristics)\b", re.MULTILINE)
MAX_WORKERS = 8
JOBS_PER_BUILD = "2"
NO_REPORT = "no report (killed or timed out)"
LANE_CLOSED = "the lane closed before it ended"
OVERTAKEN = "its timed run was due"


def needs_build(source: str) -> bool:
    """Whether the candidate compiles a C++/CUDA extension (``load_inline`` and kin)."""
    return bool(EXTENSION_BUILD.search(source))


def has_triton_kernels(source: str) -> bool:
    """Whether the candidate defines Triton kernels (``@triton.jit`` and kin)."""
    return bool(TRITON_KERNEL.search(source))


@dataclass(frozen=True)
class BuildOutcome:
    """What a build run did: whether it got through import and construction, in how long,
    and how many Triton kernels it compiled."""

    built: bool
    seconds: float
    message: str = ""
    triton_kernels: int = 0


def lane_workers() -> int:
    """Builds at once: half the CPU cores (``nvcc`` and ``ninja`` use more), at most 8."""
    return max(1, min(MAX_WORKERS, (os.cpu_count() or 2) // 2))


class BuildLane:
    """Build runs in the background, one per candidate source that needs a build.

    ``submit`` queues a candidate (nothing happens for one that needs no build, and each
    source is built once); ``wait`` blocks until its build run is over, or for at most
    ``timeout_s``; ``settle`` too, then stops one not over in time (its timed run is due, and
    the two must not build at once); ``close`` stops the runs still going. Triton kernels
    are built for ``triton_target`` (a compute capability, ``"9.0"``): by default the GPU's
    the evaluations run on, none when they run on the CPU (Triton's interpreter, no build).
    """

    def __init__(
        self,
        config: EvalConfig,
        work_root: Path | None = None,
        workers: int | None = None,
        triton_target: str | None = None,
    ) -> None:
        self.config = config
        self.triton_target = triton_target or (cuda_arch_list() if on_gpu(config) else None)
        self.root = work_root or default_work_root()
        self._pool = ThreadPoolExecutor(workers or lane_workers(), "autoprofiler-build")
        self._builds: dict[str, Future[BuildOutcome]] = {}
        self._running: dict[str, subprocess.Popen] = {}  # by source hash
        self._overtaken: set[str] = set()  # source hashes whose build settle stopped
        self._lock = threading.Lock()
        self._closed = False

    def _wanted(self, source: str) -> bool:
        triton = self.triton_target is not None and has_triton_kernels(source)
        return not self.config.sandbox and (needs_build(source) or triton)

    def submit(self, problem: Problem, source: str) -> None:
        if not self._wanted(source):
            return
        key = source_hash(source)
        with self._lock:
            if key not in self._builds and not self._closed:
                self._builds[key] = self._pool.submit(self._build, problem, source)

    def wait(self, source: str, timeout_s: float | None = None) -> BuildOutcome | None:
        """The outcome of ``source``'s build run (None: none was asked, or not over in time)."""
        future = self._builds.get(source_hash(source))
        if future is None:
            return None
        try:
            return future.result(timeout=timeout_s)
        except TimeoutError:
            return None

    def settle(self, source: str, timeout_s: float | None = None) -> BuildOutcome | None:
        """``wait``; then, were the build run not over in time, drop it (not yet begun) or
        stop it, and return how it ended (None: none was asked, or it never began)."""
        outcome = self.wait(source, timeout_s)
        key = source_hash(source)
        future = self._builds.get(key)
        if outcome is not None or future is None or future.cancel():
            return outcome
        with self._lock:
            self._overtaken.add(key)
            process = self._running.get(key)
        if process is not None:
            stop_process(process)
        return future.result()

    def _build(self, problem: Problem, source: str) -> BuildOutcome:
        began = time.perf_counter()
        work_dir, candidate_path = candidate_folder(self.root, source)
        run_id = f"build-{os.getpid()}-{time.monotonic_ns()}"
        report_path = work_dir / f"report-{run_id}.json"
        job_path = work_dir / f"job-{run_id}.json"
        output_dir = work_dir / run_id
        output_dir.mkdir()
        env, write_roots = worker_env(work_dir, self.config)
        env["CUDA_VISIBLE_DEVICES"] = ""  # the GPU is the timing lane's
        env.setdefault("MAX_JOBS", JOBS_PER_BUILD)
        extension = needs_build(source)
        job = {
            "build_only": True,
            # An extension is built by the constructor as the timed run calls it (on the CPU
            # here); Triton kernels need only shapes and dtypes.
            "build_device": "cpu" if extension else "meta",
            "triton_target": self.triton_target if has_triton_kernels(source) else None,
            "problem_source": problem.source,
            "candidate_path": str(candidate_path),
            "config": self.config.to_dict(),
            "output_dir": str(output_dir),
            "report_path": str(report_path),
            "status_fd": None,
            "write_roots": [*write_roots, str(output_dir)],
            "parent_pid": None,
        }
        job_path.write_text(json.dumps(job), encoding="utf-8")
        command = [sys.executable, "-m", "autoprofiler.evaluate.candidate", str(job_path)]
        key = source_hash(source)
        try:
            with sole_run(work_dir, env):
                self._run(key, problem, command, work_dir / f"{run_id}.log", env)
        finally:
            job_path.unlink(missing_ok=True)
            with contextlib.suppress(OSError):
                os.rmdir(output_dir)
        outcome = _outcome(report_path, time.perf_counter() - began)
        with self._lock:
            why = LANE_CLOSED if self._closed else OVERTAKEN if key in self._overtaken else ""
        stopped = bool(why) and outcome.message == NO_REPORT
        if stopped:  # close() or settle() stopped it: the candidate did nothing wrong
            outcome = replace(outcome, message=why)
        kernels = f"{outcome.triton_kernels} Triton kernels" if outcome.triton_kernels else ""
        detail = "; ".join(part for part in (kernels, outcome.message) if part)
        state = "done" if outcome.built else "stopped" if stopped else "failed"
        log.info(
            "%s: build run %s in %.1f s%s", problem.key, state, outcome.seconds,
            f" ({detail})" if detail else "",
        )  # fmt: skip
        return outcome

    def _run(
        self, key: str, problem: Problem, command: list[str], log_path: Path, env: dict[str, str]
    ) -> None:
        """The build run's process, from start to stop (not started once the lane closed or
        the candidate's timed run overtook it; started under the lock that says so)."""
        with self._lock, open(log_path, "wb") as log_file:
            if self._closed or key in self._overtaken:
                return
            process = subprocess.Popen(
                supervised_command(command),
                cwd=log_path.parent,
                stdin=subprocess.PIPE,  # closed by stop_process; a build run reads nothing
                stdout=log_file,
                stderr=subprocess.STDOUT,
                env=env,
                start_new_session=True,
            )
            self._running[key] = process
        try:
            process.wait(timeout=self.config.compile_timeout_s)
        except subprocess.TimeoutExpired:
            log.info("%s: build run over %g s, stopped", problem.key, self.config.compile_timeout_s)
        finally:
            stop_process(process)
            with self._lock:
                del self._running[key]

    def close(self) -> None:
        with self._lock:
            self._closed = True
            running = list(self._running.values())
        for future in self._builds.values():
            future.cancel()
        for process in running:
            stop_process(process)
        self._pool.shutdown(wait=True)

    def __enter__(self) -> BuildLane:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _outcome(report_path: Path, seconds: float) -> BuildOutcome:
    try:
        report = json.loads(report_path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return BuildOutcome(False, seconds, NO_REPORT)
    finally:
        report_path.unlink(missing_ok=True)
    if not isinstance(report, dict) or report.get("failure_kind"):
        message = str(report.get("failure_message", "")) if isinstance(report, dict) else ""
        return BuildOutcome(False, seconds, message.splitlines()[0][:200] if message else "")
    prebuilt = report.get("prebuilt") if isinstance(report.get("prebuilt"), dict) else {}
    kernels = prebuilt.get("kernels", 0)
    stopped = str(prebuilt.get("stopped") or "")
    message = f"Triton dry run stopped: {stopped}" if stopped else ""
    return BuildOutcome(True, seconds, message, kernels if isinstance(kernels, int) else 0)


def lane_for(config: EvalConfig) -> BuildLane | None:
    """A build lane for evaluations under ``config``, or None where it would not help: in a
    sandbox (the timed run's folders are its own) or with ``AUTOPROFILER_BUILD_LANE=0``."""
    if config.sandbox or os.environ.get("AUTOPROFILER_BUILD_LANE") == "0":
        return None
    return BuildLane(config)
