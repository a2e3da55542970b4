"""The LLM proposer answered in batches: a round with no reply exports its request and stops,
the reply is imported, and ``--resume`` goes on from exactly that round; with a menu the
prompt states it and the tree shows the rewriter one configuration per leaf."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from autoprofiler.cli.main import app
from autoprofiler.learn import StudyStorage, TrialState
from autoprofiler.problem import Problem
from autoprofiler.store import Store

from .conftest import RECORDINGS
from .test_cli import write_jsonl

MENU = "none,static,SpeedOfLight"


def learn(store: Path, problems: Path, out: Path, *extra: str):
    args = [
        "learn", "--store", str(store), "--study", "batch", "--problems", str(problems),
        "--recordings", str(RECORDINGS), "--train", "2", "--budget", "20",
        "--rewriter", "tests.learn.gated_rewriter:GatedRewriter", "--proposer", "llm",
        "--llm", "recorded:anthropic:frontier", "--menu", MENU, "--iterations", "2",
        "--patience", "2", "--edits-per-round", "2", "--device", "cpu", "--seed", "0",
        "--count-flagged", "--requests-out", str(out), "--format", "anthropic", *extra,
    ]  # fmt: skip
    return CliRunner().invoke(app, args)


def reply_to(request_file: Path, edits: list[dict], tmp_path: Path) -> Path:
    line = json.loads(request_file.read_text(encoding="utf-8"))
    content = "```json\n" + json.dumps(edits) + "\n```"
    path = tmp_path / "replies.jsonl"
    row = {"custom_id": line["custom_id"], "content": content, "model": "frontier-test"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    return path


def test_a_round_waits_for_its_reply_and_resume_goes_on(
    tmp_path: Path, train: list[Problem]
) -> None:
    store = tmp_path / "store.sqlite"
    problems = write_jsonl(tmp_path / "problems.jsonl", train)
    first = tmp_path / "round1.jsonl"

    waiting = learn(store, problems, first)
    assert waiting.exit_code == 0, waiting.output
    output = " ".join(waiting.output.split())
    assert "waiting for a reply to propose-round1" in output and "--resume" in output
    line = json.loads(first.read_text(encoding="utf-8"))
    assert line["custom_id"].startswith("batch-propose-round1-")
    prompt = line["params"]["messages"][0]["content"]
    assert "Every leaf must list exactly one of these configurations" in prompt
    assert '["ncu.SpeedOfLight"]' in prompt and "only routes" in prompt
    with Store(store) as opened:
        assert StudyStorage(opened).trials("batch") == []

    # Asking again without the reply exports the same request: the study has not moved.
    again = learn(store, problems, tmp_path / "again.jsonl", "--resume")
    assert again.exit_code == 0, again.output
    assert (tmp_path / "again.jsonl").read_text() == first.read_text()

    edits = [
        {"kind": "rewrite", "node_id": "n0", "collect": ["static"]},
        {"kind": "rewrite", "node_id": "n0", "collect": ["ncu.SpeedOfLight"]},
    ]
    imported = CliRunner().invoke(
        app, ["replies", "import", str(reply_to(first, edits, tmp_path)), "--store", str(store)]
    )
    assert imported.exit_code == 0, imported.output

    second = tmp_path / "round2.jsonl"
    resumed = learn(store, problems, second, "--resume")
    assert resumed.exit_code == 0, resumed.output
    with Store(store) as opened:
        trials = StudyStorage(opened).trials("batch")
    assert [t.round for t in trials] == [0] * len(trials) and trials
    assert trials[0].edit == edits[0] | {"condition": None}
    assert trials[0].state in (TrialState.ACCEPTED, TrialState.REJECTED)
    # The next round waits in turn, for a request that is a new one.
    assert "propose-round2" in " ".join(resumed.output.split())
    assert json.loads(second.read_text())["custom_id"].startswith("batch-propose-round2-")


def test_a_reply_to_a_request_never_exported_is_refused(tmp_path: Path) -> None:
    store = tmp_path / "store.sqlite"
    Store(store).close()
    path = tmp_path / "replies.jsonl"
    row = {"custom_id": "batch-propose-round9-0000", "content": "[]", "model": "m"}
    path.write_text(json.dumps(row) + "\n", encoding="utf-8")
    result = CliRunner().invoke(app, ["replies", "import", str(path), "--store", str(store)])
    assert result.exit_code != 0
    assert len(result.output.strip().splitlines()) == 1, result.output
