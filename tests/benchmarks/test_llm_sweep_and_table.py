"""benchmarks/llm_sweep.py and llm_table.py on the committed LLM data set: every request is
rebuilt from the recordings as it was exported, every reply becomes a candidate, the committed
verdicts replay as recorded, and the table counts what the rows hold."""

from __future__ import annotations

import gzip
import json
import logging
from pathlib import Path

import pytest

from autoprofiler.evaluate import (
    EvalConfig,
    EvalResult,
    FailureKind,
    import_evaluations,
    replay_evaluation,
)
from autoprofiler.evaluate.config import EVALUATOR_VERSION
from autoprofiler.evaluate.runner import store_evaluation
from autoprofiler.execute.evaluation import Evaluated
from autoprofiler.problem import source_hash
from autoprofiler.store import Store

from .conftest import ROOT, import_benchmark

llm_sweep = import_benchmark("llm_sweep")
llm_table = import_benchmark("llm_table")

DATA = ROOT / "docs" / "results" / "data"
FIRST = DATA / "kernelbench_h200.jsonl.gz"
MORE = DATA / "kernelbench_h200_more.jsonl.gz"
REQUESTS = DATA / "llm_requests.jsonl.gz"
REPLIES = DATA / "llm_replies.jsonl.gz"
ROWS = DATA / "llm_sweep_rows.jsonl.gz"
EVALUATIONS = DATA / "llm_evaluations.jsonl.gz"


def _sweep_args(tmp_path: Path) -> list[str]:
    return [
        "--requests", str(REQUESTS), "--replies", str(REPLIES),
        "--recordings", str(FIRST), "--recordings", str(FIRST), str(MORE),
        "--store", str(tmp_path / "store.sqlite"), "--rows", str(tmp_path / "rows.jsonl"),
    ]  # fmt: skip


def test_every_committed_request_is_rebuilt_and_every_reply_is_a_candidate(tmp_path, caplog):
    wanted = llm_sweep._requested(REQUESTS)
    found = llm_sweep.rebuilt_requests([[FIRST], [FIRST, MORE]], wanted, "H200")
    assert len(found) == len(wanted) == 240
    assert {name for _, name, _, _ in found.values()} == set(llm_sweep.CONFIGS)
    with caplog.at_level(logging.INFO, logger="llm_sweep"):
        assert llm_sweep.main([*_sweep_args(tmp_path), "--dry-run"]) == 0
    assert "40 problems, 240 candidates usable, 0 judged already" in caplog.text


def test_a_row_counts_as_judged_only_while_the_store_holds_its_verdict(tmp_path, caplog):
    """A run killed between verdicts and the export a later slot resumes from leaves rows
    whose verdicts no store holds: those candidates are judged again, no others. Here the
    last row claims this evaluator's verdict, and the export holds an older one."""
    lines = gzip.decompress(ROWS.read_bytes()).decode().splitlines()
    last = json.loads(lines[-1])
    last["result"]["evaluator_version"] = EVALUATOR_VERSION
    rows = tmp_path / "rows.jsonl"
    rows.write_text("\n".join([*lines[:-1], json.dumps(last)]) + "\n")
    for folder, resumed, left in (("resumed", [str(EVALUATIONS)], 1), ("bare", [], 240)):
        (tmp_path / folder).mkdir()
        args = _sweep_args(tmp_path / folder)
        args[args.index("--rows") + 1] = str(rows)
        caplog.clear()
        with caplog.at_level(logging.INFO, logger="llm_sweep"):
            assert llm_sweep.main([*args, "--dry-run", "--resume-from", *resumed]) == 0
        assert f"{left} candidates to judge" in caplog.text


