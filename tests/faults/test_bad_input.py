"""Bad input at the command line: one error line, never a traceback.

Malformed problems, unreadable candidates, broken trees and stores, bad options, and an LLM
reply without code (from a local stand-in for an OpenAI-compatible server).
"""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from click.testing import Result
from typer.testing import CliRunner

from autoprofiler.cli.main import app
from tests.adversarial.cases import PROBLEM_PATH

runner = CliRunner()

BAD_FILES = {
    "syntax.py": "class Model(:\n",
    "no_inputs.py": "import torch\nclass Model(torch.nn.Module):\n    pass\n",
    "raises.py": "raise RuntimeError('boom')\nclass Model: pass\ndef get_inputs(): return []\n",
    "bad.jsonl": "{not json\n",
    "broken_tree.json": '{"schema": ',
    "unknown_group.json": json.dumps(
        {
            "schema": "autoprofiler.tree",
            "version": 1,
            "root": {"id": "n0", "collect": ["ncu.NoSuchSection"]},
        }
    ),
    "store.sqlite": "this is not a database\n",
}


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A folder holding the bad files, a good problem, a non-UTF-8 candidate; the cwd."""
    for name, text in BAD_FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "good.py").write_text(PROBLEM_PATH.read_text(encoding="utf-8"), encoding="utf-8")
    (tmp_path / "latin1.py").write_bytes(b"\xff\xfe not utf-8")
    (tmp_path / "empty").mkdir()
    monkeypatch.chdir(tmp_path)
    return tmp_path


def assert_one_line_error(result: Result, words: str, code: int = 2) -> None:
    assert result.exit_code == code, result.output
    assert not isinstance(result.exception, Exception), result.exception
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and words in lines[0], lines


@pytest.mark.parametrize(
    ("args", "words", "code"),
    [
        (["eval", "syntax.py", "good.py"], "syntax.py: syntax error at line", 2),
        (["eval", "no_inputs.py", "good.py"], "no_inputs.py: missing get_inputs", 2),
        (["eval", "raises.py", "good.py"], "raises.py: raises at import", 2),
        (["eval", "missing.py", "good.py"], "no such file or folder", 2),
        (["eval", "good.py", "latin1.py"], "cannot read", 2),
        (["eval", "good.py", "good.py", "--store", "store.sqlite"], "not a usable", 2),
        (["problems", "empty"], "no .py problem files", 2),
        (["problems", "bad.jsonl"], "bad.jsonl:1: not a problem row", 2),
        (["tree", "show", "broken_tree.json"], "malformed JSON", 2),
        (["tree", "show", "unknown_group.json"], "unknown group 'ncu.NoSuchSection'", 2),
        (["tree", "show", "no_such_tree"], "no such tree file", 2),
        (["profile", "good.py", "--ids", "x"], "'--ids': takes numbers", 2),
        (["optimize", "good.py", "--rewriter", "llm"], "needs --llm", 2),
        (
            ["optimize", "good.py", "--replay", "--recordings", "no_such.jsonl.gz"],
            "no_such.jsonl.gz: no such file",
            2,
        ),
        (["bench", "--store", "b.sqlite", "--replay", "--recordings", "gone.gz"], "gone.gz", 2),
        (
            ["optimize", "good.py", "--rewriter", "magic"],
            "must be rules, rules-without-NAME, llm or MODULE:NAME, not 'magic'",
            2,
        ),
        (
            ["optimize", "good.py", "--rewriter", "rules-without-no_such_rule"],
            "unknown transformation",
            2,
        ),
    ],
    ids=lambda value: "-".join(value) if isinstance(value, list) else None,
)
def test_bad_input_is_one_error_line(folder: Path, args: list[str], words: str, code: int) -> None:
    assert_one_line_error(runner.invoke(app, args), words, code)


class _NoCodeReply(BaseHTTPRequestHandler):
    """Answers every chat completion with prose and no code."""

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps(
            {
                "id": "reply-1",
                "object": "chat.completion",
                "created": 0,
                "model": "stand-in",
                "choices": [
                    {
                        "index": 0,
                        "message": {"role": "assistant", "content": "I cannot help with that."},
                        "finish_reason": "stop",
                    }
                ],
                "usage": {"prompt_tokens": 10, "completion_tokens": 6, "total_tokens": 16},
            }
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        """Quiet: no request lines on stderr."""


@pytest.fixture
def no_code_server() -> Iterator[str]:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _NoCodeReply)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}/v1"
    finally:
        server.shutdown()
        server.server_close()


def test_an_llm_reply_without_code_is_a_failed_candidate(folder: Path, no_code_server: str) -> None:
    result = runner.invoke(
        app,
        [
            "optimize",
            "good.py",
            "--rewriter",
            "llm",
            "--llm",
            "openai:stand-in",
            "--base-url",
            no_code_server,
            "--device",
            "cpu",
            "-o",
            "out.json",
        ],
    )
    assert result.exit_code == 0, result.output
    assert result.exception is None and "Traceback" not in result.output
    [row] = json.loads((folder / "out.json").read_text(encoding="utf-8"))
    assert row["result"] is None
    assert row["candidate"]["failure"].startswith("no usable code in the reply")
    assert "\n" not in row["candidate"]["failure"]
