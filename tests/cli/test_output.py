"""What the commands print, as a batch job or CI log sees it (output captured, no terminal):
whole tables, JSON on stdout, every rejected row with why, a replay with nothing to replay
said plainly, -v/-q on either side of the command, and what optimize offers a CPU."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from typer.testing import CliRunner

from autoprofiler.cli.main import app
from tests.conftest import SCALE_PROBLEM

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "problems"
RECORDINGS = ROOT / "tests" / "data" / "recordings" / "examples_h200.jsonl.gz"
LONG_NAME = "31_a_problem_name_long_enough_to_overflow_eighty_columns_on_its_own_x"

runner = CliRunner()


@pytest.fixture
def mixed(tmp_path: Path) -> Path:
    """A JSONL file: the recorded softmax example, a problem never recorded, a broken row."""
    rows = [
        {"name": "07_row_softmax", "source": (EXAMPLES / "07_row_softmax.py").read_text()},
        {"name": "scale", "source": SCALE_PROBLEM},
        {"name": "no_source"},
    ]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows) + "{oops\n")
    return path


def test_a_piped_table_keeps_full_names(tmp_path: Path) -> None:
    shutil.copy(EXAMPLES / "07_row_softmax.py", tmp_path / f"{LONG_NAME}.py")
    result = runner.invoke(app, ["problems", str(tmp_path)])
    assert result.exit_code == 0, result.output
    row = next(line for line in result.stdout.splitlines() if LONG_NAME in line)
    assert str(tmp_path / f"{LONG_NAME}.py") in row  # the origin too, on the same line
    assert len(row) > 80 and "…" not in result.stdout


def test_problems_json_and_output_file(tmp_path: Path, mixed: Path) -> None:
    out = tmp_path / "problems.json"
    result = runner.invoke(app, ["problems", str(mixed), "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)  # nothing else on stdout
    assert data == json.loads(out.read_text())
    assert [p["problem"] for p in data["problems"]] == ["07_row_softmax", "scale"]
    assert data["rejected"] == [
        f"{mixed}:3: not a problem row: no 'source' text",
        f"{mixed}:4: not a problem row: Expecting property name enclosed in double quotes: "
        "line 1 column 2 (char 1)",
    ]
    assert f"rejected: {mixed}:3: not a problem row: no 'source' text" in result.stderr


def test_a_replay_says_which_problems_have_nothing_to_replay(tmp_path: Path, mixed: Path) -> None:
    args = ["profile", str(mixed), "--tree", "SpeedOfLight", "--replay", "--recordings"]
    args += [str(RECORDINGS), "--store", str(tmp_path / "s.sqlite"), "-q"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    # The broken rows are rejected with why, the unrecorded problem is skipped with why...
    assert f"rejected: {mixed}:3: not a problem row: no 'source' text" in result.stderr
    assert f"rejected: {mixed}:4: not a problem row" in result.stderr
    assert "skipped scale: no recordings on H200 to replay" in result.stderr
    # ... and only the recorded one walks the tree (the device is the only one recorded).
    paths = [line for line in result.stdout.splitlines() if line.startswith("path ")]
    assert paths == [paths[0]] and "collected ncu.SpeedOfLight;" in paths[0]
    assert "imported" not in result.output  # -q: no notes


def test_a_replay_of_unrecorded_problems_only_is_an_error(tmp_path: Path) -> None:
    (tmp_path / "scale.py").write_text(SCALE_PROBLEM)
    args = ["profile", str(tmp_path / "scale.py"), "-g", "ncu.SpeedOfLight", "--replay"]
    args += ["--recordings", str(RECORDINGS), "--store", str(tmp_path / "s.sqlite")]
    result = runner.invoke(app, args)
    assert result.exit_code == 2
    assert "skipped scale: no recordings on H200 to replay" in result.stderr
    assert "error: none of the 1 problems has recordings on H200" in result.stderr
    assert "path " not in result.stdout


def test_profile_json_is_the_profiles(tmp_path: Path) -> None:
    out = tmp_path / "profiles.json"
    args = [
        "profile",
        str(EXAMPLES),
        "--ids",
        "1,7",
        "--tree",
        str(ROOT / "examples/trees/expert.json"),
    ]
    args += ["--replay", "--recordings", str(RECORDINGS), "--store", str(tmp_path / "s.sqlite")]
    result = runner.invoke(app, [*args, "--json", "-o", str(out)])
    assert result.exit_code == 0, result.output
    rows = json.loads(result.stdout)
    assert rows == json.loads(out.read_text())
    assert [(r["problem"], r["path"]) for r in rows] == [
        ("01_square_gemm", ["n0", "n2", "n3"]),
        ("07_row_softmax", ["n0", "n1"]),
    ]
    assert rows[1]["cost_s"] > 0 and rows[1]["metrics"]


def test_verbosity_flags_come_before_or_after_the_command(tmp_path: Path) -> None:
    (tmp_path / "1_good.py").write_text(SCALE_PROBLEM)
    (tmp_path / "2_bad.py").write_text("class Model(:\n")

    def stderr(*args: str) -> str:
        done = subprocess.run(
            [sys.executable, "-m", "autoprofiler", *args],
            capture_output=True, text=True, timeout=120, cwd=ROOT,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        return done.stderr

    logged = "INFO autoprofiler.problem: rejected"
    assert logged in stderr("problems", str(tmp_path), "-v")
    assert logged in stderr("-v", "problems", str(tmp_path))
    assert logged not in stderr("problems", str(tmp_path))
    args = ["tree", "show", "full"]
    assert runner.invoke(app, [*args, "-q"]).exit_code == 0  # a group's command takes them too


def test_shell_completion_is_offered() -> None:
    result = runner.invoke(app, ["--help"])
    assert "--install-completion" in result.stdout and "--show-completion" in result.stdout


@pytest.mark.skipif(torch.cuda.is_available(), reason="what a CPU-only machine is offered")
def test_optimize_on_a_cpu_offers_only_what_runs_there(tmp_path: Path, monkeypatch) -> None:
    """The tiny-ops example is launch-bound: on a GPU, CUDA graphs would be the pick. With
    --device auto on this machine the rewriter is told it targets the CPU."""
    monkeypatch.setenv("AUTOPROFILER_EXAMPLE_SIZE", "small")
    args = ["optimize", str(EXAMPLES), "--ids", "11", "--store", str(tmp_path / "s.sqlite")]
    args += ["--candidates-dir", str(tmp_path / "candidates"), "--json", "--keep", "rewrite"]
    result = runner.invoke(app, args)
    assert result.exit_code == 0, result.output
    (row,) = json.loads(result.stdout)
    info = row["candidate"]["info"]
    assert info["not_applicable"]["cuda_graph"] == "CUDA graphs exist on CUDA devices only"
    assert info["not_applicable"]["tf32"] == "TF32 exists on CUDA devices only"
    assert info["transformation"] not in ("cuda_graph", "tf32", "compile_tf32")
    assert row["result"]["device"] == "cpu"
