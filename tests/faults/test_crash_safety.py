"""Crash safety: ``autoprofiler learn`` and ``autoprofiler profile --record`` are killed with
SIGKILL at seeded random points, run again, and must end exactly where a run that was never
killed ends.

Each test first runs the command once to the end (the reference), then, on a second store,
starts it again and again and kills it: each kill waits until the store has reached a random
amount of progress (trials, recorded profiles; zero kills it while it starts up), then a random
fraction of a second more, so the kills land at start-up, mid-trial, mid-batch and between
writes. After the last kill the command is run to the end (``learn --resume``, ``profile
--record`` again). Then nothing may be lost (every record present after a kill is still there,
unchanged), nothing duplicated (the trials are numbered without gaps or extras and take the
reference's path; the recordings are the reference's keys), nothing corrupted (SQLite's integrity
check passes and every stored JSON value parses). Both commands run in real subprocesses on the
CPU: ``learn`` over the committed H200 recordings with the gated rewriter (half a second per
rewrite), ``profile --record`` with the CPU groups on the example problems.
"""

from __future__ import annotations

import json
import os
import random
import sqlite3
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol

import pytest

from autoprofiler.evaluate.containment import descendants
from autoprofiler.learn import StudyStorage
from autoprofiler.learn.study import STUDY_SPACE, TRIAL_SPACE
from autoprofiler.problem import Problem
from autoprofiler.profile import import_recordings
from autoprofiler.profile.recording import FAILURES_SPACE
from autoprofiler.store import Store
from tests.learn.conftest import RECORDINGS, ROOT, TRAIN
from tests.learn.test_cli import learn_args, write_jsonl

RUN_APP = "from autoprofiler.cli.main import app; app()"
CLI = [sys.executable, "-c", RUN_APP]
# A batch of profiles is written in a few milliseconds: the recording runs with each write
# slowed down (as on a slow disk), so that a kill can land between two records of one batch.
SLOW_WRITES = f"""
import time
from autoprofiler.store import Store
put = Store.put_profile_record
def slow_put(*args, **kwargs):
    time.sleep({{write_s}})
    return put(*args, **kwargs)
Store.put_profile_record = slow_put
{RUN_APP}
"""
EXAMPLES = ROOT / "examples" / "problems"
CPU_GROUPS = "static,torch.kernels,torch.ops"
STUDY = "crash"
SEED = 9
RUN_LIMIT_S = 120.0
POLL_S = 0.05
WRITE_S = 0.04
# The stored JSON values: (table, column).
JSON_COLUMNS = (
    ("candidates", "info"),
    ("evaluations", "result"),
    ("baselines", "result"),
    ("profile_records", "profile"),
    ("kv", "value"),
)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    """The commands' environment: CPU only, one thread, the examples at their small size."""
    return {
        **os.environ,
        "PYTHONPATH": str(ROOT),
        "CUDA_VISIBLE_DEVICES": "",
        "OMP_NUM_THREADS": "1",
        "AUTOPROFILER_EXAMPLE_SIZE": "small",
        "COLUMNS": "120",
    }


def query(path: Path, sql: str, params: tuple = ()) -> list[tuple]:
    """Rows of ``sql`` on the store at ``path``, read without writing anything."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30.0)
    try:
        return db.execute(sql, params).fetchall()
    finally:
        db.close()


class Crashable(Protocol):
    """A command line run again and again on one store, and what it has stored so far."""

    def argv(self) -> list[str]: ...

    def progress(self) -> int:
        """How much work is stored (trials, recorded profiles)."""
        ...

    def records(self) -> dict[str, str]:
        """Each stored record's key to its stored JSON text."""
        ...


def start(argv: list[str], env: dict[str, str], log: Path) -> subprocess.Popen:
    with open(log, "wb") as out:
        return subprocess.Popen(
            argv, cwd=ROOT, env=env, stdin=subprocess.DEVNULL, stdout=out, stderr=out
        )


def finish(process: subprocess.Popen, log: Path, timeout_s: float = RUN_LIMIT_S) -> None:
    """Wait for ``process`` (killed after ``timeout_s``); it must succeed."""
    try:
        process.wait(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"still running after {RUN_LIMIT_S} s")
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert process.returncode == 0, log.read_text(errors="replace")[-3000:]


def run_to_end(run: Crashable, env: dict[str, str], log: Path) -> float:
    """Run ``run`` to the end, watching its progress; the mean seconds between two steps of
    progress (one trial, one recorded profile)."""
    process = start(run.argv(), env, log)
    deadline = time.monotonic() + RUN_LIMIT_S
    steps: list[float] = []
    last = run.progress()
    while process.poll() is None and time.monotonic() < deadline:
        if (now := run.progress()) != last:
            steps.append(time.monotonic())
            last = now
        time.sleep(POLL_S)
    finish(process, log, timeout_s=0)
    return (steps[-1] - steps[0]) / (len(steps) - 1) if len(steps) > 1 else 1.0


