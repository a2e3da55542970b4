"""Warm candidate processes: Python and torch imported once, each candidate in a fresh child.

A zygote (:func:`main`, in a process of its own) imports torch (with the symbolic-shape
module and sympy, which torch would import lazily), Triton and the candidate side without
touching CUDA: it refuses to serve if its imports opened the GPU's device files. Then,
for each candidate it is handed, it forks a child that starts a session of its own and runs
:func:`autoprofiler.evaluate.candidate.main`. The child makes its own CUDA context: none is
ever shared between candidates, and the zygote never has one. The zygote is a child subreaper
and runs one candidate at a time: when the child ends, every process left below the zygote is
the candidate's, and is killed (the sweep of :mod:`~autoprofiler.evaluate.containment`) before
the exit status goes back. It holds nothing a verdict depends on: a candidate that tampers with
it can slow or break later candidates of the same zygote, not forge their verdicts
(docs/SECURITY.md).

The runner talks to it over a Unix socket: a JSON request (job path, folder, environment)
with the candidate's standard input, log and status pipe as passed file descriptors; the
reply is the child's pid, and later its exit status. :class:`ForkedCandidate` gives the
runner the few ``subprocess.Popen`` methods it uses.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import traceback
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import IO, Any

from autoprofiler.evaluate.interpreter import main_command

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
GPU_DEVICE_FILES = "/dev/nvidia"
START_TIMEOUT_S = 120.0
MAX_MESSAGE = 1 << 20


class ForkServerError(RuntimeError):
    """The zygote could not be started or stopped answering."""


class ZygoteRefused(ForkServerError):
    """The zygote would not serve (its imports opened the GPU): none of its kind will."""

    reported = False  # set once a caller has told the user


# --- the zygote ------------------------------------------------------------------------------


def _child(request: dict, fds: list[int]) -> None:
    """In the forked child: become the candidate's process (never returns)."""
    stdin_fd, log_fd, status_fd = fds
    try:
        os.setsid()
        os.dup2(stdin_fd, 0)
        os.dup2(log_fd, 1)
        os.dup2(log_fd, 2)
        os.close(stdin_fd)
        os.close(log_fd)
        os.chdir(request["cwd"])
        os.environ.clear()
        os.environ.update(request["env"])
        tempfile.tempdir = None  # the zygote's was found before TMPDIR moved to this folder
        sys.stdin = open(0, encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stdout = open(1, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        sys.stderr = open(2, "w", encoding="utf-8", closefd=False)  # noqa: SIM115
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        from autoprofiler.evaluate import candidate

        candidate.main(["candidate", request["job"]], status_fd=status_fd)
    except BaseException:  # a harness failure: its traceback goes to the log the runner quotes
        traceback.print_exc()
        sys.stderr.flush()
    finally:
        os._exit(70)  # main leaves with os._exit; anything else is a harness failure


def _serve(channel: socket.socket) -> None:
    from autoprofiler.evaluate import containment

    current: list[int] = []

    def stop(_signum: int, _frame: object = None) -> None:
        """The runner died (``PR_SET_PDEATHSIG``) or asked us to go: the candidate goes too."""
        for pid in current:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(pid, signal.SIGKILL)
        containment.sweep()
        os._exit(0)

    signal.signal(signal.SIGTERM, stop)
    containment.make_subreaper(parent_death=signal.SIGTERM)
    while True:
        try:
            message, fds, _, _ = socket.recv_fds(channel, MAX_MESSAGE, 3)
        except OSError:
            return
        if not message:  # the runner is gone: so are we
            return
        request = json.loads(message)
        pid = os.fork()
        if pid == 0:
            channel.close()
            _child(request, fds)
        current[:] = [pid]
        for fd in fds:
            os.close(fd)
        channel.sendall(json.dumps({"pid": pid}).encode() + b"\n")
        status = containment.wait_and_sweep(pid)
        current.clear()
        channel.sendall(json.dumps({"exit": status}).encode() + b"\n")


def opened_gpu_files() -> list[str]:
    """The GPU device files this process holds open (a sign that CUDA was set up here)."""
    opened = []
    for fd in os.listdir("/proc/self/fd"):
        with contextlib.suppress(OSError):
            target = os.readlink(f"/proc/self/fd/{fd}")
            if target.startswith(GPU_DEVICE_FILES):
                opened.append(target)
    return opened


def main() -> int:
    channel = socket.socket(fileno=int(sys.argv[-1]))
    import torch  # the point of the zygote: imported once

    # What torch imports lazily at a candidate's first broadcast (``torch.broadcast_shapes``)
    # and torch.compile builds on: sympy. On the H200 its import took a Triton candidate's
    # first call 3-4 s where its bytecode was not cached (docs/results/evaluator_throughput.md).
    import torch.fx.experimental.symbolic_shapes  # noqa: F401

    import autoprofiler.evaluate.candidate  # noqa: F401

    # Triton too, once for all candidates. Not torch.compile's modules: on the H200 (torch 2.11)
    # importing torch._dynamo and torch._inductor opened /dev/nvidiactl (a CUDA query at
    # import), and CUDA must not be set up in a process that forks candidates
    # (docs/results/evaluator_throughput.md).
    with contextlib.suppress(Exception):  # none, or a broken one: the candidate's to find
        import triton  # noqa: F401

    opened = opened_gpu_files()
    if opened:  # a CUDA driver set up before fork fails in every child: no zygote, then
        refusal = {"ready": False, "why": f"its imports opened {opened[0]}"}
        channel.sendall(json.dumps(refusal).encode() + b"\n")
        return 1
    # What the zygote holds now lives as long as it does: out of the collector's sight, so
    # that a child's gc.collect() (a candidate run makes two) neither walks it nor, by
    # writing to each object's header, copies every page of it into the child: 0.1-0.3 s a
    # candidate on a 2-core CPU (docs/results/evaluator_throughput.md, session 36).
    gc.collect()
    gc.freeze()
    channel.sendall(b'{"ready": true}\n')
    try:
        _serve(channel)
    finally:
        gc.unfreeze()  # an orderly exit: frozen objects left at shutdown are reported leaked
    return 0


# --- the runner's side -----------------------------------------------------------------------


def import_environment(env: dict[str, str]) -> tuple[str | None, ...]:
    """What of ``env`` a zygote's imports depend on: candidates that differ here need
    zygotes of their own."""
    names = ("PYTHONPATH", "CUDA_VISIBLE_DEVICES", "TRITON_INTERPRET", "PYTHONPYCACHEPREFIX",
             "PYTHONDONTWRITEBYTECODE")  # fmt: skip
    return tuple(env.get(name) for name in names)


class Zygote:
    """One zygote process and the socket to it; one candidate at a time."""

    def __init__(self, env: dict[str, str]) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
        path = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
        self._process = subprocess.Popen(
            main_command(__name__, str(theirs.fileno())),
            pass_fds=(theirs.fileno(),),
            stdin=subprocess.DEVNULL,
            env={**env, "PYTHONPATH": path},
            start_new_session=True,
        )
        theirs.close()
        self._channel = ours
        self._reader: IO[bytes] = ours.makefile("rb")
        self._environment = dict(env)
        started = self._line(START_TIMEOUT_S)
        if started.get("ready") is not True:
            self.close()
            raise ZygoteRefused(f"the zygote refused to serve: {started.get('why', 'no reason')}")

    def _line(self, timeout_s: float | None) -> dict:
        self._channel.settimeout(timeout_s)
        try:
            line = self._reader.readline()
        except (OSError, TimeoutError):
            line = b""
        if not line:
            self.close()
            raise ForkServerError("the zygote stopped answering")
        return json.loads(line)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def serves(self, env: dict[str, str]) -> bool:
        """Whether a candidate with ``env`` may be forked from this zygote (same interpreter
        environment at import time)."""
        return import_environment(env) == import_environment(self._environment)

    def fork(self, job: Path, cwd: Path, env: dict[str, str], fds: list[int]) -> int:
        request = {"job": str(job), "cwd": str(cwd), "env": env}
        socket.send_fds(self._channel, [json.dumps(request).encode()], fds)
        return int(self._line(START_TIMEOUT_S)["pid"])

    def exit_status(self) -> int:
        """Block until the forked child has ended and been swept; its exit status."""
        return int(self._line(None)["exit"])

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._channel.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, signal.SIGKILL)
        self._process.wait()


class ForkedCandidate:
    """A candidate's process forked by a zygote, seen through the ``Popen`` methods the
    runner uses (``poll``, ``wait``, ``send_signal``, ``stdin``, ``pid``, ``returncode``)."""

    def __init__(self, zygote: Zygote, job: Path, cwd: Path, env: dict[str, str], log_fd: int,
                 status_fd: int, release: Any) -> None:  # fmt: skip
        stdin_read, stdin_write = os.pipe()
        try:
            self.pid = zygote.fork(job, cwd, env, [stdin_read, log_fd, status_fd])
        finally:
            os.close(stdin_read)
        self.stdin = os.fdopen(stdin_write, "wb")
        self.returncode: int | None = None
        self._done = threading.Event()
        self._zygote, self._release = zygote, release
        threading.Thread(target=self._await_exit, daemon=True).start()

    def _await_exit(self) -> None:
        try:
            status = self._zygote.exit_status()
        except ForkServerError:
            status = -signal.SIGKILL
        self.returncode = status
        self._release(self._zygote)  # before the runner can ask for the next one
        self._done.set()

    def poll(self) -> int | None:
        return self.returncode

    def wait(self, timeout: float | None = None) -> int:
        if not self._done.wait(timeout):
            raise subprocess.TimeoutExpired("forked candidate", timeout or 0.0)
        return self.returncode  # type: ignore[return-value]

    def send_signal(self, signum: int) -> None:
        if self.returncode is None:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(self.pid, signum)


class ZygotePool:
    """Idle zygotes, started as needed (one per concurrent evaluation), closed at exit."""

    def __init__(self) -> None:
        self._idle: list[Zygote] = []
        self._refused: dict[tuple[str | None, ...], ZygoteRefused] = {}
        self._lock = threading.Lock()
        # Zygotes are started from one thread that lives as long as the process: a child's
        # PR_SET_PDEATHSIG fires when the *thread* that started it ends.
        self._launcher = ThreadPoolExecutor(1, thread_name_prefix="autoprofiler-zygotes")
        atexit.register(self.close)

    def start(self, job: Path, cwd: Path, env: dict[str, str], log_fd: int,
              status_fd: int) -> ForkedCandidate:  # fmt: skip
        kind = import_environment(env)
        with self._lock:
            if kind in self._refused:
                raise self._refused[kind]
            # The most recently idle first: the warmest, and the one a caller just used.
            zygote = next((z for z in reversed(self._idle) if z.alive and z.serves(env)), None)
            if zygote is not None:
                self._idle.remove(zygote)
        if zygote is None:
            try:
                zygote = self._launcher.submit(Zygote, env).result()
            except ZygoteRefused as refused:
                with self._lock:
                    self._refused[kind] = refused
                raise
        return ForkedCandidate(zygote, job, cwd, env, log_fd, status_fd, self._give_back)

    def _give_back(self, zygote: Zygote) -> None:
        if not zygote.alive:
            return
        with self._lock:
            self._idle.append(zygote)

    def close(self) -> None:
        with self._lock:
            idle, self._idle = self._idle, []
        for zygote in idle:
            zygote.close()


if __name__ == "__main__":
    sys.exit(main())
