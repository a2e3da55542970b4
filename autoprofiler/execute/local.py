"""``LocalExecutor``: one worker process per visible GPU, pinned with ``CUDA_VISIBLE_DEVICES``.

Each GPU's workers have their own ``TMPDIR`` (ncu's machine-wide lock file lives there), so
the GPUs record profiles in parallel. With no GPU it runs ``workers`` CPU workers (default
one), each given an even share of the cores (``OMP_NUM_THREADS``, unless set). Workers are
``python -m autoprofiler.execute.worker`` processes in their own sessions (a Ctrl-C at the
terminal reaches the driver only; the driver then interrupts the workers, whose jobs clean up).
They start on first use and serve jobs until the executor is closed; a worker that dies is
started again when its slot is next needed. Drive an executor from one thread, the one that
outlives its workers (on Linux they are told to stop when the thread that started them ends).
"""

from __future__ import annotations

import contextlib
import logging
import os
import pickle
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from autoprofiler.evaluate.interpreter import main_command
from autoprofiler.evaluate.runner import PACKAGE_PARENT, default_work_root
from autoprofiler.execute.base import Executor, ExecutorError, Finished, Job, one_line
from autoprofiler.execute.channel import PARENT_VARIABLE, WORKER_VARIABLE, FrameBuffer, pack

log = logging.getLogger(__name__)

STOP_GRACE_S = 10.0  # how long an interrupted worker may take to clean up before SIGKILL
_READ_SIZE = 1 << 20


def visible_gpus() -> list[str]:
    """The GPUs this process may use, as ``CUDA_VISIBLE_DEVICES`` entries (ids or UUIDs)."""
    import torch

    count = torch.cuda.device_count()
    listed = os.environ.get("CUDA_VISIBLE_DEVICES")
    if listed is None:
        return [str(i) for i in range(count)]
    return [entry.strip() for entry in listed.split(",") if entry.strip()][:count]


def _gpu_temp_folder(gpu: str) -> str:
    """A temporary folder per GPU: ncu serializes every profiling run of a machine on the lock
    file ``$TMPDIR/nsight-compute-lock``, and with one per GPU each GPU records in parallel."""
    safe = re.sub(r"[^\w-]", "_", gpu)  # a UUID too
    folder = Path(tempfile.gettempdir()) / f"autoprofiler-gpu{safe}"
    folder.mkdir(parents=True, exist_ok=True)
    return str(folder)


class _Slot:
    """One worker process (started on demand) and the job it is running."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.env = env
        self.process: subprocess.Popen | None = None
        self.buffer = FrameBuffer()
        self.key: str | None = None

    def start(self) -> subprocess.Popen:
        if self.process is not None and self.process.poll() is not None:
            log.warning("%s while idle", self.reap())
        if self.process is None:
            self.process = subprocess.Popen(
                main_command("autoprofiler.execute.worker"),
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                env=self.env,
                start_new_session=True,
            )
            self.buffer = FrameBuffer()
            self._send(("init", sys.path, logging.getLogger().getEffectiveLevel()))
            log.info("worker %s started (pid %d)", self.name, self.process.pid)
        return self.process

    def _send(self, message: tuple) -> None:
        assert self.process is not None and self.process.stdin is not None
        self.process.stdin.write(pack(message))
        self.process.stdin.flush()

    def submit(self, key: str, payload: bytes) -> None:
        """Send a job, starting the worker again if it died while idle."""
        for attempt in (1, 2):
            try:
                self.start()
                self._send(("job", key, payload))
            except (BrokenPipeError, ValueError):
                self.reap()
                if attempt == 2:
                    raise ExecutorError(f"worker {self.name} dies on start") from None
                continue
            self.key = key
            return

    def read(self) -> list[Finished]:
        """What the worker sent; a worker that died reports its job lost."""
        assert self.process is not None and self.process.stdout is not None
        chunk = os.read(self.process.stdout.fileno(), _READ_SIZE)
        if not chunk:
            key, self.key = self.key, None
            reason = self.reap()
            return [] if key is None else [Finished(key, self.name, lost=reason)]
        finished = []
        for _, key, reply in self.buffer.feed(chunk):
            finished.append(Finished(key, self.name, reply=reply))
            self.key = None
        return finished

    def reap(self) -> str:
        """Wait for a dead worker; returns how it died."""
        if self.process is None:
            return "no process"
        with contextlib.suppress(OSError):
            self.close_pipes()
        code = self.process.wait()
        pid, self.process = self.process.pid, None
        if code < 0:
            with contextlib.suppress(ValueError):
                return f"worker {self.name} (pid {pid}) killed by {signal.Signals(-code).name}"
        return f"worker {self.name} (pid {pid}) exited with code {code}"

    def close_pipes(self) -> None:
        assert self.process is not None
        for pipe in (self.process.stdin, self.process.stdout):
            if pipe is not None:
                pipe.close()

    def interrupt(self) -> None:
        """Ask the worker to stop (SIGINT: its job's cleanup runs)."""
        if self.process is not None and self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                self.process.send_signal(signal.SIGINT)

    def finish(self, deadline: float) -> None:
        """Wait until ``deadline`` for the worker to leave, then kill its process group."""
        if self.process is None:
            return
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=max(deadline - time.monotonic(), 0.0))
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self.process.pid, signal.SIGKILL)
        self.reap()
        self.key = None


