"""The red team: every known cheat in ``candidates/`` through the real ``evaluate()``.

Each is rejected with the failure kind its docstring names, or passes only with the named
findings that flag it and no more speedup than its docstring allows. The CPU cases are
evaluated once per module, two workers at a time.
"""

from __future__ import annotations

import warnings
from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autoprofiler.evaluate import evaluate

from .cases import (
    CONFIG,
    HONEST_REWRITES,
    Case,
    RedTeamRun,
    evaluate_cases,
    load_cases,
    redteam_problem,
)

CASES = load_cases()
# An honest rewrite's speedup outside this range is warned about: the run's timings are off.
HONEST_SPEEDUP = (0.25, 4.0)
CPU_CASES = [case for case in CASES if case.device == "cpu"]
GPU_CASES = [case for case in CASES if case.device == "cuda"]


def _param(case: Case):
    marks = [pytest.mark.xfail(strict=True, reason=f"known gap: {case.gap}")] if case.gap else []
    return pytest.param(case, id=case.name, marks=marks)


@pytest.fixture(scope="module")
def verdicts(tmp_path_factory: pytest.TempPathFactory) -> RedTeamRun:
    run = evaluate_cases(CPU_CASES, tmp_path_factory.mktemp("redteam"))
    for problem, result in run.honest.items():
        if (
            result.speedup is not None
            and not HONEST_SPEEDUP[0] <= result.speedup <= HONEST_SPEEDUP[1]
        ):
            warnings.warn(
                f"the honest rewrite of {problem} ran at {result.speedup:.3g}x"
                f" (reference {result.reference}, candidate {result.candidate})",
                stacklevel=1,
            )
    return run


def test_the_suite_covers_at_least_fifteen_cheats() -> None:
    assert len(CPU_CASES) >= 15 and GPU_CASES


def test_the_committed_gpu_run_caught_every_case_it_ran() -> None:
    """docs/results/redteam_h100.md (v9 on an H100): a row per case of its time, each caught."""
    page = Path(__file__).parents[2] / "docs" / "results" / "redteam_h100.md"
    rows = [line for line in page.read_text().splitlines() if line.startswith("| ")][1:]
    names = {row.split(" | ")[0].removeprefix("| ").split(" (")[0] for row in rows}
    assert len(rows) == 41 and all(row.endswith("| yes |") for row in rows)
    assert {case.name for case in GPU_CASES} <= names


@pytest.mark.parametrize("case", [_param(case) for case in CPU_CASES])
def test_cheat_is_rejected_or_flagged(case: Case, verdicts: RedTeamRun) -> None:
    result, honest = verdicts.results[case.name], verdicts.honest[case.problem]
    timings = {"reference": result.reference, "candidate": result.candidate,
               "honest rewrite": honest.candidate}  # fmt: skip
    assert not verdicts.problems_with(case), (
        verdicts.problems_with(case),
        result.findings,
        timings,
    )


@pytest.mark.parametrize("problem", sorted(HONEST_REWRITES))
def test_an_honest_rewrite_passes_every_check(problem: str, verdicts: RedTeamRun) -> None:
    result = verdicts.honest[problem]
    assert result.correct, result.failure_message
    assert result.findings == []


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="GPU-only trick: needs a CUDA GPU")
@pytest.mark.parametrize("case", [_param(case) for case in GPU_CASES])
def test_gpu_cheat_is_rejected_or_flagged(case: Case, tmp_path: Path) -> None:
    config = replace(CONFIG, device="cuda")
    result = evaluate(redteam_problem(case.problem), case.source, config, work_root=tmp_path)
    assert not case.problems_with(result), (case.problems_with(result), result.findings)


@pytest.mark.gpu
@pytest.mark.skipif(not torch.cuda.is_available(), reason="the GPU's timer check: needs a CUDA GPU")
def test_a_timer_shrunk_inside_true_host_times_is_flagged_on_a_gpu(tmp_path: Path) -> None:
    (case,) = [case for case in CASES if case.name == "shrink_timer_only"]
    config = replace(CONFIG, device="cuda")
    result = evaluate(redteam_problem(case.problem), case.source, config, work_root=tmp_path)
    found = {finding.name: finding.severity for finding in result.findings}
    assert found.get("timing_contradicted") == "flag", (result.failure_message, result.findings)
