"""`problems` and `eval` on the command line: one-line errors, tables, JSON, the entry points."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from autoprofiler.cli.main import app
from tests.conftest import SCALE_PROBLEM

runner = CliRunner()


def test_problems_lists_good_and_rejected(tmp_path: Path):
    (tmp_path / "1_good.py").write_text(SCALE_PROBLEM)
    (tmp_path / "2_bad.py").write_text("class Model(:\n")
    result = runner.invoke(app, ["problems", str(tmp_path)])
    assert result.exit_code == 0
    assert "1_good" in result.stdout
    assert "2_bad.py: syntax error" in result.stderr


def test_problems_missing_path_is_one_line(tmp_path: Path):
    result = runner.invoke(app, ["problems", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert result.stderr.strip().count("\n") == 0 and "no such file" in result.stderr


def test_bad_ncu_sampling_setting_is_one_line(tmp_path: Path, monkeypatch):
    (tmp_path / "1_good.py").write_text(SCALE_PROBLEM)
    monkeypatch.setenv("AUTOPROFILER_NCU_LAUNCHES_PER_CONFIG", "a few")
    result = runner.invoke(app, ["problems", str(tmp_path)])
    assert result.exit_code == 2 and result.stderr.strip().count("\n") == 0
    assert "AUTOPROFILER_NCU_LAUNCHES_PER_CONFIG='a few' is not a whole number" in result.stderr


def test_eval_json_and_cache(tmp_path: Path):
    problem = tmp_path / "scale.py"
    problem.write_text(SCALE_PROBLEM)
    candidate = tmp_path / "cand.py"
    candidate.write_text(SCALE_PROBLEM.replace("class Model", "class ModelNew"))
    store = tmp_path / "s.sqlite"
    args = [
        "eval",
        str(problem),
        str(candidate),
        "--json",
        "--device",
        "cpu",
        "--store",
        str(store),
    ]
    first = runner.invoke(app, [*args, "--trials", "2"])
    assert first.exit_code == 0, first.output
    data = json.loads(first.stdout)
    assert data["correct"] and data["correctness_trials"] == 2 and not data["from_cache"]
    second = runner.invoke(app, [*args, "--trials", "2"])
    assert json.loads(second.stdout)["from_cache"]
    table = runner.invoke(
        app,
        [
            "eval",
            str(problem),
            str(candidate),
            "--store",
            str(store),
            "--device",
            "cpu",
            "--trials",
            "2",
        ],
    )
    assert "correct" in table.stdout and "speedup" in table.stdout


def test_eval_wrong_candidate_exits_1(tmp_path: Path):
    problem = tmp_path / "scale.py"
    problem.write_text(SCALE_PROBLEM)
    candidate = tmp_path / "cand.py"
    candidate.write_text(
        SCALE_PROBLEM.replace("class Model", "class ModelNew").replace("* 2", "* 3")
    )
    result = runner.invoke(
        app,
        [
            "eval",
            str(problem),
            str(candidate),
            "--device",
            "cpu",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--json",
        ],
    )
    assert result.exit_code == 1
    assert json.loads(result.stdout)["failure_kind"] == "wrong_values"


def test_version_and_the_module_entry_point() -> None:
    import subprocess
    import sys

    from autoprofiler import __version__

    assert runner.invoke(app, ["--version"]).stdout.strip() == f"autoprofiler {__version__}"
    done = subprocess.run(
        [sys.executable, "-m", "autoprofiler", "--version"],
        capture_output=True, text=True, timeout=120, check=True,
    )  # fmt: skip
    assert done.stdout.strip() == f"autoprofiler {__version__}"


def test_eval_on_a_cuda_device_this_machine_lacks_is_one_line(tmp_path: Path):
    import pytest
    import torch

    if torch.cuda.is_available():
        pytest.skip("this machine has a CUDA GPU")
    problem = tmp_path / "1_good.py"
    problem.write_text(SCALE_PROBLEM)
    store = tmp_path / "store.sqlite"
    args = ["eval", str(problem), str(problem), "--device", "cuda", "--store", str(store)]
    result = runner.invoke(app, args)
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and "torch sees no CUDA GPU" in lines[0], lines
