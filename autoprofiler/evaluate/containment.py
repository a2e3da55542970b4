"""A supervisor that leaves no process of a candidate behind when its evaluation ends.

A worker started in a new session can be killed with its process group, but a candidate that
starts its own session (``setsid``, ``start_new_session=True``) or double-forks leaves that
group. The supervisor runs the worker as its child and makes itself a Linux *child subreaper*
(``prctl(PR_SET_CHILD_SUBREAPER)``): every orphaned descendant is re-parented to it, whatever
session or group it moved to. When the child ends, or the supervisor is told to stop (SIGTERM,
SIGINT, SIGHUP, or its own parent died: ``PR_SET_PDEATHSIG``), it kills the child and then every
remaining descendant, and exits with the child's status: its exit code, or 128 + N when it died
of signal N (``sandbox.exit_status`` turns that back into -N).

The subreaper is the always-on mechanism. The opt-in bubblewrap sandbox (``sandbox.py``) adds a
PID namespace (``--unshare-pid``), whose processes all die with it. The supervisor itself cannot
outlive SIGKILL: stop it with SIGTERM and give it a few seconds before killing its group.
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

log = logging.getLogger(__name__)

PR_SET_PDEATHSIG = 1
PR_SET_CHILD_SUBREAPER = 36
SWEEP_LIMIT_S = 5.0
SWEEP_POLL_S = 0.01
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT, signal.SIGHUP)


def supervised_command(command: list[str], pass_fds: tuple[int, ...] = ()) -> list[str]:
    """The command line that runs ``command`` under the supervisor, keeping ``pass_fds`` open.

    Start it with ``subprocess.Popen(..., pass_fds=pass_fds, start_new_session=True)``.
    """
    fds = ["--pass-fds", ",".join(map(str, pass_fds))] if pass_fds else []
    # Run as a script, not ``-m``: the package (and torch with it) is never imported.
    return [sys.executable, str(Path(__file__).resolve()), *fds, "--", *command]


def _prctl(option: int, value: int) -> None:
    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(option, ctypes.c_ulong(value), 0, 0, 0) != 0:
        errno = ctypes.get_errno()
        raise OSError(errno, f"prctl({option}): {os.strerror(errno)}")


def descendants(root: int) -> list[int]:
    """Every process below ``root`` (zombies included), from the parent links in /proc."""
    children: dict[int, list[int]] = {}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            text = stat.read_text(encoding="utf-8", errors="replace")
        except OSError:  # gone meanwhile
            continue
        fields = text.rpartition(")")[2].split()  # the comm field may hold spaces and ")"
        if len(fields) > 1:
            children.setdefault(int(fields[1]), []).append(int(stat.parent.name))
    found, todo = [], [root]
    while todo:
        below = children.get(todo.pop(), [])
        found += below
        todo += below
    return found


def _reap() -> None:
    """Collect every child that has ended, so that none stays a zombie."""
    while True:
        try:
            pid, _ = os.waitpid(-1, os.WNOHANG)
        except ChildProcessError:
            return
        if pid == 0:
            return


def sweep() -> None:
    """Kill and reap every descendant until none is left (or ``SWEEP_LIMIT_S`` has passed)."""
    deadline = time.monotonic() + SWEEP_LIMIT_S
    while True:
        _reap()
        left = descendants(os.getpid())
        if not left:
            return
        if time.monotonic() > deadline:
            log.warning("%d descendant(s) survived SIGKILL: %s", len(left), left)
            return
        for pid in left:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
        time.sleep(SWEEP_POLL_S)


def make_subreaper(parent_death: int | None = None) -> None:
    """Make this process a child subreaper (and ask for ``parent_death`` when its parent
    dies); Linux only."""
    _prctl(PR_SET_CHILD_SUBREAPER, 1)
    if parent_death is not None:
        _prctl(PR_SET_PDEATHSIG, parent_death)


def wait_and_sweep(pid: int) -> int:
    """Wait for the child ``pid`` (reaping the orphans re-parented here meanwhile), then kill
    every remaining descendant; the child's status as ``Popen.returncode`` gives it."""
    while True:
        ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)  # look, leave it to reap
        if ended is None:
            continue
        if ended.si_pid == pid:
            _, status = os.waitpid(pid, 0)
            break
        os.waitpid(ended.si_pid, 0)
    sweep()
    return os.waitstatus_to_exitcode(status)


class _Stop:
    """Signal handling: a stop signal kills the child, or stops one from being started."""

    def __init__(self) -> None:
        self.child: subprocess.Popen[bytes] | None = None
        self.signal: int | None = None

    def __call__(self, signum: int, _frame: object = None) -> None:
        if self.signal is None:
            log.warning("supervisor got signal %d; killing the candidate", signum)
        self.signal = signum
        self.kill()

    def kill(self) -> None:
        if self.child is not None and self.child.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                os.kill(self.child.pid, signal.SIGKILL)


def _wait(child: subprocess.Popen[bytes]) -> int:
    """Wait for ``child``, reaping meanwhile the orphans re-parented to the supervisor."""
    while True:
        ended = os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOWAIT)  # look, leave it to reap
        if ended is None or ended.si_pid == child.pid:
            return child.wait()
        os.waitpid(ended.si_pid, 0)


def _fds(text: str) -> tuple[int, ...]:
    return tuple(int(fd) for fd in text.split(","))


def _parse(argv: list[str]) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="containment.py", description=__doc__)
    parser.add_argument(
        "--pass-fds", type=_fds, default=(), help="comma-separated fds the command inherits"
    )
    parser.add_argument("command", nargs="+", help="the command to run, after --")
    return parser.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Run the command under supervision; return the exit status to leave with."""
    parent = os.getppid()
    args = _parse(sys.argv[1:] if argv is None else argv)
    logging.basicConfig(format="containment: %(levelname)s: %(message)s")
    stop = _Stop()
    for signum in STOP_SIGNALS:
        signal.signal(signum, stop)
    linux = sys.platform.startswith("linux")
    if linux:
        _prctl(PR_SET_CHILD_SUBREAPER, 1)
        _prctl(PR_SET_PDEATHSIG, signal.SIGTERM)
        if os.getppid() != parent:  # the parent died before PR_SET_PDEATHSIG took effect
            stop(signal.SIGTERM)
    else:
        log.warning(
            "no prctl on %s: descendants that leave the process group are not tracked", sys.platform
        )
    if stop.signal is not None:
        return 128 + stop.signal
    try:
        stop.child = subprocess.Popen(
            args.command, pass_fds=args.pass_fds, start_new_session=not linux
        )
    except OSError as error:
        log.error("cannot start %s: %s", args.command[0], error)
        return 127
    if stop.signal is not None:  # a signal came while the child was starting
        stop.kill()
    if linux:
        returncode = _wait(stop.child)
        sweep()
    else:
        returncode = stop.child.wait()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(stop.child.pid, signal.SIGKILL)
    return returncode if returncode >= 0 else 128 - returncode


if __name__ == "__main__":
    sys.exit(main())
