"""Every command against a table of bad inputs: exactly one line of output, no traceback, exit
code 2, before any work is done (no store is written, nothing is evaluated)."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autoprofiler.cli.main import app
from tests.conftest import SCALE_PROBLEM

runner = CliRunner()

FILES = {
    "good.py": SCALE_PROBLEM,
    "bad.jsonl": '{"name": "x"}\n',
    "list.jsonl": "[1, 2]\n",
    "not_a_store.sqlite": "this is not a database\n",
    "unknown_group.json": json.dumps(
        {"schema": "autoprofiler.tree", "version": 1, "root": {"id": "n0", "collect": ["ncu.X"]}}
    ),
    "no_bench.json": "{}",
    "list_bench.json": "[1]",
}

EXPORT = ["prompts", "export", "good.py", "--llm", "openai:m", "-o", "r.jsonl"]
# (command line, words the one line must hold). {dir} is a folder, the other names are FILES,
# other.jsonl.gz (an export of another kind) or paths that do not exist.
CASES = [
    # problems
    (["problems", "good.py", "--ids", "x"], "'--ids': takes numbers and ranges"),
    (["problems", "good.py", "--levels", "3-1"], "'--levels': takes numbers"),
    (["problems", "missing"], "missing: no such file or folder"),
    (["problems", "bad.jsonl"], "bad.jsonl:1: not a problem row: no 'source' text"),
    (["problems", "list.jsonl"], "list.jsonl:1: not a problem row: a JSON list, not an object"),
    (["problems", "good.py", "--ids", "999"], "good.py: no problems with --ids 999"),
    (["problems", "good.py", "-o", "{dir}"], "is a folder: give the file to write"),
    # eval
    (["eval", "good.py", "missing.py"], "missing.py: no such file or folder"),
    (["eval", "good.py", "good.py", "--trials", "0"], "'--trials'"),
    (["eval", "good.py", "good.py", "--atol", "-1"], "'--atol'"),
    (["eval", "good.py", "good.py", "--device", "tpu"], "must be one of auto, cuda, cpu"),
    (["eval", "good.py", "good.py", "--store", "{dir}"], "is a folder, not a store file"),
    (["eval", "good.py", "good.py", "--store", "not_a_store.sqlite"], "not an SQLite file"),
    (["eval", "good.py", "good.py", "--workers", "0"], "'--workers'"),
    (["eval", "good.py", "good.py", "--executor", "magic"], "must be one of local, ray"),
    (["eval", "bad.jsonl", "good.py"], "not a problem row"),
    # baselines
    (["baselines", "good.py", "--device", "gpu"], "must be one of auto, cuda, cpu"),
    (["baselines", "good.py", "--ids", "1-"], "'--ids': takes numbers"),
    (["baselines", "missing"], "no such file or folder"),
    # tree
    (["tree", "show", "unknown_group.json"], "unknown group 'ncu.X'"),
    (["tree", "show", "full", "--max-depth", "-1"], "'--max-depth'"),
    (["tree", "validate", "missing.json"], "no such tree file"),
    (["tree", "render", "full", "-o", "{dir}"], "is a folder: give the file to write"),
    (["tree", "render", "full", "-o", "t.svg", "--format", "bmp"], "'--format'"),
    (["tree", "prune", "full"], "No such command 'prune'"),
    # profile
    (["profile", "good.py", "--budget", "-5"], "'--budget': a budget is seconds >= 0"),
    (["profile", "good.py", "--budget", "nan"], "'--budget': a budget is seconds >= 0"),
    (["profile", "good.py", "-g", "ncu.SpeedOfDark"], "unknown metric group 'ncu.SpeedOfDark'"),
    (["profile", "good.py", "--tree", "unknown_group.json"], "unknown group 'ncu.X'"),
    (["profile", "good.py", "--recordings", "good.py"], "not an autoprofiler recordings file"),
    (["profile", "good.py", "--recordings", "gone.jsonl.gz"], "gone.jsonl.gz: no such file"),
    (["profile", "good.py", "--recordings", "other.jsonl.gz"], "not an autoprofiler recordings"),
    (["profile", "good.py", "--record", "--replay"], "cannot take --replay"),
    (["profile", "bad.jsonl"], "not a problem row"),
    (["profile", "good.py", "--ids", "999"], "no problems with --ids 999"),
    (["profile", "good.py", "-v", "-q"], "-v and -q ask for opposite things"),
    # optimize
    (["optimize", "good.py", "--budget", "-1"], "'--budget'"),
    (["optimize", "good.py", "--rewriter", "magic"], "must be rules, rules-without-NAME, llm"),
    (["optimize", "good.py", "--rewriter", "rules-without-nothing"], "unknown transformation"),
    (["optimize", "good.py", "--rewriter", "llm"], "--rewriter llm needs --llm"),
    (["optimize", "good.py", "--llm", "gpt-4"], "'--llm': expected openai:MODEL"),
    (["optimize", "good.py", "--candidates-dir", "good.py"], "is a file: give the folder"),
    (["optimize", "good.py", "--evaluations", "good.py"], "not an autoprofiler evaluations"),
    (["optimize", "good.py", "--out", "x"], "No such option: --out"),
    # prompts and replies
    ([*EXPORT, "--configs", "x"], "'--configs': x: no such tree file, nor a fixed tree name"),
    ([*EXPORT, "--format", "gemini"], "must be one of openai, anthropic"),
    ([*EXPORT, "--budget", "-3"], "'--budget'"),
    (["prompts", "export", "good.py", "--llm", "m", "-o", "r.jsonl"], "'--llm': expected"),
    (["prompts", "export", "good.py", "--llm", "openai:m"], "Missing option '--output'"),
    (["replies", "import", "missing.jsonl"], "missing.jsonl: no such file"),
    (["replies", "import", "{dir}"], "no such file (a folder)"),
    # learn
    (["learn", "--study", "s", "--train", "1.5"], "a training fraction must be in (0, 1]"),
    (["learn", "--study", "s", "--train", "0"], "a training count must be at least 1"),
    (["learn", "--study", "s", "--objective", "speed"], "unknown objective 'speed'"),
    (["learn", "--study", "s", "--budget", "-1"], "'--budget'"),
    (["learn", "--study", "s", "--start", "nothing"], "'--start': nothing: no such tree file"),
    (["learn", "--study", "s", "--cost-weight", "-1"], "'--cost-weight'"),
    (["learn", "--study", "s", "--levels", "x"], "'--levels': takes numbers"),
    (["learn", "--study", "s", "--recordings", "bad.jsonl"], "not an autoprofiler recordings"),
    (["learn", "--study", "s", "--proposer", "magic"], "'--proposer'"),
    (["learn", "--study", "s", "--problems", "missing"], "missing: no such file or folder"),
    (["learn", "--train", "0.5"], "Missing option '--study'"),
    # bench
    (["bench", "--budgets", "5,x"], "bad budget 'x' in '5,x'"),
    (["bench", "--cost-weights", "-1"], "bad cost weight '-1'"),
    (["bench", "--train", "-0.5"], "a training fraction must be in (0, 1]"),
    (["bench", "--objective", "speed"], "unknown objective 'speed'"),
    (["bench", "--evaluations", "missing.jsonl.gz"], "missing.jsonl.gz: no such file"),
    # report
    (["report", "missing.sqlite"], "missing.sqlite: no such file or folder"),
    (["report", "no_bench.json"], "no_bench.json: not bench results: no 'name' field"),
    (["report", "list_bench.json"], "list_bench.json: not bench results"),
    (["report", "good.py"], "good.py: not bench results"),
    (["report", "no_bench.json", "-o", "{dir}"], "is a folder: give the file to write"),
]


@pytest.fixture
def folder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    for name, text in FILES.items():
        (tmp_path / name).write_text(text, encoding="utf-8")
    (tmp_path / "a_folder").mkdir()
    with gzip.open(tmp_path / "other.jsonl.gz", "wt") as handle:
        handle.write('{"kind": "something else"}\n')
    monkeypatch.chdir(tmp_path)
    return tmp_path


@pytest.mark.parametrize(("args", "words"), CASES, ids=[" ".join(args) for args, _ in CASES])
def test_a_bad_input_is_one_line_and_exit_code_2(folder: Path, args: list[str], words: str) -> None:
    args = [arg.replace("{dir}", "a_folder") for arg in args]
    result = runner.invoke(app, args)
    lines = result.output.strip().splitlines()
    assert result.exit_code == 2, result.output
    assert result.exception is None or isinstance(result.exception, SystemExit), result.exception
    assert "Traceback" not in result.output
    assert len(lines) == 1, lines
    assert lines[0].startswith("error: ") and words in lines[0], lines
    assert not (folder / ".autoprofiler").exists(), "a store was opened before the check"


def test_every_command_is_in_the_table() -> None:
    """A command added later gets bad inputs of its own here."""
    import typer.main

    group = typer.main.get_command(app)
    commands = {
        f"{name} {sub}" if hasattr(command, "commands") else name
        for name, command in group.commands.items()
        for sub in getattr(command, "commands", {None: None})
    }
    tried = {" ".join(args[:2]) if args[0] in ("tree", "prompts", "replies") else args[0]
             for args, _ in CASES}  # fmt: skip
    assert commands <= tried, commands - tried
