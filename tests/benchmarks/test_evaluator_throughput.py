"""The evaluator throughput benchmark's candidate list and its report (the measuring itself
needs a GPU: ``docs/results/evaluator_throughput.md``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests.benchmarks.conftest import ROOT, import_benchmark

throughput = import_benchmark("evaluator_throughput")

ADD = (
    "import torch\nclass Model(torch.nn.Module):\n"
    "    def forward(self, a, b):\n        return a + b\n"
)


def _checkout(tmp_path: Path) -> Path:
    """A KernelBench-shaped prompts folder whose first two examples are the same pair, as
    KernelBench's ``model_ex_1`` and ``model_ex_add`` are."""
    prompts = tmp_path / "src" / "kernelbench" / "prompts"
    (prompts / "few_shot").mkdir(parents=True)
    for reference, candidate in throughput.EXTENSION_EXAMPLES[:2]:
        (prompts / reference).write_text(ADD)
        (prompts / candidate).write_text(ADD.replace("Model", "ModelNew"))
    (prompts / "few_shot/model_ex_add.py").write_text(ADD + "\n")
    (prompts / "few_shot/model_new_ex_add.py").write_text(ADD.replace("Model", "ModelNew"))
    return tmp_path / "src"


def test_each_pair_is_listed_once_so_results_and_names_line_up(tmp_path: Path) -> None:
    chosen = throughput.all_candidates(12, _checkout(tmp_path))
    pairs = [(problem, candidate) for _, problem, _, candidate in chosen]
    exported = throughput.candidates(12)
    assert len(pairs) == len(set(pairs)) == len(exported) + 2  # ex_1 and ex_add are one pair
    extensions = [entry for entry in chosen if entry[2] == "load_inline"]
    assert [name for name, *_ in extensions] == [
        "kernelbench/model_new_ex_1", "kernelbench/model_new_ex_add"
    ]  # fmt: skip
    assert extensions[1][1].endswith("\n\n")  # the few-shot copy differs: it is kept


def test_the_report_compares_the_candidates_both_evaluators_judged(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    lines = [
        {"label": label, "index": index, "problem": f"p{index}", "kind": "other",
         "correct": True, "wall_s": wall, "candidate_trials_s": 0.5}
        for label, walls in (("new", [2.0, 2.0, 3.0]), ("old", [6.0, 4.0]))
        for index, wall in enumerate(walls)
    ]  # fmt: skip
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = throughput.report(rows, None)
    assert "| new | 3 | 7.0 | 25.7 | 2.00 | 1.50 | 4.0 (2) |" in text
    assert "| old | 2 | 10.0 | 12.0 | 5.00 | 4.50 | 10.0 (2) |" in text
    # per kind: the rate over those candidates' own walls, the harness time beyond their trials
    assert "| new | other | 3 | 3 | 2.00 | 25.7 | 1.50 |" in text
    assert (ROOT / "benchmarks" / "evaluator_throughput.py").is_file()


def test_the_stage_table_shows_medians_by_kind_with_what_no_stage_holds(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    lines = [
        {"label": "new", "index": index, "problem": "p", "kind": "triton", "correct": True,
         "wall_s": 5.0 + index, "candidate_trials_s": 0.5, "evaluate_s": 4.0 + index,
         "stages_s": {"reference": 0.0, "start": 0.5, "first_call": 2.0 + index}}
        for index in range(3)
    ] + [
        {"label": "old", "index": 0, "problem": "p", "kind": "triton", "correct": True,
         "wall_s": 9.0, "candidate_trials_s": 0.5, "evaluate_s": 9.0, "stages_s": None}
    ]  # fmt: skip
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = throughput.report(rows, None)
    assert "| evaluator | kind | n | outside | reference | start | first_call | other |" in text
    # outside 1.0 each; first_call 2, 3, 4; other 4+i - (2.5+i) = 1.5; old has no stages
    assert "| new | triton | 3 | 1.00 | 0.00 | 0.50 | 3.00 | 1.50 |" in text
    assert "| old | triton | 1 |" in text  # the summary table's row, not the stage table's
    assert text.count("| old | triton |") == 1


def test_the_overhead_table_sets_each_problems_one_time_reference_timing_apart(
    tmp_path: Path,
) -> None:
    rows = tmp_path / "rows.jsonl"
    spec = [("a", "other", 2.0), ("a", "wrong", 0.0), ("b", "triton", 3.0), ("b", "other", 0.0)]
    lines = [
        {"label": "new", "index": index, "problem": problem, "kind": kind, "correct": True,
         "wall_s": 1.5 + reference, "candidate_trials_s": 0.5, "evaluate_s": 1.5 + reference,
         "stages_s": {"reference": reference, "start": 0.2}}
        for index, (problem, kind, reference) in enumerate(spec)
    ]  # fmt: skip
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines))
    text = throughput.report(rows, None)
    # no build: beyond 3.0, 1.0, 1.0 (median 1.0); aside 1.0 each; references 2.0 and 3.0
    assert "| new | no build | 3 | 1.00 | 1.00 | 2 | 2.50 |" in text
    assert "| new | all | 4 | 2.00 | 1.00 | 2 | 2.50 |" in text