def test_an_interrupted_sweep_exports_the_verdicts_of_its_unfinished_problem(tmp_path, monkeypatch):
    """A slot's end (its SIGTERM is a KeyboardInterrupt in the sweep) comes in the middle of a
    problem: the verdict the store holds is exported all the same, so the next slot resumes
    it (on the H100 five such verdicts were lost). The judge here stores one made-up verdict,
    as ``evaluate_many`` stores each, then is interrupted."""
    judged = []

    def one_then_interrupted(pairs, config, store, use_cache):
        problem, source = pairs[0]
        result = EvalResult(problem_hash=problem.content_hash, candidate_hash=source_hash(source))
        result.failure_kind, result.failure_message = FailureKind.RUNTIME_ERROR, "made up"
        store_evaluation(store, problem, source, config, result)
        judged.append(result.candidate_hash)
        yield Evaluated(problem, source, result)
        raise KeyboardInterrupt

    monkeypatch.setattr(llm_sweep, "evaluate_many", one_then_interrupted)
    export = tmp_path / "export.jsonl.gz"
    with pytest.raises(KeyboardInterrupt):
        llm_sweep.main([*_sweep_args(tmp_path), "--device", "cpu", "--export", str(export)])
    with gzip.open(export, "rt") as lines:
        exported = [r["candidate_hash"] for r in map(json.loads, lines) if "evaluation" in r]
    assert exported == judged


def test_requests_exported_with_other_recordings_are_not_rebuilt() -> None:
    """The profile's cost line holds the start-up recorded on the device, a median over the
    recordings loaded: the 30 problems exported with the first file alone read otherwise
    when the second is loaded too. The sweep stops, naming them, rather than judge replies
    to prompts that were never sent."""
    with pytest.raises(SystemExit, match="120 requests not rebuilt"):
        llm_sweep.rebuilt_requests([[FIRST, MORE]], llm_sweep._requested(REQUESTS), "H200")


def test_rows_to_judge_again_are_those_a_fix_changed() -> None:
    row = {"result": {"failure_message": "timing_contradicted: 4 timed trials where at least 6 "
                                         "were due"}}  # fmt: skip
    assert llm_sweep._rejudged(row, ["were due"])
    assert not llm_sweep._rejudged(row, [])
    assert not llm_sweep._rejudged({"result": None}, ["were due"])


def test_rows_an_older_evaluator_judged_are_judged_again_when_asked() -> None:
    current = {"result": {"evaluator_version": EVALUATOR_VERSION, "failure_message": ""}}
    older = {"result": {"evaluator_version": "3", "failure_message": ""}}
    unversioned = {"result": {"failure_message": ""}}  # v1 recorded no version
    assert llm_sweep._rejudged(older, [], older=True)
    assert llm_sweep._rejudged(unversioned, [], older=True)
    assert not llm_sweep._rejudged(current, [], older=True)
    assert not llm_sweep._rejudged(older, [])
    assert not llm_sweep._rejudged({"result": None, "failure": "no code"}, [], older=True)


def test_the_committed_verdicts_replay_as_the_rows_recorded_them(tmp_path) -> None:
    store = Store(tmp_path / "store.sqlite")
    imported = import_evaluations(EVALUATIONS, store)
    assert imported.devices == ("cuda:NVIDIA H200",)
    config = llm_sweep.sweep_config()
    replayed = EvalConfig(device="cuda", replay_device="cuda:NVIDIA H200")
    assert replayed.config_hash == config.config_hash  # what bench and optimize replay
    rows = llm_table.read_rows(ROWS)
    checked = 0
    for row in rows.values():
        if row.get("result") is None:
            continue
        problem = store.get_problem(row["problem_hash"])
        if problem is None:
            continue  # judged in a slot whose export never came back (listed on the page)
        result = replay_evaluation(problem, row["candidate_hash"], replayed, store)
        if result.failure_kind is not None and result.failure_kind.value == "not_recorded":
            continue  # judged in a slot whose export never came back (listed on the page)
        assert (result.correct, result.speedup) == (row["correct"], row["speedup"])
        checked += 1
    assert checked == imported.evaluations >= 90


def _row(problem: str, configuration: str, speedup: float | None, flags=()) -> dict:
    findings = [{"name": f, "detail": "", "severity": "flag"} for f in flags]
    return {
        "custom_id": f"{problem}-{configuration}",
        "problem": problem,
        "configuration": configuration,
        "candidate_hash": f"{problem}{configuration}",
        "kind": "triton",
        "correct": speedup is not None,
        "speedup": speedup,
        "failure_kind": None if speedup is not None else "wrong_values",
        "result": {"findings": findings},
    }


