"""benchmarks/llm_learning.py on the committed LLM data set: every tree the menu search tries
asks a request that has a recorded reply, each study starts from the configuration best on its
training problems, the results page block is written, and the LLM proposer waits for its first
round's reply and then plays it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from autoprofiler.problem import Problem

from .conftest import import_benchmark

llm_learning = import_benchmark("llm_learning")


def test_learned_trees_are_benched_against_every_configuration(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("before\n<!-- llm_learning:start -->\nold\n<!-- llm_learning:end -->\n")
    rows_path, bench_path = tmp_path / "rows.json", tmp_path / "bench.json"
    args = [
        "--work", str(tmp_path / "work"), "--iterations", "2", "--patience", "2",
        "--rows", str(rows_path), "--bench-json", str(bench_path), "--markdown", str(page),
    ]  # fmt: skip
    assert llm_learning.main(args) == 0
    rows = json.loads(rows_path.read_text())
    benches = json.loads(bench_path.read_text())
    starts = [b["start_train_score"]["value"] for bench in benches for b in bench["budgets"]]
    assert [(r["seed"], r["budget_s"]) for r in rows] == [
        (s, b) for s in llm_learning.SEEDS for b in (5.0, 15.0, 60.0)
    ]
    for row, start in zip(rows, starts, strict=True):
        assert row["unrecorded"] == 0  # every path asked a recorded request, judged
        assert set(row["fixed_test"]) == set(llm_learning.CONFIGS)
        best = row["best_on_train"]
        assert row["fixed_train"][best] == max(row["fixed_train"].values())
        assert start == row["fixed_train"][best]  # each study started there
        ratio, low, high = row["learned_over_best"]
        assert low <= ratio <= high
        assert row["oracle_test"] >= max(row["fixed_test"].values()) - 1e-9
        assert row["tree"]["show"] == "leaf"
    # Under 5 s no ncu group fits: every configuration that needs one shows nothing.
    cheap = [r for r in rows if r["budget_s"] == 5.0]
    assert all(r["fixed_test"]["full"] == r["fixed_test"]["none"] for r in cheap)
    text = page.read_text()
    assert "old" not in text and "| split | budget |" in text and text.startswith("before")
    assert len(benches) == len(llm_learning.SEEDS)


def test_the_llm_proposer_waits_for_its_reply_then_plays_it(tmp_path: Path) -> None:
    work, requests = tmp_path / "work", tmp_path / "round1.jsonl"
    args = ["--work", str(work), "--proposer", "llm", "--iterations", "2", "--patience", "2"]
    assert llm_learning.main([*args, "--requests-out", str(requests)]) == 0
    (line,) = [json.loads(x) for x in requests.read_text().splitlines()]
    assert "propose-round1" in line["custom_id"]
    edits = [{"kind": "rewrite", "node_id": "n0", "collect": ["static"]}]
    reply = tmp_path / "reply.jsonl"
    content = "```json\n" + json.dumps(edits) + "\n```"
    reply.write_text(json.dumps({"custom_id": line["custom_id"], "content": content}) + "\n")
    rows_path, second = tmp_path / "rows.json", tmp_path / "round2.jsonl"
    more = ["--replies", str(reply), "--rows", str(rows_path), "--requests-out", str(second)]
    assert llm_learning.main([*args, *more]) == 0
    (row,) = json.loads(rows_path.read_text())
    assert row["trials"] == 1 and row["unrecorded"] == 0
    assert "waiting for a reply" in row["stop"] and "propose-round2" in second.read_text()


def test_the_committed_llm_proposer_replies_replay_the_committed_study(tmp_path: Path) -> None:
    """Each committed reply is imported when its round asks for it: the study replays to the
    tree and scores on the results page, round by round, with nothing left waiting (over the
    38 problems judged when it ran: ``--exclude`` the two judged later)."""
    data = llm_learning.DATA
    committed = json.loads((data / "llm_learning_proposer.json").read_text())
    rows_path = tmp_path / "rows.json"
    args = [
        "--work", str(tmp_path / "work"), "--proposer", "llm", "--iterations", "6",
        "--patience", "3", "--exclude", "L2/13,L2/41",
        "--replies", str(data / "llm_proposer_replies.jsonl.gz"), "--rows", str(rows_path),
    ]  # fmt: skip
    assert llm_learning.main(args) == 0
    (row,) = json.loads(rows_path.read_text())
    (expected,) = committed
    for key in ("tree", "learned_test", "learned_train", "trials", "accepted", "stop"):
        assert row[key] == expected[key], key
    assert "waiting" not in row["stop"]


def test_exclude_names_judged_problems_only() -> None:
    problems = [
        Problem(name="13_Conv", source="", level=2),
        Problem(name="1_Gemm", source="", level=1),
    ]
    assert [p.key for p in llm_learning.excluded(problems, "L2/13")] == ["L1/1_Gemm"]
    assert llm_learning.excluded(problems, "") == problems
    with pytest.raises(SystemExit, match="no judged problem L2/99"):
        llm_learning.excluded(problems, "L2/13,L2/99")


def test_a_device_with_no_verdicts_stops_before_any_study(tmp_path: Path) -> None:
    args = ["--work", str(tmp_path), "--evaluated-device", "cuda:NVIDIA Nothing"]
    with pytest.raises(SystemExit, match=r"no verdicts of 'cuda:NVIDIA Nothing' in .*H200\)$"):
        llm_learning.main(args)
    assert not (tmp_path / "pending.jsonl").exists()
