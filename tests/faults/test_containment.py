"""The containment supervisor: no process a candidate starts outlives its evaluation.

Real processes throughout. The candidate script leaks ``sleep 300`` three ways: in a new
session, through a double fork, and in a new session under a name made to confuse a naive
``/proc/PID/stat`` parser. A control run without the supervisor shows that those leaks are real.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoprofiler.evaluate import containment
from autoprofiler.evaluate.containment import supervised_command
from autoprofiler.evaluate.sandbox import exit_status

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="the supervisor's tracking needs Linux prctl"
)

# A comm field with spaces and parentheses: cut at the first ")" it reads as ppid 1.
TRICKY_NAME = "a) S 1 (b"

LEAKER = textwrap.dedent(
    """
    import json, os, signal, subprocess, sys, time

    pids_path, mode, tricky = sys.argv[1:4]
    session = subprocess.Popen(["sleep", "300"], start_new_session=True)
    named = subprocess.Popen(["sleep", "300"], executable=tricky, start_new_session=True)
    read_end, write_end = os.pipe()
    if os.fork() == 0:  # double fork: the sleep's parent exits at once
        os.setsid()
        pid = os.fork()
        if pid == 0:
            os.execvp("sleep", ["sleep", "300"])
        os.write(write_end, str(pid).encode())
        os._exit(0)
    os.close(write_end)
    grandchild = int(os.read(read_end, 64))
    os.wait()
    pids = {"child": os.getpid(), "leaked": [session.pid, named.pid, grandchild]}
    with open(pids_path + ".tmp", "w") as file:
        json.dump(pids, file)
    os.replace(pids_path + ".tmp", pids_path)
    if mode == "segv":
        os.kill(os.getpid(), signal.SIGSEGV)
    if mode == "wait":
        time.sleep(300)
    sys.exit(int(mode))
    """
)


@pytest.fixture
def leaker(tmp_path: Path) -> Iterator[tuple[list[str], Path]]:
    """The command of a candidate that leaks processes, and the file it names them in; every
    process it named is killed at the end, whatever the test found."""
    script = tmp_path / "leaker.py"
    script.write_text(LEAKER, encoding="utf-8")
    tricky = tmp_path / TRICKY_NAME
    tricky.symlink_to("/usr/bin/sleep" if Path("/usr/bin/sleep").exists() else "/bin/sleep")
    pids_path = tmp_path / "pids.json"

    def command(mode: str) -> list[str]:
        return [sys.executable, str(script), str(pids_path), mode, str(tricky)]

    yield command, pids_path
    if pids_path.exists():
        for pid in _pids(pids_path):
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGKILL)


def _pids(path: Path, timeout_s: float = 10.0) -> list[int]:
    """The candidate's own pid and those it leaked, once it has written them."""
    deadline = time.monotonic() + timeout_s
    while not path.exists():
        assert time.monotonic() < deadline, "the candidate never wrote its pids"
        time.sleep(0.02)
    pids = json.loads(path.read_text(encoding="utf-8"))
    return [pids["child"], *pids["leaked"]]


def _state(pid: int) -> str | None:
    """The process's state letter (Z: a zombie), or None when no such process exists."""
    try:
        return Path(f"/proc/{pid}/stat").read_text().rpartition(")")[2].split()[0]
    except (FileNotFoundError, ProcessLookupError):
        return None


def _left(pids: list[int], within_s: float = 0.0) -> dict[int, str]:
    """The pids that still exist (zombies included) after waiting up to ``within_s``."""
    deadline = time.monotonic() + within_s
    while True:
        left = {pid: state for pid in pids if (state := _state(pid)) is not None}
        if not left or time.monotonic() >= deadline:
            return left
        time.sleep(0.05)


def _run(command: list[str]) -> int:
    return subprocess.run(
        supervised_command(command), start_new_session=True, timeout=20, check=False
    ).returncode


def test_without_the_supervisor_the_leaks_survive_the_group_kill(leaker) -> None:
    """The premise: killing the worker's process group misses all three leaked sleeps."""
    command, pids_path = leaker
    process = subprocess.Popen(command("0"), start_new_session=True)
    process.wait(timeout=20)
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, signal.SIGKILL)
    leaked = _pids(pids_path)[1:]
    assert set(_left(leaked, within_s=0.5)) == set(leaked)


@pytest.mark.parametrize(("mode", "code"), [("0", 0), ("3", 3), ("segv", 128 + signal.SIGSEGV)])
def test_leaks_are_reaped_and_the_exit_status_is_the_childs(leaker, mode: str, code: int) -> None:
    command, pids_path = leaker
    returncode = _run(command(mode))
    assert returncode == code
    if mode == "segv":
        assert exit_status(returncode) == -signal.SIGSEGV
    # Reaped before the supervisor exited: not even a zombie is left.
    assert _left(_pids(pids_path)) == {}