def test_the_table_counts_what_the_rows_hold() -> None:
    configs = llm_sweep.CONFIGS
    rows = {}
    for configuration, a, b in zip(configs, (2.0, 1.0, 4.0, 1.0, 1.0, 1.0),
                                   (0.5, None, 2.0, 2.0, 2.0, 2.0)):  # fmt: skip
        for problem, speedup in (("L1/a", a), ("L1/b", b)):
            flagged = problem == "L1/a" and speedup == 4.0
            row = _row(problem, configuration, speedup, ("same_op_as_reference",) * flagged)
            rows[row["custom_id"]] = row
    partial = _row("L2/c", "none", 3.0)
    rows[partial["custom_id"]] = partial
    metrics = {f"L1/a-{c}": n for c, n in zip(configs, (0, 8, 8, 24, 16, 86))}
    table = llm_table.build_table(rows, metrics, {})
    lines = {line.split(" | ")[0].lstrip("| "): line for line in table.splitlines()}
    # none: 2.0 and 0.5 -> geomean 1.0; SpeedOfLight: 4.0 (flagged) and 2.0 -> 2.828, and
    # 1.414 with the flagged one as 1.0
    assert "| 2/2 (100 %) | 0 | 1 | 1 | 1.000 | 1.000 |" in lines["none"]
    assert "| 1/2 (50 %) | 0 | 0 | 0 | 1.000 | 1.000 |" in lines["static"]
    assert "| 2/2 (100 %) | 1 | 2 | 2 | 2.828 | 1.414 |" in lines["SpeedOfLight"]
    assert "does not rise monotonically" in table
    # winners per kernel: L1/a SpeedOfLight alone; L1/b the four at 2.0x
    assert "none 0, static 0, SpeedOfLight 2, SpeedOfLight+Occupancy+LaunchStats 1," in table
    assert "best per kernel would give 2.828x" in table
    assert "L2/c (1 of 6)" in table
    assert "timed trials on the GPU;" in table  # the rows name no device


def test_the_table_names_the_gpu_models_whose_verdicts_the_rows_hold() -> None:
    rows = {}
    for problem, device in (("L1/a", "cuda:NVIDIA H100 80GB HBM3"), ("L1/b", "cuda:NVIDIA H200"),
                            ("L1/c", "")):  # fmt: skip
        for configuration in llm_sweep.CONFIGS:
            row = _row(problem, configuration, 1.5)
            row["result"] = {**row["result"], "device": device}
            rows[row["custom_id"]] = row
    assert llm_table.judged_devices(rows) == ["H100 80GB HBM3", "H200"]
    table = llm_table.build_table(rows, {}, {})
    assert "timed trials on the H100 80GB HBM3 and the H200;" in table


def test_the_committed_table_is_the_committed_rows(tmp_path) -> None:
    rows = llm_table.read_rows(ROWS)
    table = llm_table.build_table(rows, llm_table.metric_lines(REQUESTS), {})
    complete = {}
    for row in rows.values():
        complete.setdefault(row["problem"], set()).add(row["configuration"])
    full = [p for p, c in complete.items() if len(c) == 6]
    correct = sum(
        1 for r in rows.values() if r["configuration"] == "none" and r["problem"] in full
        and r["correct"]
    )  # fmt: skip
    assert f"| none | 0 | {correct}/{len(full)} " in table
    page = (ROOT / "docs" / "results" / "llm_rewriter.md").read_text(encoding="utf-8")
    assert f"the {len(full)} problems with all six configurations judged" in page
    with gzip.open(REQUESTS, "rt") as handle:
        assert sum(1 for line in handle if json.loads(line)["custom_id"]) == 240


def test_a_shard_is_i_of_n(capsys) -> None:
    assert llm_sweep._shard("1/2") == (1, 2)
    for text in ("2/2", "-1/2", "a/b", "1"):
        with pytest.raises(SystemExit):
            llm_sweep._parse_args(["--requests", "r", "--replies", "r", "--recordings", "x",
                                   "--store", "s", "--rows", "r", f"--shard={text}"])  # fmt: skip
        assert "a shard" in capsys.readouterr().err
