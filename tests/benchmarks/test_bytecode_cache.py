"""benchmarks/bytecode_cache.py: each way's processes get the bytecode they are meant to, and
the table is the rows'."""

from __future__ import annotations

from pathlib import Path

import pytest

from .conftest import ROOT, import_benchmark

bytecode_cache = import_benchmark("bytecode_cache")


def test_each_way_starts_its_processes_with_its_bytecode(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    given = bytecode_cache._environment("installation", tmp_path)
    assert given["PYTHONDONTWRITEBYTECODE"] == "1" and "PYTHONPYCACHEPREFIX" not in given
    none = bytecode_cache._environment("none", tmp_path)
    assert not any(Path(none["PYTHONPYCACHEPREFIX"]).iterdir())  # nothing to load
    assert none["PYTHONDONTWRITEBYTECODE"] == "1"  # nor anything kept for the next
    ours = bytecode_cache._environment("evaluator's folder", tmp_path)
    assert "PYTHONDONTWRITEBYTECODE" not in ours
    assert Path(ours["PYTHONPYCACHEPREFIX"]).name.startswith("autoprofiler_bytecode_")


def test_a_small_run_measures_every_way_and_tables_it(tmp_path: Path) -> None:
    rows = tmp_path / "rows.jsonl"
    bytecode_cache.measure(1, rows, base=("json",), then=("email.mime.text",))
    text = bytecode_cache.report(rows)
    for way in bytecode_cache.WAYS:
        assert f"| {way} |" in text
    assert "| none | " in text and "| 1.00x |" in text


@pytest.mark.parametrize("name", ["session33", "session34_h100"])
def test_the_committed_table_is_the_committed_rows(name: str) -> None:
    rows = ROOT / "docs" / "results" / "data" / f"bytecode_cache_rows_{name}.jsonl"
    table = bytecode_cache.report(rows)
    page = (ROOT / "docs" / "results" / "evaluator_throughput.md").read_text()
    shown = "\n".join(line.strip() for line in page.splitlines())  # in a list item there
    assert table.split("\n", 2)[2] in shown
