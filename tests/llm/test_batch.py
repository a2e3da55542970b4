"""The batch round trip: requests exported, replies imported, a run that asks no server."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoprofiler.cli.main import app
from autoprofiler.evaluate.baselines import reference_as_candidate
from autoprofiler.llm import LLMConfig, LLMError
from autoprofiler.llm.batch import EXPORTED_SPACE, parse_reply
from autoprofiler.llm.cache import LLM_SPACE
from autoprofiler.problem import load_problems
from autoprofiler.store import Store

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = ROOT / "examples" / "problems"
RECORDINGS = ROOT / "tests" / "data" / "recordings" / "examples_h200.jsonl.gz"
runner = CliRunner()


def export(tmp_path: Path, *extra: str) -> list[dict]:
    args = ["prompts", "export", str(EXAMPLES), "--ids", "5,7", "--llm", "openai:gpt-test"]
    args += ["--configs", "none,static,SpeedOfLight", "--replay", "--recordings", str(RECORDINGS)]
    args += ["--profile-device", "H200", "--device", "cpu", "--store", str(tmp_path / "s.sqlite")]
    result = runner.invoke(app, [*args, "-o", str(tmp_path / "requests.jsonl"), *extra])
    assert result.exit_code == 0, result.output
    assert "6 requests for openai:gpt-test (2 problems x 3 configurations)" in result.stdout
    return [json.loads(line) for line in (tmp_path / "requests.jsonl").read_text().splitlines()]


def fenced(source: str) -> str:
    return f"Here is the rewrite.\n```python\n{source}\n```\n"


def test_export_writes_the_rewriters_requests_in_the_batch_format(tmp_path: Path) -> None:
    lines = export(tmp_path)
    ids = [line["custom_id"] for line in lines]
    assert len(set(ids)) == 6
    assert all(re.fullmatch(r"[A-Za-z0-9_-]{1,64}", i) for i in ids)
    assert {i.split("-")[1] for i in ids} == {"none", "static", "SpeedOfLight"}
    first = lines[0]
    assert first["url"] == "/v1/chat/completions" and first["body"]["model"] == "gpt-test"
    roles = [m["role"] for m in first["body"]["messages"]]
    assert roles == ["system", "user"]
    profiled = next(line for line in lines if "-SpeedOfLight-" in line["custom_id"])
    assert "SpeedOfLight" in profiled["body"]["messages"][1]["content"]  # the profile is sent
    with Store(tmp_path / "s.sqlite") as store:
        assert all(store.get(EXPORTED_SPACE, i) for i in ids)


def test_the_anthropic_format_puts_the_system_prompt_apart(tmp_path: Path) -> None:
    lines = export(tmp_path, "--format", "anthropic")
    params = lines[0]["params"]
    assert params["model"] == "gpt-test" and params["system"].startswith("You are")
    assert [m["role"] for m in params["messages"]] == ["user"]


def test_replies_in_then_optimize_asks_no_server(tmp_path: Path) -> None:
    lines = export(tmp_path)
    problems = {p.name: p for p in load_problems(EXAMPLES).problems}
    missing = next(line["custom_id"] for line in lines if line["custom_id"].startswith("07_"))
    replies = [
        {
            "custom_id": line["custom_id"],
            "content": fenced(reference_as_candidate(problems[line["custom_id"].split("-")[0]])),
            "model": "gpt-test-2026-01",
        }
        for line in lines
        if line["custom_id"] != missing
    ]
    path = tmp_path / "replies.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in replies))
    store = str(tmp_path / "s.sqlite")
    imported = runner.invoke(app, ["replies", "import", str(path), "--store", store])
    assert imported.exit_code == 0 and "5 replies imported" in imported.stdout
    configuration = missing.split("-")[1]
    args = ["optimize", str(EXAMPLES), "--ids", "5,7", "--tree", configuration, "--replay"]
    args += ["--rewriter", "llm", "--llm", "recorded:openai:gpt-test", "--profile-device", "H200"]
    args += ["--device", "cpu", "--store", store, "--candidates-dir", str(tmp_path / "out")]
    args += ["--keep", "rewrite"]  # the replies are what is tested
    ran = runner.invoke(app, [*args, "-o", str(tmp_path / "results.json")])
    assert ran.exit_code == 0, ran.output
    rows = {row["problem"]: row for row in json.loads((tmp_path / "results.json").read_text())}
    assert rows["05_elementwise_chain"]["result"]["correct"]
    assert "not_recorded" in rows["07_row_softmax"]["candidate"]["failure"]


@pytest.mark.parametrize(
    ("row", "words"),
    [
        ({"custom_id": "nobody-none-0123", "content": "x"}, "answers no exported request"),
        ({"custom_id": "x"}, "no reply in this line"),
        ("not json", "not a JSON line"),
    ],
)
def test_a_bad_replies_file_is_refused_whole(tmp_path: Path, row, words: str) -> None:
    lines = export(tmp_path)
    good = {"custom_id": lines[0]["custom_id"], "content": "text", "model": "m"}
    bad = row if isinstance(row, str) else json.dumps(row)
    path = tmp_path / "replies.jsonl"
    path.write_text(json.dumps(good) + "\n" + bad + "\n")
    store = str(tmp_path / "s.sqlite")
    result = runner.invoke(app, ["replies", "import", str(path), "--store", store])
    assert result.exit_code == 2
    assert words in result.stderr and len(result.stderr.strip().splitlines()) == 1
    assert "Traceback" not in result.output
    with Store(tmp_path / "s.sqlite") as db:  # nothing imported, the good line neither
        assert db.get(LLM_SPACE, db.get(EXPORTED_SPACE, good["custom_id"])["key"]) is None


def test_both_vendors_result_lines_are_read() -> None:
    openai = {
        "custom_id": "a",
        "response": {
            "status_code": 200,
            "body": {
                "model": "gpt-x",
                "choices": [{"message": {"content": "hello"}}],
                "usage": {"prompt_tokens": 3, "completion_tokens": 4},
            },
        },
        "error": None,
    }
    anthropic = {
        "custom_id": "b",
        "result": {
            "type": "succeeded",
            "message": {
                "model": "claude-x",
                "content": [{"type": "text", "text": "hi"}, {"type": "text", "text": "!"}],
                "usage": {"input_tokens": 5, "output_tokens": 6},
            },
        },
    }
    one, two = parse_reply(openai), parse_reply(anthropic)
    assert (one.content, one.model, one.usage.completion_tokens) == ("hello", "gpt-x", 4)
    assert (two.content, two.model, two.usage.prompt_tokens) == ("hi!", "claude-x", 5)
    with pytest.raises(ValueError, match="errored"):
        parse_reply({"custom_id": "c", "result": {"type": "errored"}})


def test_a_recorded_model_stands_for_the_model_it_names() -> None:
    config = LLMConfig.from_spec("recorded:anthropic:claude-x", environ={})
    assert config.model_id == "anthropic:claude-x"
    with pytest.raises(LLMError, match="expected"):
        LLMConfig.from_spec("recorded:nobody", environ={})


def test_an_unknown_batch_format_is_one_error_line(tmp_path: Path) -> None:
    args = ["prompts", "export", str(EXAMPLES), "--ids", "5", "--llm", "openai:m", "--device"]
    args += ["cpu", "--store", str(tmp_path / "s.sqlite"), "-o", str(tmp_path / "r.jsonl")]
    result = runner.invoke(app, [*args, "--format", "gemini"])
    assert result.exit_code == 2
    assert "'--format': must be one of openai, anthropic, not 'gemini'" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
