"""The CUPTI-against-ncu tables: units, differences, and the committed H200 rows rebuilt."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from .conftest import ROOT, import_benchmark

cupti_agreement = import_benchmark("cupti_agreement")
DATA = ROOT / "docs" / "results" / "data"


@pytest.mark.parametrize(
    ("value", "unit", "base"),
    [(2.68, "ms", 2.68e-3), (2678656, "nsecond", 2.678656e-3), (68.608, "Kbyte/block", 68608),
     (2.2, "Gbyte/s", 2.2e9), (1.5, "Ghz", 1.5e9), (7, "%", 7), (5, "sector", 5)],
)  # fmt: skip
def test_values_are_compared_in_base_units(value: float, unit: str, base: float) -> None:
    assert cupti_agreement.base_value(value, unit) == pytest.approx(base)


def test_relative_difference() -> None:
    assert cupti_agreement.relative_difference(0.0, 0.0) == 0.0
    assert cupti_agreement.relative_difference(1e-7, 0.0) == math.inf
    assert cupti_agreement.relative_difference(101.0, 100.0) == pytest.approx(0.01)


def test_the_committed_rows_give_the_committed_table(tmp_path: Path) -> None:
    page = tmp_path / "costs.md"
    page.write_text("<!-- profiling_costs:start -->\n<!-- profiling_costs:end -->\n")
    args = [
        "table", "--recordings", str(DATA / "kernelbench_h200.jsonl.gz"),
        "--rows", str(DATA / "cupti_agreement_rows.jsonl.gz"), "--markdown", str(page),
        "--export-recordings", str(tmp_path / "cupti.jsonl.gz"),
    ]  # fmt: skip
    assert cupti_agreement.main(args) == 0
    committed = (ROOT / "docs" / "results" / "profiling_costs.md").read_text()
    block = page.read_text().split("<!-- profiling_costs:start -->")[1].split("<!-- profiling_")[0]
    assert block.strip() and block in committed
    assert (tmp_path / "cupti.jsonl.gz").stat().st_size > 0


def test_the_budget_table_says_whether_each_tree_held_its_budget() -> None:
    grace = cupti_agreement.STOP_GRACE_S
    rows = [
        {"phase": "budget", "problem": "L1/1", "budget_s": 3.0, "cost_s": 3.0 + grace,
         "cut": ["ncu.SpeedOfLight"], "skipped": [], "path": ["n0"]},
        {"phase": "budget", "problem": "L1/1", "budget_s": 8.0, "cost_s": 9.0, "cut": [],
         "skipped": [{"group": "ncu.MemoryWorkloadAnalysis", "reason": "over budget"}]},
        {"phase": "budget", "problem": "L1/2", "budget_s": 3.0, "error": "ProfilerError: boom"},
    ]  # fmt: skip
    lines = cupti_agreement._budget_table(rows)
    assert lines[2].endswith("| yes | ncu.SpeedOfLight | - |")
    assert lines[3].endswith("| NO | - | ncu.MemoryWorkloadAnalysis |")
    assert "ProfilerError: boom" in lines[4]
    assert cupti_agreement._budget_table([]) == []


def test_a_start_up_is_filed_cold_unless_the_worker_came_from_a_standby() -> None:
    tool = cupti_agreement._startup_tool
    assert tool({"worker": {"standby": True}}, first=True) == "cupti"
    assert tool({"worker": {"standby": False}}, first=False) == "cupti_cold"
    assert tool({"worker": {}}, first=True) == "cupti_cold"  # rows from before the flag
    assert tool({}, first=False) == "cupti"


def test_the_replay_plan_runs_each_replay_on_its_share_of_the_problems() -> None:
    assert cupti_agreement.replay_plan(["user", "kernel:6"], 24) == [("user", 24), ("kernel", 6)]
    for bad in ("application", "user:six", "kernel:"):
        with pytest.raises(SystemExit, match="expected kernel or user"):
            cupti_agreement.replay_plan([bad], 24)
    assert cupti_agreement.replay_of({"phase": "cupti"}) == "kernel"  # rows from before
    assert cupti_agreement.replay_of({"phase": "cupti", "replay": "user"}) == "user"