def test_a_sweeps_rows_are_read_as_this_benchmarks(tmp_path: Path) -> None:
    rows = tmp_path / "rules_rows.jsonl"
    result = {"correct": True, "wall_s": 3.0, "candidate": {"trials": 10, "mean_ms": 20.0},
              "stages_s": {"reference": 1.0, "start": 0.2}}  # fmt: skip
    lines = [
        {"problem": "L1/1", "transformation": "triton_row", "wall_s": 3.5, "result": result},
        {"problem": "L1/1", "transformation": "bf16_autocast", "failure": "not reachable"},
        {"problem": "L1/2", "transformation": "compile_tf32", "wall_s": 2.0,
         "result": {**result, "correct": False, "candidate": None}},
        {"problem": "L1/2", "kind": "load_inline", "wall_s": 9.0, "result": result},  # llm_sweep
    ]  # fmt: skip
    rows.write_text("".join(json.dumps(line) + "\n" for line in lines))
    read = throughput.sweep_rows(rows, "sweep")
    assert [(r["kind"], r["correct"], r["index"]) for r in read] == [
        ("triton", True, 0), ("compile", False, 2), ("load_inline", True, 3)
    ]  # fmt: skip
    assert read[0]["candidate_trials_s"] == pytest.approx(0.2) and read[0]["evaluate_s"] == 3.0
    assert read[1]["candidate_trials_s"] == 0.0
    assert "| sweep | triton | 1 | 1 | 3.50 |" in throughput.report(read, None)


def test_the_committed_h200_rebuild_slot_is_the_pages_session35_table() -> None:
    rows = ROOT / "docs" / "results" / "data" / "rebuild" / "nvidia-h200" / "rules_rows.jsonl"
    text = throughput.report(throughput.sweep_rows(rows, "v9, H200 rules"), None)
    page = (ROOT / "docs" / "results" / "evaluator_throughput.md").read_text()
    for line in (
        "| v9, H200 rules | 35 | 448.4 | 4.7 | 6.62 | 6.42 | 448.4 (35) |",
        "| v9, H200 rules | no build | 12 | 6.29 | 1.88 | 12 | 4.79 |",
    ):
        assert line in text and line in page


def test_the_wrong_candidate_is_wrong_however_large_the_outputs() -> None:
    """A shift of 1.0 alone sat within tolerance of L1/4's outputs (about 2.6e5)."""
    import torch

    space: dict = {}
    exec(
        "import torch\nclass Model(torch.nn.Module):\n"
        "    def forward(self, x):\n        return x\n" + throughput.WRONG,
        space,
    )
    for scale in (0.0, 1.0, 2.6e5):
        x = torch.full((8,), scale)
        got = space["ModelNew"]()(x)
        assert not torch.allclose(got, space["Model"]()(x), atol=1e-2, rtol=1e-2)


def _report_and_page_show(rows_file: str, lines: tuple[str, ...]) -> None:
    """Each of ``lines`` is in the report made from the committed rows and on the page."""
    text = throughput.report(ROOT / "docs" / "results" / "data" / rows_file, None)
    page = (ROOT / "docs" / "results" / "evaluator_throughput.md").read_text()
    for line in lines:
        assert line in text and line in page