def _stop(busy: Sequence[_Slot], idle: Sequence[_Slot], grace_s: float) -> None:
    """Interrupt the ``busy`` workers, end the input of the ``idle`` ones, then wait for (or
    kill) each."""
    for slot in busy:
        slot.interrupt()
    for slot in idle:
        with contextlib.suppress(OSError):
            slot.close_pipes()
    deadline = time.monotonic() + grace_s
    for slot in [*busy, *idle]:
        slot.finish(deadline)


class LocalExecutor(Executor):
    """A worker process per GPU in ``gpus`` (default: the visible ones), or ``workers`` CPU
    workers when there is none. ``workers`` with GPUs sets the number of workers, spread over
    the GPUs in turn. See the module docstring."""

    name = "local"

    def __init__(
        self,
        workers: int | None = None,
        gpus: Sequence[str] | None = None,
        *,
        stop_grace_s: float = STOP_GRACE_S,
    ) -> None:
        if workers is not None and workers < 1:
            raise ExecutorError(f"workers must be at least 1, not {workers}")
        self.gpus = visible_gpus() if gpus is None else list(gpus)
        self.stop_grace_s = stop_grace_s
        count = workers or len(self.gpus) or 1
        base = {**os.environ, "AUTOPROFILER_HOME": str(default_work_root())}
        base["PYTHONPATH"] = os.pathsep.join(
            p for p in (PACKAGE_PARENT, os.environ.get("PYTHONPATH")) if p
        )
        self._slots = []
        for index in range(count):
            env = dict(base)
            if self.gpus:
                gpu = self.gpus[index % len(self.gpus)]
                name = f"gpu{gpu}" if count <= len(self.gpus) else f"gpu{gpu}.{index}"
                env["CUDA_VISIBLE_DEVICES"] = gpu
                env["TMPDIR"] = _gpu_temp_folder(gpu)
            else:
                name = f"cpu{index}"
                env["CUDA_VISIBLE_DEVICES"] = ""
                env.setdefault("OMP_NUM_THREADS", str(max(1, (os.cpu_count() or 1) // count)))
            env[WORKER_VARIABLE] = name
            env[PARENT_VARIABLE] = str(os.getpid())
            self._slots.append(_Slot(name, env))
        log.info("local executor: %s", ", ".join(s.name for s in self._slots))

    @property
    def slots(self) -> int:
        return len(self._slots)

    @property
    def worker_names(self) -> list[str]:
        return [slot.name for slot in self._slots]

    def start(self) -> None:
        """Start every worker now and wait until each answers (else they start on first use)."""
        pings = [Job(f"start {slot.name}", os.getpid) for slot in self._slots]
        for done in self.run(pings):  # idle workers take one job each
            if not done.ok:
                raise ExecutorError(f"a worker did not start: {done.error}")

    def _place(self, job: Job, avoid: list[str]) -> bool:
        idle = [s for s in self._slots if s.key is None]
        fresh = [s for s in idle if s.name not in avoid]
        if fresh:
            chosen = fresh[0]
        elif idle and all(s.name in avoid for s in self._slots):
            chosen = idle[0]  # nowhere else to go
        else:
            return False
        try:
            payload = pickle.dumps((job.fn, job.args), protocol=pickle.HIGHEST_PROTOCOL)
        except Exception as exc:
            message = f"job {job.label or job.key} cannot be sent: {one_line(exc)}"
            raise ExecutorError(message) from None
        chosen.submit(job.key, payload)
        return True

    def _collect(self, timeout_s: float) -> list[Finished]:
        busy = {s.process.stdout.fileno(): s for s in self._slots if s.key and s.process}
        if not busy:
            time.sleep(timeout_s)
            return []
        ready, _, _ = select.select(list(busy), [], [], timeout_s)
        return [finished for fd in ready for finished in busy[fd].read()]

    def _abandon(self) -> None:
        _stop([s for s in self._slots if s.key is not None], [], self.stop_grace_s)

    def close(self) -> None:
        """Idle workers leave at the end of their input; busy ones are interrupted."""
        started = [s for s in self._slots if s.process is not None]
        busy = [s for s in started if s.key is not None]
        _stop(busy, [s for s in started if s.key is None], self.stop_grace_s)
