"""docs/results/data/README.md describes the committed data: the files it names exist, and what
it promises of the verdict files (each row names the GPU that judged it) holds."""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import pytest

DATA = Path(__file__).resolve().parents[1] / "docs" / "results" / "data"
NAMED = re.compile(r"`([\w.<>*-]+\.(?:jsonl\.gz|jsonl|json|txt))`")


def test_every_file_the_data_readme_names_is_committed() -> None:
    names = set(NAMED.findall((DATA / "README.md").read_text(encoding="utf-8")))
    assert "kernelbench_h200_evaluations.jsonl.gz" in names
    for name in names:
        matches = list(DATA.rglob(name.replace("<N>", "*")))
        assert matches, f"docs/results/data/README.md names {name}, which is not there"


@pytest.mark.parametrize(
    "name", ["kernelbench_h200_evaluations.jsonl.gz", "llm_evaluations.jsonl.gz"]
)
def test_each_verdict_names_the_gpu_that_judged_it(name: str) -> None:
    with gzip.open(DATA / name, "rt", encoding="utf-8") as lines:
        verdicts = [row for row in map(json.loads, lines) if "evaluation" in row]
    assert verdicts
    unnamed = [row["candidate_hash"] for row in verdicts if not row.get("device")]
    assert not unnamed, f"{len(unnamed)} verdicts in {name} name no device"
