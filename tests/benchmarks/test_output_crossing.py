"""The output-crossing benchmark: its table from the H200's recorded rows, and (on a GPU) a
small run of every way of crossing."""

from __future__ import annotations

import argparse
import json
import shutil
import tempfile
from pathlib import Path

import pytest
import torch

from tests.benchmarks.conftest import ROOT, import_benchmark

crossing = import_benchmark("output_crossing")
ROWS = ROOT / "docs" / "results" / "data" / "output_crossing_rows_session32.jsonl"


def test_the_table_gives_each_way_its_median_write_and_read() -> None:
    table = crossing.report(ROWS).splitlines()
    assert len(table) == 2 + 2 * 4  # header, rule, two sizes of four ways
    assert "| 6 | torch.save | 10.35 | 5.49 | 15.84 | 0.41 | yes |" in table
    assert "| 6 | raw file, pinned | 3.67 | 0.70 | 4.37 | 1.47 | yes |" in table


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_every_way_hands_the_output_over_unchanged(tmp_path: Path) -> None:
    out = tmp_path / "rows.jsonl"
    shared = Path("/dev/shm")  # the evaluator's folder: page-locking a shared mapping needs it
    folder = Path(tempfile.mkdtemp(dir=shared)) if shared.is_dir() else tmp_path
    args = argparse.Namespace(gib=[0.01], repeats=1, folder=str(folder), out=str(out))
    try:
        assert crossing.measure(args) == 0
    finally:
        leftovers = list(folder.glob("crossing.*"))
        shutil.rmtree(folder, ignore_errors=True)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert sorted(r["way"] for r in rows) == sorted(
        ["torch.save", "raw file", "raw file, pinned", "GPU slab"]
    )
    assert all(r["same"] for r in rows)
    assert not leftovers
