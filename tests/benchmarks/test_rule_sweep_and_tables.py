"""The scripts behind docs/results/rewriter.md: the sweep (on the CPU here) and the table."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DATA = ROOT / "docs" / "results" / "data"


def _run(script: str, *args: str, env: dict | None = None) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(ROOT / "benchmarks" / script), *args],
        capture_output=True,
        text=True,
        check=False,
        cwd=ROOT,
        env=env,
        timeout=600,
    )


def test_sweep_evaluates_every_reachable_candidate_once_and_resumes(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "softmax.py").write_text(
        (ROOT / "examples" / "problems" / "07_row_softmax.py").read_text()
    )
    args = ("--device", "cpu", "--store", str(tmp_path / "s.sqlite"), "--rows")
    first = _run("rule_sweep.py", str(problems), *args, str(tmp_path / "rows.jsonl"))
    assert first.returncode == 0, first.stderr[-2000:]
    rows = [json.loads(line) for line in (tmp_path / "rows.jsonl").read_text().splitlines()]
    # On the CPU only Triton's row kernel and torch.compile can be reached for a softmax.
    assert {r["transformation"] for r in rows} <= {"triton_row", "compile"}
    assert rows and all(r["correct"] for r in rows)
    again = _run("rule_sweep.py", str(problems), *args, str(tmp_path / "rows.jsonl"))
    assert again.returncode == 0
    assert len((tmp_path / "rows.jsonl").read_text().splitlines()) == len(rows)
    assert f"{len(rows)} evaluations already done" in again.stderr


def test_an_interrupted_sweep_ends_with_a_one_line_warning(tmp_path: Path) -> None:
    problems = tmp_path / "problems"
    problems.mkdir()
    (problems / "softmax.py").write_text(
        (ROOT / "examples" / "problems" / "07_row_softmax.py").read_text()
    )
    command = [sys.executable, str(ROOT / "benchmarks" / "rule_sweep.py"), str(problems)]
    command += ["--device", "cpu", "--store", str(tmp_path / "s.sqlite")]
    command += ["--rows", str(tmp_path / "rows.jsonl")]
    # A shell that starts a job in the background has it ignore SIGINT, and Python keeps an
    # inherited SIG_IGN: give the sweep the default disposition, as a terminal would.
    sweep = subprocess.Popen(
        command,
        cwd=ROOT,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert sweep.stderr is not None
    for line in sweep.stderr:  # interrupt it once it is evaluating
        if "evaluations already done" in line:
            break
    time.sleep(1.0)
    sweep.send_signal(signal.SIGINT)
    rest = sweep.stderr.read()
    assert sweep.wait(timeout=60) == 130
    assert "Traceback" not in rest and "interrupted" in rest


def test_rewriter_table_from_the_committed_h200_data(tmp_path: Path) -> None:
    out = tmp_path / "rewriter.md"
    done = _run(
        "rewriter_table.py",
        "--recordings",
        str(DATA / "kernelbench_h200.jsonl.gz"),
        "--evaluations",
        str(DATA / "kernelbench_h200_evaluations.jsonl.gz"),
        "--markdown",
        str(out),
        "--compare",
        "compile_max_autotune",
    )
    assert done.returncode == 0, done.stderr[-2000:]
    text = out.read_text()
    assert "## Summary (63 problems)" in text  # L1/84's pick was never evaluated
    assert "Left out (a pick was never evaluated): L1/84_" in text
    # Without max-autotune every pick was evaluated: all 64, and 30 with `--set full`.
    assert "## The rewriter without `compile_max_autotune` (64 problems)" in text
    assert "| `--set full` alone | 30 |" in text
    summary = [line for line in text.splitlines() if line.startswith(("| none |", "| full |"))]
    assert len(summary) == 4 and all("x |" in line for line in summary)  # two tables
    # The committed page is what the committed data give (the command line aside).
    committed = (ROOT / "docs" / "results" / "rewriter.md").read_text()
    assert text.split("## Summary", 1)[1] == committed.split("## Summary", 1)[1]
    assert "Generated Triton kernels: 32 of 32 correct" in text
