"""``--executor``/``--workers`` on the command line: ``eval`` of many candidates, ``profile
--record``, and Ctrl-C in the middle of an ``eval`` (in a real subprocess)."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

from typer.testing import CliRunner

from autoprofiler.cli.main import app
from autoprofiler.evaluate.baselines import reference_as_candidate
from autoprofiler.problem import Problem
from tests.conftest import SCALE_PROBLEM

from .conftest import EXAMPLES, ROOT
from .test_local import pid_gone

runner = CliRunner()
CLI = [sys.executable, "-c", "from autoprofiler.cli.main import app; app()"]
STOP_LIMIT_S = 30.0
SLOW_CANDIDATE = """
import os, time
from pathlib import Path
Path({folder!r}, "pids").write_text(f"{{os.getpid()}} {{os.getppid()}}")
time.sleep(300)
"""


def test_eval_many_candidates_on_two_workers(examples: list[Problem], tmp_path: Path) -> None:
    candidates = tmp_path / "candidates"
    candidates.mkdir()
    for problem in examples[:2]:
        (candidates / f"{problem.name}.py").write_text(reference_as_candidate(problem))
    args = ["eval", str(EXAMPLES), str(candidates), "--ids", "5,9,12", "--device", "cpu"]
    args += ["--trials", "2", "--store", str(tmp_path / "s.sqlite"), "--workers", "2"]
    result = runner.invoke(app, [*args, "--json"])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert [row["problem"] for row in rows] == [p.key for p in examples[:2]]
    assert all(row["correct"] and not row["from_cache"] for row in rows)
    assert "no candidate for 1 problems: 12_transpose_copy" in result.stderr
    table = runner.invoke(app, args)
    assert "2 candidates from" in table.stdout and "geomean speedup" in table.stdout
    # The reference renamed calls every op of the reference: flagged, so not a speedup...
    assert "failures and 2 flagged count 1.0" in " ".join(table.stdout.split())
    # ... unless asked.
    counted = runner.invoke(app, [*args, "--count-flagged"])
    assert "2 flagged counted at their speedups" in " ".join(counted.stdout.split())


def test_profile_record_on_two_workers_resumes(tmp_path: Path) -> None:
    args = ["profile", str(EXAMPLES), "--ids", "5,9,12", "--record", "-g", "static,torch.ops"]
    args += ["--store", str(tmp_path / "s.sqlite"), "--workers", "2", "--profile-device", "cpu"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    assert "recorded 6, already there 0, failed 0 (cpu" in first.stdout
    again = runner.invoke(app, args)
    assert "recorded 0, already there 6, failed 0" in again.stdout
    both = runner.invoke(app, [*args, "--replay"])
    assert both.exit_code == 2 and "cannot take --replay" in both.stderr


def evaluations(store: Path) -> int:
    if not store.exists():
        return 0
    db = sqlite3.connect(f"file:{store}?mode=ro", uri=True, timeout=30.0)
    try:
        return db.execute("SELECT COUNT(*) FROM evaluations").fetchone()[0]
    except sqlite3.OperationalError:  # not created yet
        return 0
    finally:
        db.close()


def test_ctrl_c_stops_the_workers_and_keeps_what_finished(tmp_path: Path) -> None:
    problems, candidates = tmp_path / "problems", tmp_path / "candidates"
    problems.mkdir()
    candidates.mkdir()
    (problems / "1_quick.py").write_text(SCALE_PROBLEM)
    (problems / "2_slow.py").write_text(SCALE_PROBLEM.replace("FEATURES = 32", "FEATURES = 24"))
    (candidates / "1_quick.py").write_text(SCALE_PROBLEM.replace("class Model", "class ModelNew"))
    (candidates / "2_slow.py").write_text(SLOW_CANDIDATE.format(folder=str(tmp_path)))
    store = tmp_path / "s.sqlite"
    argv = [*CLI, "eval", str(problems), str(candidates), "--device", "cpu", "--trials", "2"]
    argv += ["--workers", "2", "--store", str(store)]
    env = {**os.environ, "PYTHONPATH": str(ROOT), "CUDA_VISIBLE_DEVICES": "", "COLUMNS": "200"}
    process = subprocess.Popen(
        argv, cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
    )
    pids = tmp_path / "pids"
    try:
        deadline = time.monotonic() + 120.0
        while evaluations(store) < 1 or not pids.exists():
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the quick evaluation never finished"
            time.sleep(0.1)
        process.send_signal(signal.SIGINT)
        began = time.monotonic()
        _, stderr = process.communicate(timeout=STOP_LIMIT_S)
    finally:
        if process.poll() is None:
            process.kill()
    assert process.returncode == 130, stderr
    assert time.monotonic() - began < STOP_LIMIT_S
    assert "interrupted: 1 of 2 results kept in the store" in stderr
    assert evaluations(store) == 1
    candidate_pid, worker_pid = (int(p) for p in pids.read_text().split())
    assert pid_gone(candidate_pid) and pid_gone(worker_pid)
