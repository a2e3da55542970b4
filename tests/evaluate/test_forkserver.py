"""Warm candidate processes: one zygote serves candidate after candidate, each in a fresh child."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.problem import load_file, source_hash
from tests.adversarial.cases import HONEST

PROBLEM = Path(__file__).parents[1] / "adversarial" / "redteam_problem.py"
WRITES_ITS_PIDS = "import os\nopen('pids', 'w').write(f'{os.getpid()} {os.getppid()}')\n"
CONFIG = EvalConfig(device="cpu", timing_budget_ms=5, warmup_ms=1, min_timing_trials=3)


def _pids(tmp_path: Path, index: int) -> tuple[int, int]:
    source = WRITES_ITS_PIDS + HONEST + f"\n# candidate {index}\n"
    result = evaluate(load_file(PROBLEM), source, CONFIG, work_root=tmp_path)
    assert result.correct, result.failure_message
    pid, parent = (tmp_path / "candidates" / source_hash(source) / "pids").read_text().split()
    return int(pid), int(parent)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_one_zygote_forks_a_fresh_child_per_candidate(tmp_path: Path) -> None:
    first, second = _pids(tmp_path, 1), _pids(tmp_path, 2)
    assert first[0] != second[0], "two candidates ran in one process"
    assert first[1] == second[1], "each candidate had a zygote of its own: nothing was warm"


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the fork server is Linux only")
def test_without_the_fork_server_each_candidate_has_a_supervisor_of_its_own(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AUTOPROFILER_FORKSERVER", "0")
    first, second = _pids(tmp_path, 3), _pids(tmp_path, 4)
    assert first[0] != second[0] and first[1] != second[1]