def test_sigterm_to_the_supervisor_ends_the_child_and_its_leaks(leaker) -> None:
    command, pids_path = leaker
    supervisor = subprocess.Popen(supervised_command(command("wait")), start_new_session=True)
    try:
        pids = _pids(pids_path)
        assert _left(pids).keys() == set(pids)  # all running before the signal
        supervisor.send_signal(signal.SIGTERM)
        assert supervisor.wait(timeout=10) == 128 + signal.SIGKILL  # the child was killed
        assert _left(pids, within_s=5) == {}
    finally:
        supervisor.kill()
        supervisor.wait()


def test_when_the_supervisors_parent_dies_the_leaks_are_killed(leaker) -> None:
    command, pids_path = leaker
    parent_code = (
        "import json, subprocess, sys\n"
        "supervisor = subprocess.Popen(json.loads(sys.argv[1]), start_new_session=True)\n"
        "print(supervisor.pid, flush=True)\n"
        "supervisor.wait()\n"
    )
    parent = subprocess.Popen(
        [sys.executable, "-c", parent_code, json.dumps(supervised_command(command("wait")))],
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        supervisor_pid = int(parent.stdout.readline())
        pids = _pids(pids_path)
        assert _left(pids).keys() == set(pids)
    finally:
        parent.kill()
        parent.wait()
        parent.stdout.close()
    assert _left(pids, within_s=5) == {}
    # The supervisor itself has ended (a zombie where this machine's init does not reap it).
    assert _left([supervisor_pid], within_s=5) in ({}, {supervisor_pid: "Z"})


def test_named_fds_reach_the_child_and_no_others() -> None:
    named_read, named_write = os.pipe()
    other_read, other_write = os.pipe()
    child_code = (
        "import os, sys\n"
        "named, other = map(int, sys.argv[1:3])\n"
        "try:\n"
        "    os.fstat(other)\n"
        "    verdict = b'leaked'\n"
        "except OSError:\n"
        "    verdict = b'closed'\n"
        "os.write(named, b'hello ' + verdict)\n"
    )
    command = [sys.executable, "-c", child_code, str(named_write), str(other_write)]
    try:
        result = subprocess.run(
            supervised_command(command, pass_fds=(named_write,)),
            pass_fds=(named_write, other_write),  # the supervisor has both, passes one on
            start_new_session=True,
            timeout=20,
            check=False,
        )
        os.close(named_write)
        assert result.returncode == 0
        assert os.read(named_read, 100) == b"hello closed"
    finally:
        for fd in (named_read, named_write, other_read, other_write):
            with contextlib.suppress(OSError):
                os.close(fd)


def test_the_command_line_runs_the_supervisor_as_a_script() -> None:
    script = str(Path(containment.__file__).resolve())
    assert supervised_command(["w", "--x"], pass_fds=(3, 5)) == [
        sys.executable, script, "--pass-fds", "3,5", "--", "w", "--x",
    ]  # fmt: skip
    assert supervised_command(["w"]) == [sys.executable, script, "--", "w"]


def test_the_supervisor_does_not_load_torch(tmp_path: Path) -> None:
    """It starts in a fraction of a second: its child sees no torch library in its maps."""
    probe = (
        "import os; maps = open(f'/proc/{os.getppid()}/maps').read(); "
        "open('seen', 'w').write(str('libtorch' in maps or 'torch/_C' in maps))"
    )
    subprocess.run(
        supervised_command([sys.executable, "-c", probe]), cwd=tmp_path, timeout=30, check=True
    )
    assert (tmp_path / "seen").read_text() == "False"


LEAVES_ITS_SESSION = (
    "import subprocess\n"
    "_child = subprocess.Popen(['sleep', '300'], start_new_session=True)\n"
    "open('escaped.pid', 'w').write(str(_child.pid))\n"
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the subreaper is Linux only")
def test_a_candidate_that_leaves_its_session_leaves_nothing_running(tmp_path: Path) -> None:
    from autoprofiler.evaluate import evaluate
    from autoprofiler.problem import source_hash
    from tests.adversarial.cases import HONEST, QUICK_CPU_CONFIG, redteam_problem

    source = LEAVES_ITS_SESSION + HONEST
    evaluate(redteam_problem(), source, QUICK_CPU_CONFIG, work_root=tmp_path)
    pid_file = tmp_path / "candidates" / source_hash(source) / "escaped.pid"
    pid = int(pid_file.read_text())
    deadline = time.monotonic() + 5
    while Path(f"/proc/{pid}").exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert not Path(f"/proc/{pid}").exists(), f"the candidate's sleep {pid} outlived its evaluation"
