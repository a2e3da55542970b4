"""Progress people can follow: a plain line per finished problem when piped, a bar on a
terminal; ``optimize`` killed with SIGTERM keeps its finished rows and ``--resume`` does the
rest (in real processes)."""

from __future__ import annotations

import io
import json
import os
import re
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from autoprofiler.cli import progress
from autoprofiler.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "problems"
IDS = "5,9,12"
NAMES = ["05_elementwise_chain", "09_reduction", "12_transpose_copy"]
RUN = "from autoprofiler.cli.main import app; app()"
KILL_LIMIT_S = 120.0
# One finished problem: "optimize 2/3 09_reduction: ok 0.15x ... (3.3 s)".
LINE = re.compile(r"^optimize (\d+)/(\d+) (\S+): (.+) \((\d+\.\d) s\)$")

runner = CliRunner()


@pytest.fixture(autouse=True)
def _small(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    monkeypatch.setenv("AUTOPROFILER_EXAMPLE_SIZE", "small")


def optimize_args(tmp_path: Path, rewriter: str, *extra: str) -> list[str]:
    return [
        "optimize", str(EXAMPLES), "--ids", IDS, "--device", "cpu", "--rewriter", rewriter,
        "--store", str(tmp_path / "s.sqlite"), "--candidates-dir", str(tmp_path / "c"),
        "--keep", "rewrite", *extra,  # one candidate a problem: what progress is about
    ]  # fmt: skip


def finished_lines(stderr: str) -> list[re.Match[str]]:
    return [m for line in stderr.splitlines() if (m := LINE.match(line))]


def test_piped_optimize_writes_a_line_per_finished_problem_in_order(tmp_path: Path) -> None:
    args = optimize_args(tmp_path, "tests.learn.gated_rewriter:GatedRewriter")
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    lines = finished_lines(result.stderr)
    assert [m[3] for m in lines] == NAMES, result.stderr
    assert [(int(m[1]), int(m[2])) for m in lines] == [(1, 3), (2, 3), (3, 3)]
    assert all(m[4].startswith("ok ") for m in lines)
    assert all(float(m[5]) > 0 for m in lines)
    # Each row is in the log beside the store, after the line naming the options.
    header, *rows = (tmp_path / "s-optimize.jsonl").read_text().splitlines()
    assert json.loads(header)["options"]["ids"] == IDS
    assert [json.loads(row)["problem"] for row in rows] == NAMES


def test_a_terminal_shows_a_bar_with_counts_elapsed_time_and_eta(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    screen = io.StringIO()
    terminal = Console(file=screen, force_terminal=True, width=160)
    monkeypatch.setattr(progress, "messages", lambda: terminal)
    args = ["prompts", "export", str(EXAMPLES), "--ids", IDS, "--llm", "openai:m"]
    args += ["--configs", "none,static", "-o", str(tmp_path / "r.jsonl")]
    result = runner.invoke(app, [*args, "--store", str(tmp_path / "s.sqlite")])
    assert result.exit_code == 0, result.output
    shown = screen.getvalue()
    assert "━" in shown and "6/6" in shown and "0:00:" in shown and "eta" in shown
    assert "prompts export 1/6" not in shown  # the bar, not the plain lines


def test_quiet_shows_no_progress(tmp_path: Path) -> None:
    args = optimize_args(tmp_path, "tests.learn.gated_rewriter:GatedRewriter", "-q")
    result = runner.invoke(app, [*args, "--ids", "5"])
    assert result.exit_code == 0, result.output
    assert not finished_lines(result.stderr)


def test_optimize_killed_with_sigterm_keeps_its_rows_and_resume_does_only_the_rest(
    tmp_path: Path,
) -> None:
    log = tmp_path / "results.jsonl"
    args = optimize_args(tmp_path, "tests.learn.gated_rewriter:slow_to_rewrite", "-o", str(log))
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    command = [sys.executable, "-c", RUN, *args]
    process = subprocess.Popen(
        command, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
    )
    deadline = time.monotonic() + KILL_LIMIT_S
    while not log.is_file() or len(log.read_text().splitlines()) < 2:  # the header and a row
        assert process.poll() is None, process.stderr.read() if process.stderr else ""
        assert time.monotonic() < deadline, "no problem finished in time"
        time.sleep(0.05)
    assert process.poll() is None, "the run ended before it could be killed"
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=60)
    assert process.returncode == 130, stderr
    kept = [json.loads(row)["problem"] for row in log.read_text().splitlines()[1:]]
    assert kept == NAMES[: len(kept)] and 1 <= len(kept) < 3
    # A row is on disk before its line is printed: the kill may fall between the two.
    shown = [m[3] for m in finished_lines(stderr)]
    assert shown == kept or shown == kept[:-1], stderr
    assert f"interrupted: {len(kept)} of 3 problems kept in {log}" in stderr

    resumed = subprocess.run(
        [*command, "--resume"], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )
    assert resumed.returncode == 0, resumed.stderr
    redone = [m[3] for m in finished_lines(resumed.stderr)]
    assert redone == NAMES[len(kept) :]
    rows = [json.loads(row) for row in log.read_text().splitlines()[1:]]
    assert [row["problem"] for row in rows] == NAMES
    assert all(row["result"]["correct"] for row in rows)


def test_resume_with_other_options_is_one_error_line(tmp_path: Path) -> None:
    args = optimize_args(tmp_path, "tests.learn.gated_rewriter:GatedRewriter", "--ids", "5")
    assert runner.invoke(app, args).exit_code == 0
    result = runner.invoke(app, [*args, "--resume", "--tree", "static"])
    assert result.exit_code == 2
    assert result.stderr.count("\n") == 1, result.stderr
    assert "was written with --tree none, not --tree static" in result.stderr
    again = runner.invoke(app, [*args, "--resume", "--json"])
    assert again.exit_code == 0, again.output
    assert not finished_lines(again.stderr)  # nothing left to do
    assert [row["problem"] for row in json.loads(again.stdout)] == ["05_elementwise_chain"]


def test_profile_logs_each_problem_and_resumes(tmp_path: Path) -> None:
    store = str(tmp_path / "s.sqlite")
    args = ["profile", str(EXAMPLES), "--ids", "5,9", "-g", "static", "--store", store, "-q"]
    first = runner.invoke(app, args)
    assert first.exit_code == 0, first.output
    log = tmp_path / "s-profile.jsonl"
    rows = log.read_text().splitlines()[1:]
    assert [json.loads(row)["problem"] for row in rows] == NAMES[:2]
    log.write_text("\n".join(log.read_text().splitlines()[:2]) + '\n{"problem": "09_re')  # cut
    again = runner.invoke(app, [*args, "--resume"])
    assert again.exit_code == 0, again.output
    assert again.stdout == first.stdout
    assert [json.loads(row)["problem"] for row in log.read_text().splitlines()[1:]] == NAMES[:2]
