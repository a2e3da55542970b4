"""``--no-cache``: a command that reuses stored results computes them again when asked."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoprofiler.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "problems" / "05_elementwise_chain.py"

runner = CliRunner()


def test_optimize_evaluates_again_with_no_cache(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("AUTOPROFILER_EXAMPLE_SIZE", "small")
    args = ["optimize", str(EXAMPLE), "--device", "cpu", "--store", str(tmp_path / "s.sqlite")]
    args += ["--candidates-dir", str(tmp_path / "candidates"), "--json", "--keep", "rewrite"]

    def from_cache(*extra: str) -> bool:
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)
        assert row["result"]["correct"], row["result"]["failure_message"]
        return row["result"]["from_cache"]

    assert [from_cache(), from_cache(), from_cache("--no-cache")] == [False, True, False]


@pytest.mark.parametrize("command", ["eval", "baselines", "optimize", "learn", "bench"])
def test_every_command_that_reuses_results_takes_no_cache(command: str) -> None:
    result = runner.invoke(app, [command, "--help"], env={"COLUMNS": "200"})
    assert "--no-cache" in result.stdout


def test_optimize_times_the_stored_reference_again_with_retime_reference(
    tmp_path: Path, monkeypatch
) -> None:
    from autoprofiler.evaluate.runner import REFERENCES

    monkeypatch.setenv("AUTOPROFILER_EXAMPLE_SIZE", "small")
    args = ["optimize", str(EXAMPLE), "--device", "cpu", "--store", str(tmp_path / "s.sqlite")]
    args += ["--candidates-dir", str(tmp_path / "candidates"), "--json", "--no-cache"]
    args += ["--keep", "rewrite"]  # one candidate: the reference's timing is what is tested

    def reference_ms(*extra: str) -> float:
        REFERENCES.close()  # each command a run of its own, as from a shell
        result = runner.invoke(app, [*args, *extra])
        assert result.exit_code == 0, result.output
        (row,) = json.loads(result.stdout)
        return row["result"]["reference"]["median_ms"]

    stored = reference_ms()
    assert reference_ms() == stored  # the stored timing, not a new one
    assert reference_ms("--retime-reference") != stored


def test_optimize_takes_retime_reference() -> None:
    result = runner.invoke(app, ["optimize", "--help"], env={"COLUMNS": "200"})
    assert "--retime-reference" in result.stdout