def kill_at(run: Crashable, env: dict[str, str], target: int, delay_s: float, log: Path) -> int:
    """Start ``run``; once its progress reaches ``target``, wait ``delay_s`` more and SIGKILL it.
    Returns the progress at the kill, or -1 when the run ended first."""
    process = start(run.argv(), env, log)
    deadline = time.monotonic() + RUN_LIMIT_S
    while process.poll() is None and run.progress() < target and time.monotonic() < deadline:
        time.sleep(POLL_S)
    try:
        process.wait(timeout=delay_s)
    except subprocess.TimeoutExpired:
        process.kill()  # SIGKILL: no handler, no clean-up, no last write
        process.wait()
        return run.progress()
    finish(process, log, timeout_s=0)
    return -1


def kill_repeatedly(
    run: Crashable, env: dict[str, str], total: int, kills: int, step_s: float, logs: Path
) -> tuple[list[int], dict[str, str]]:
    """Kill ``kills`` runs of ``run``, the k-th once its progress reaches a random point of the
    k-th of ``kills`` equal spans of ``[0, total)``, plus a random part of ``step_s``.

    Returns the progress at each kill (-1: the run ended first), and every record that was
    stored after a kill (key to stored text)."""
    rng = random.Random(SEED)
    landed: list[int] = []
    seen: dict[str, str] = {}
    for k in range(kills):
        target = rng.randrange(k * total // kills, max((k + 1) * total // kills, 1))
        delay_s = rng.uniform(0.0, step_s)
        landed.append(kill_at(run, env, target, delay_s, logs / f"killed-{k}.log"))
        seen |= run.records()
    return landed, seen


def assert_sound(path: Path) -> None:
    """SQLite's integrity check passes and every stored JSON value parses."""
    with Store(path) as store:
        assert store.integrity_ok()
    for table, column in JSON_COLUMNS:
        for key, text in query(path, f"SELECT rowid, {column} FROM {table}"):
            try:
                json.loads(text)
            except ValueError as exc:
                pytest.fail(f"{table} row {key}: {column} is not JSON: {exc}")


def assert_kept(seen: dict[str, str], final: dict[str, str]) -> None:
    """Every record stored before a kill is still there, unchanged."""
    lost = sorted(key for key in seen if key not in final)
    changed = sorted(key for key in seen if key in final and final[key] != seen[key])
    assert not lost and not changed, f"lost {lost[:3]}..., changed {changed[:3]}..."


def recorded_store(path: Path) -> Path:
    """A new store at ``path`` holding the committed H200 recordings."""
    with Store(path) as store:
        import_recordings(RECORDINGS, store)
    return path


def train_problems(store_path: Path) -> list[Problem]:
    with Store(store_path) as store:
        hashes = dict.fromkeys(h for h, *_ in store.iter_profile_records())
        found = [p for h in hashes if (p := store.get_problem(h)) is not None]
    return [p for p in found if p.name in TRAIN]


@dataclass(frozen=True)
class LearnRun:
    """The same ``learn`` command line on one store, with ``--resume`` once the study exists."""

    store: Path
    problems: Path
    out: Path

    def argv(self) -> list[str]:
        args = [*learn_args(self.store, self.problems, STUDY), "-o", str(self.out)]
        created = query(
            self.store, "SELECT 1 FROM kv WHERE space=? AND key=?", (STUDY_SPACE, STUDY)
        )
        return [*CLI, *args, *(["--resume"] if created else [])]

    def records(self) -> dict[str, str]:
        return dict(query(self.store, "SELECT key, value FROM kv WHERE space=?", (TRIAL_SPACE,)))

    def progress(self) -> int:
        return len(self.records())

    def path(self) -> list[tuple]:
        """What each trial tried and what became of it, in order."""
        with Store(self.store) as store:
            trials = StudyStorage(store).trials(STUDY)
        return [(t.number, t.round, t.index, t.edit, t.state, t.tree_hash) for t in trials]


def test_learn_killed_at_random_points_resumes_to_the_uninterrupted_study(
    tmp_path: Path, env: dict[str, str]
) -> None:
    problems = tmp_path / "problems.jsonl"
    reference = LearnRun(
        recorded_store(tmp_path / "reference.sqlite"), problems, tmp_path / "r.json"
    )
    write_jsonl(problems, train_problems(reference.store))
    step_s = run_to_end(reference, env, tmp_path / "reference.log")
    expected = reference.path()
    assert len(expected) >= 4

    killed = LearnRun(recorded_store(tmp_path / "killed.sqlite"), problems, tmp_path / "k.json")
    landed, seen = kill_repeatedly(killed, env, len(expected), 3, 1.5 * step_s, tmp_path)
    run_to_end(killed, env, tmp_path / "resumed.log")

    assert sum(0 <= at < len(expected) for at in landed) >= 2, landed
    assert_sound(killed.store)
    final = killed.records()
    assert_kept(seen, final)
    assert sorted(final) == [f"{STUDY}/{n:06d}" for n in range(len(expected))]
    assert killed.path() == expected, landed
    assert json.loads(killed.out.read_text()) == json.loads(reference.out.read_text())


@dataclass(frozen=True)
class RecordRun:
    """``profile --record`` of the example problems' CPU groups on one store."""

    store: Path

    def argv(self) -> list[str]:
        groups = ["-g", CPU_GROUPS, "--store", str(self.store)]
        code = SLOW_WRITES.format(write_s=WRITE_S)
        return [sys.executable, "-c", code, "profile", str(EXAMPLES), "--record", *groups]

    def records(self) -> dict[str, str]:
        """Each recorded profile's key (problem, device, group) to its stored JSON text."""
        rows = query(self.store, "SELECT problem_hash, device, grp, profile FROM profile_records")
        return {f"{h}/{d}/{g}": text for h, d, g, text in rows}

    def progress(self) -> int:
        return query(self.store, "SELECT COUNT(*) FROM profile_records")[0][0]

    def metric_names(self) -> dict[str, list[str]]:
        """Each recorded profile's key to its metric names (the values are measurements)."""
        return {key: sorted(json.loads(text)["metrics"]) for key, text in self.records().items()}

    def failures(self) -> list[tuple]:
        return query(self.store, "SELECT key, value FROM kv WHERE space=?", (FAILURES_SPACE,))


def test_record_killed_at_random_points_reruns_to_the_uninterrupted_recordings(
    tmp_path: Path, env: dict[str, str]
) -> None:
    reference = RecordRun(tmp_path / "reference.sqlite")
    killed = RecordRun(tmp_path / "killed.sqlite")
    for run in (reference, killed):  # created here, so that progress can be read from the start
        Store(run.store).close()
    step_s = run_to_end(reference, env, tmp_path / "reference.log")
    expected = reference.metric_names()
    assert len(expected) == 3 * len(list(EXAMPLES.glob("*.py")))

    landed, seen = kill_repeatedly(killed, env, len(expected), 3, step_s, tmp_path)
    run_to_end(killed, env, tmp_path / "rerun.log")

    assert sum(0 <= at < len(expected) for at in landed) >= 2, landed
    assert_sound(killed.store)
    assert_kept(seen, killed.records())
    assert killed.metric_names() == expected
    assert killed.failures() == reference.failures() == []


DRIVER = """
import sys
from pathlib import Path
from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.problem import problem_from_source
problem = problem_from_source(Path(sys.argv[1]).read_text(), "scale", "<test>")
config = EvalConfig(device="cpu", compile_timeout_s=600, run_timeout_s=600)
evaluate(problem, Path(sys.argv[2]).read_text(), config, work_root=Path(sys.argv[3]))
"""
IN_FORWARD = "in_forward"
HANGS_IN_FORWARD = f"""
import time
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self, features):
        super().__init__()

    def forward(self, x):
        open("{IN_FORWARD}", "w").close()  # in the worker's own folder
        time.sleep(3600)
"""


def _alive(pid: int) -> bool:
    """Running, and not a zombie waiting to be reaped."""
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.mark.skipif(not Path("/proc/self/stat").exists(), reason="needs Linux /proc")
def test_an_evaluation_worker_ends_when_its_caller_is_killed(tmp_path: Path) -> None:
    """A learn or bench killed with SIGKILL cannot stop the candidate it was judging: the
    worker notices its caller is gone and ends itself, instead of holding a GPU for an hour."""
    from tests.conftest import SCALE_PROBLEM

    problem = tmp_path / "problem.py"
    problem.write_text(SCALE_PROBLEM)
    candidate = tmp_path / "candidate.py"
    candidate.write_text(HANGS_IN_FORWARD)
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    driver = subprocess.Popen(
        [sys.executable, "-c", DRIVER, str(problem), str(candidate), str(tmp_path / "work")],
        env=env,
    )
    deadline = time.monotonic() + 60
    # Kill the caller once the candidate is inside its forward, where it writes nothing more to
    # its caller (one killed earlier dies of the broken status pipe at its next phase).
    while not any((tmp_path / "work").rglob(IN_FORWARD)):
        assert driver.poll() is None and time.monotonic() < deadline, "the candidate never ran"
        time.sleep(0.05)
    below = descendants(driver.pid)  # the candidate's process, its zygote or supervisor, ...
    assert below
    driver.kill()
    driver.wait()
    deadline = time.monotonic() + 10
    while any(_alive(pid) for pid in below) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not [pid for pid in below if _alive(pid)], "a process outlived its killed caller"
