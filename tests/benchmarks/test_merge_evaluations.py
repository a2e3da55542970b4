"""benchmarks/merge_evaluations.py: the newest verdict of each pair wins, later files newer."""

from __future__ import annotations

import gzip
from pathlib import Path

from autoprofiler.evaluate import export_evaluations, import_evaluations
from autoprofiler.store import Store

from .conftest import import_benchmark

merge_evaluations = import_benchmark("merge_evaluations")


def _export(path: Path, verdicts: dict[str, tuple[str, bool]]) -> Path:
    """An export holding, per store key, a verdict on (problem P, candidate) ``correct``."""
    with Store(path.with_suffix(".sqlite")) as store:
        for key, (candidate, correct) in verdicts.items():
            store.put_evaluation(key, "P", candidate, "cuda:H200", "cfg", {"correct": correct})
        export_evaluations(store, path)
    return path


def _verdicts(path: Path) -> list[tuple[str, bool]]:
    with Store(":memory:") as store:
        import_evaluations(path, store)
        return sorted((row[2], row[5]["correct"]) for row in store.iter_evaluations())


def test_the_later_file_wins_for_the_same_pair_and_other_pairs_stay(tmp_path: Path) -> None:
    # The same pair under two evaluator versions (two store keys): an old and a new verdict.
    old = _export(tmp_path / "old.jsonl.gz", {"v3": ("A", False), "v3b": ("B", True)})
    new = _export(tmp_path / "new.jsonl.gz", {"v7": ("A", True)})
    merged = tmp_path / "merged.jsonl.gz"
    assert merge_evaluations.main([str(old), str(new), "--out", str(merged)]) == 0
    assert _verdicts(merged) == [("A", True), ("B", True)]
    assert merge_evaluations.main([str(new), str(old), "--out", str(merged)]) == 0
    assert _verdicts(merged) == [("A", False), ("B", True)]


def test_a_file_that_is_no_export_is_one_line(tmp_path: Path, caplog) -> None:
    bad = tmp_path / "bad.jsonl.gz"
    with gzip.open(bad, "wt") as handle:
        handle.write('{"kind": "something else"}\n')
    out = tmp_path / "merged.jsonl.gz"
    assert merge_evaluations.main([str(bad), "--out", str(out)]) == 2
    assert "not an autoprofiler evaluations file" in caplog.text and not out.exists()
