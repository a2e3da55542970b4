"""`profile` and `optimize` on the command line, over real H200 recordings and on the CPU."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from autoprofiler.cli.main import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "problems"
RECORDINGS = ROOT / "tests" / "data" / "recordings" / "examples_h200.jsonl.gz"
EXPERT = ROOT / "examples" / "trees" / "expert.json"

runner = CliRunner()


def _paths(output: str) -> list[str]:
    return [line for line in output.splitlines() if line.startswith("path ")]


def _replay(tmp_path: Path, *extra: str) -> str:
    result = runner.invoke(
        app,
        [
            "profile",
            str(EXAMPLES),
            "--ids",
            "1,7,11",
            "--tree",
            str(EXPERT),
            "--replay",
            "--recordings",
            str(RECORDINGS),
            "--profile-device",
            "H200",
            "--store",
            str(tmp_path / "s.sqlite"),
            *extra,
        ],
    )
    assert result.exit_code == 0, result.output
    return result.stdout


def test_expert_tree_on_recorded_h200_profiles(tmp_path: Path):
    output = _replay(tmp_path)
    gemm, softmax, tiny_ops = _paths(output)
    # Real H200 values: the GEMM is compute-bound, the softmax memory-bound, and the
    # 800-op model neither (launch/latency-bound), so the tree sends them three ways.
    assert gemm.startswith("path n0 -> n2 -> n3;")
    assert softmax.startswith("path n0 -> n1;")
    assert tiny_ops.startswith("path n0 -> n2 -> n4;")
    # SpeedOfLight replayed each of its 800 kernels: the recorded cost says so. The other
    # groups sampled 12 launches (AUTOPROFILER_NCU_LAUNCHES_PER_CONFIG), and the profile says so.
    assert "collected static, ncu.SpeedOfLight, ncu.LaunchStats, ncu.Occupancy;" in tiny_ops
    assert float(tiny_ops.rsplit("cost ", 1)[1].removesuffix(" s")) > 300
    assert output.count("Note: ncu sampled the first 12 launches of each launch config") == 1
    assert "Not collected" not in output


def test_budget_skips_what_it_cannot_afford(tmp_path: Path):
    output = _replay(tmp_path, "--budget", "5", "-q")
    for line in _paths(output):
        # ncu's start-up alone (~8 s) does not fit: only the free static group is collected,
        # and with no metric to test the tree takes its false branches.
        assert line.startswith("path n0 -> n2 -> n4; collected static;")


def test_live_profile_on_cpu_skips_ncu_with_a_reason(tmp_path: Path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no ncu anywhere
    result = runner.invoke(
        app,
        [
            "profile",
            str(EXAMPLES / "07_row_softmax.py"),
            "-g",
            "static,ncu.SpeedOfLight",
            "--store",
            str(tmp_path / "s.sqlite"),
        ],
    )
    assert result.exit_code == 0, result.output
    assert "collected static;" in result.stdout
    assert "static.bytes" in result.stdout
    assert "Not collected: ncu.SpeedOfLight" in result.stdout


def test_profile_rejects_unknown_group(tmp_path: Path):
    result = runner.invoke(
        app,
        [
            "profile",
            str(EXAMPLES / "07_row_softmax.py"),
            "-g",
            "ncu.SpeedOfDark",
            "--store",
            str(tmp_path / "s.sqlite"),
        ],
    )
    assert result.exit_code == 2
    assert "ncu.SpeedOfDark" in result.stderr and result.stderr.count("\n") == 1


def test_optimize_writes_and_checks_a_generated_triton_kernel(tmp_path: Path):
    out = tmp_path / "results.json"
    result = runner.invoke(
        app,
        [
            "optimize",
            str(EXAMPLES / "05_elementwise_chain.py"),
            "--device",
            "cpu",
            "--store",
            str(tmp_path / "s.sqlite"),
            "--candidates-dir",
            str(tmp_path / "cands"),
            "--keep",
            "rewrite",  # the rewriter's candidate is written, whatever is faster
            "-o",
            str(out),
        ],
    )
    assert result.exit_code == 0, result.output
    (row,) = json.loads(out.read_text())
    assert row["candidate"]["info"]["transformation"].startswith("triton")
    assert row["result"]["correct"], row["result"]["failure_message"]
    assert "@triton.jit" in Path(row["candidate"]["written"]).read_text()
    # The rule rewriter's kernel builds the reference Model for its weights, which the
    # evaluator flags; autoprofiler wrote it, so the geomean counts its speedup.
    assert "calls_reference" in {f["name"] for f in row["result"]["findings"]}
    assert "1 flagged counted at their speedups" in " ".join(result.output.split())
