"""benchmarks/transfer_table.py: verdicts of the same candidates on two GPUs, paired and
compared, on a store written here and on the committed exports."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from autoprofiler.evaluate import export_evaluations
from autoprofiler.problem import Problem
from autoprofiler.store import Store
from tests.conftest import SCALE_PROBLEM

from .conftest import ROOT, import_benchmark

transfer_table = import_benchmark("transfer_table")

FIRST, SECOND = "cuda:NVIDIA H200", "cuda:NVIDIA H100 80GB HBM3"
DATA = ROOT / "docs" / "results" / "data"


def _result(correct: bool, speedup: float = 1.0, version: str = "9") -> dict:
    return {
        "correct": correct,
        "failure_kind": None if correct else "wrong_values",
        "evaluator_version": version,
        "speedup": speedup if correct else None,
    }


def _store(path: Path) -> Store:
    """Five candidates of one problem: two correct on both GPUs (2.0x -> 1.0x, 1.0x ->
    1.02x), one correct only on the first, one judged on the first only, one whose first
    verdict was wrong and was judged again, correct."""
    store = Store(path)
    problem = Problem(name="scale", source=SCALE_PROBLEM, origin="<test>", level=1, problem_id=7)
    store.put_problem(problem)
    verdicts = {
        "halved": [(FIRST, _result(True, 2.0, "")), (SECOND, _result(True, 1.0))],
        "kept": [(FIRST, _result(True, 1.0, "")), (SECOND, _result(True, 1.02))],
        "broke": [(FIRST, _result(True, 1.5, "")), (SECOND, _result(False))],
        "alone": [(FIRST, _result(True, 3.0, ""))],
        "fixed": [
            (FIRST, _result(False, version="")),
            (SECOND, _result(True, 1.1)),
            (FIRST, _result(True, 1.1, "8")),
        ],
    }
    for name, judged in verdicts.items():
        store.put_candidate(f"c-{name}", problem.content_hash, f"# {name}", "rules",
                            info={"transformation": name})  # fmt: skip
        for number, (device, result) in enumerate(judged):
            key = f"{name}-{device}-{number}"
            store.put_evaluation(key, problem.content_hash, f"c-{name}", device, "cfg", result)
            time.sleep(0.002)  # newest by creation time
    return store


def test_pairs_are_the_newest_verdicts_judged_on_both_devices(tmp_path: Path) -> None:
    with _store(tmp_path / "s.sqlite") as store:
        found = transfer_table.pairs(store, FIRST, SECOND)
    assert [p.candidate for p in found] == ["broke", "fixed", "halved", "kept"]
    assert {p.problem for p in found} == {"L1/scale"}
    ratios = {p.candidate: p.ratio for p in found}
    assert ratios["broke"] is None
    assert ratios["halved"] == pytest.approx(0.5) and ratios["kept"] == pytest.approx(1.02)
    assert ratios["fixed"] == pytest.approx(1.0)  # the first device's newer verdict

    text = transfer_table.table(found, FIRST, SECOND)
    assert "4 candidates judged on both the H200 (evaluator v1 (3), v8 (1))" in text
    assert "| correctness agrees | 3 of 4 |" in text
    assert "| correct on both | 3 |" in text
    assert "median | 1.000 |" in text
    assert f"| geometric mean | {(0.5 * 1.02) ** (1 / 3):.3f} |" in text
    assert "| range | 0.500 to 1.020 |" in text and "| within 5% | 2 of 3 |" in text
    assert text.endswith("`broke`: correct / wrong_values")


def test_the_command_fills_its_block_and_bad_input_is_one_line(
    tmp_path: Path, capsys, caplog
) -> None:
    export = tmp_path / "both.jsonl.gz"
    with _store(tmp_path / "s.sqlite") as store:
        export_evaluations(store, export)
    page = tmp_path / "page.md"
    page.write_text("intro\n<!-- transfer_table:start -->\nold\n<!-- transfer_table:end -->\n")
    args = [str(export), "--from", FIRST, "--to", SECOND, "--markdown", str(page)]
    assert transfer_table.main(args) == 0
    filled = page.read_text()
    assert "old" not in filled and "| correctness agrees | 3 of 4 |" in filled
    assert filled.startswith("intro\n") and filled.endswith("<!-- transfer_table:end -->\n")
    bare = tmp_path / "bare.md"
    bare.write_text("no block\n")
    assert transfer_table.main([*args[:-1], str(bare)]) == 2
    (tmp_path / "junk.jsonl.gz").write_text("not an export")
    assert transfer_table.main([str(tmp_path / "junk.jsonl.gz"), *args[1:5]]) == 2
    assert "Traceback" not in capsys.readouterr().err
    caplog.clear()
    assert transfer_table.main([str(export), "--from", SECOND, "--to", SECOND]) == 2
    assert f"--from and --to both name {SECOND}" in caplog.text


def test_the_committed_h100_rebuild_pairs_with_the_h200_verdicts() -> None:
    """Every candidate the H100 rebuild judged was judged on the H200 first."""
    rebuild = DATA / "rebuild" / "nvidia-h100-80gb-hbm3"
    exports = [DATA / "kernelbench_h200_evaluations.jsonl.gz", *sorted(rebuild.glob("rules-*"))]
    rows = (rebuild / "rules_rows.jsonl").read_text().splitlines()
    judged = sum('"result": {' in row for row in rows)
    with Store(":memory:") as store:
        for path in exports:
            transfer_table.import_evaluations(path, store)
        found = transfer_table.pairs(store, FIRST, SECOND)
    assert len(found) == judged
    assert all(p.after["evaluator_version"] == "9" for p in found)


def test_the_reproduction_page_shows_what_the_committed_verdicts_give() -> None:
    """The page's block is the table of the committed exports (a slot kept without the page
    made again fails here)."""
    exports = [
        DATA / "kernelbench_h200_evaluations.jsonl.gz",
        DATA / "llm_evaluations.jsonl.gz",
        *sorted((DATA / "rebuild" / "nvidia-h100-80gb-hbm3").glob("*.jsonl.gz")),
    ]
    with Store(":memory:") as store:
        for path in exports:
            transfer_table.import_evaluations(path, store)
        text = transfer_table.table(transfer_table.pairs(store, FIRST, SECOND), FIRST, SECOND)
    page = (ROOT / "docs" / "results" / "reproduction.md").read_text()
    block = page.split("<!-- transfer_table:start -->\n")[1].split("\n<!-- transfer_table:end -->")
    assert block[0] == text