def test_the_committed_session34_tables_are_its_rows() -> None:
    """The H100 run of session 34: its summary and per-kind tables, as the page shows them."""
    _report_and_page_show(
        "evaluator_throughput_rows_session34.jsonl",
        (
            "| new | 46 | 182.9 | 15.1 | 2.64 | 2.45 | 88.4 (16) |",
            "| old | 16 | 151.4 | 6.3 | 7.55 | 7.36 | 151.4 (16) |",
            "| new | other | 15 | 15 | 2.02 | 19.0 | 1.94 |",
            "| new | no build | 23 | 1.71 | 1.32 | 22 | 1.05 |",
        ),
    )


def test_on_the_cpu_the_candidates_are_the_problems_references(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    problems = ROOT / "examples" / "problems"
    code = throughput.main(
        ["--problems", str(problems), "--candidates", "3", "--device", "cpu", "--out", str(out)]
    )
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert code == 0 and len(rows) == 3
    assert all(row["correct"] and row["kind"] == "other" for row in rows)
    assert [row["problem"] for row in rows] == sorted(row["problem"] for row in rows)
    sources = {source for *_, source in throughput.references_as_candidates(problems, 20)}
    assert len(sources) == 20  # copies of one problem's reference are distinct candidates


def test_problems_that_do_not_load_are_one_line(tmp_path: Path) -> None:
    with pytest.raises(SystemExit, match=r"^evaluator_throughput: "):
        throughput.references_as_candidates(tmp_path / "missing.jsonl", 2)
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match=r"no \.py problem files"):
        throughput.references_as_candidates(tmp_path / "empty", 2)
    (tmp_path / "empty.jsonl").write_text("")
    with pytest.raises(SystemExit, match="evaluator_throughput: no problems in"):
        throughput.references_as_candidates(tmp_path / "empty.jsonl", 2)


def test_the_committed_session36_cpu_tables_are_its_rows() -> None:
    _report_and_page_show(
        "evaluator_throughput_rows_session36_cpu.jsonl",
        (
            "| new | 60 | 110.2 | 32.7 | 1.19 | 1.13 | 110.2 (30) |",
            "| old | 60 | 143.3 | 25.1 | 1.76 | 1.73 | 143.3 (30) |",
            "| new | no build | 60 | 1.13 | 0.96 | 15 | 0.98 |",
            "| old | no build | 60 | 1.73 | 1.49 | 15 | 1.71 |",
        ),
    )


def test_the_recorded_candidates_are_found_from_any_working_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The benchmark runs from a folder without the package (to compare packages); its
    candidate list comes from the checkout's export all the same."""
    monkeypatch.chdir(tmp_path)
    kinds = [kind for _, _, kind, _ in throughput.candidates(12)]
    assert {"raises", "wrong"} < set(kinds) and len(kinds) >= 6  # recorded ones, failing ones


def test_the_committed_session37_h100_tables_are_its_rows() -> None:
    _report_and_page_show(
        "evaluator_throughput_rows_session37_h100.jsonl",
        (
            "| new | 46 | 172.4 | 16.0 | 2.33 | 2.21 | 82.3 (13) |",
            "| old | 13 | 151.5 | 5.1 | 10.00 | 9.81 | 151.5 (13) |",
            "| new | other | 15 | 15 | 1.74 | 21.2 | 1.66 |",
            "| new | no build | 23 | 1.36 | 1.05 | 22 | 1.07 |",
        ),
    )


def test_the_committed_session37_h200_tables_are_its_rows() -> None:
    _report_and_page_show(
        "evaluator_throughput_rows_session37_h200.jsonl",
        (
            "| new | 46 | 160.9 | 17.2 | 2.18 | 2.11 | 83.8 (13) |",
            "| old | 13 | 157.8 | 4.9 | 8.25 | 8.06 | 157.8 (13) |",
            "| new | other | 15 | 15 | 1.65 | 24.3 | 1.52 |",
            "| new | no build | 23 | 1.31 | 0.99 | 22 | 1.33 |",
        ),
    )
