"""Faults: candidates that crash, hang, exhaust memory or misbehave end as failed results.

Each fault in ``candidates/`` names its verdict in its docstring (the red team's format,
``tests/adversarial/cases.py``). After each, an honest candidate is evaluated in the same test
process and must pass: one fault never harms the next evaluation.
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest
import torch

from autoprofiler.evaluate import EvalConfig, EvalResult, FailureKind, evaluate
from tests.adversarial.cases import CONFIG, HONEST, Case, load_cases, redteam_problem

FAULTS = {case.name: case for case in load_cases(Path(__file__).parent / "candidates")}
# What each fault needs besides the red team's settings, and words its message must hold.
SETTINGS: dict[str, tuple[dict, str]] = {
    "segfault": ({}, "SIGSEGV"),
    "import_hang": ({"compile_timeout_s": 3}, "compile phase"),
    "build_error": ({"compile_timeout_s": 240}, "Error building extension"),
    "host_oom": ({"memory_limit_gb": 2}, "allocate"),
    "huge_output": ({}, "shape (1048576, 1048576)"),
    "write_outside": ({}, ""),
    "network_probe": ({}, ""),
    "os_exit": ({}, "code 3"),
    "sys_exit": ({}, "SystemExit: 4"),
    "fake_done": ({"run_timeout_s": 3}, "did not exit"),
    "gpu_illegal_access": ({"device": "cuda"}, ""),
    "gpu_kernel_hang": ({"device": "cuda", "compile_timeout_s": 20}, "compile phase"),
    "gpu_oom": ({"device": "cuda"}, ""),
}
SLOW = {"build_error"}


def judge(name: str, work_root: Path, **overrides) -> EvalResult:
    """Evaluate fault ``name``; then check that an honest candidate still passes."""
    case: Case = FAULTS[name]
    settings, words = SETTINGS[name]
    config = replace(CONFIG, **{**settings, **overrides})
    problem = redteam_problem()
    result = evaluate(problem, case.source, config, work_root=work_root)
    assert not case.problems_with(result), (case.problems_with(result), result.findings)
    assert words in result.failure_message
    after = evaluate(problem, HONEST, replace(config, memory_limit_gb=None), work_root=work_root)
    assert after.correct, after.failure_message
    return result


def _param(name: str):
    marks = []
    if name in SLOW:
        marks.append(pytest.mark.slow)
    if FAULTS[name].device == "cuda":
        marks.append(pytest.mark.gpu)
        reason = "GPU fault: needs a CUDA GPU"
        marks.append(pytest.mark.skipif(not torch.cuda.is_available(), reason=reason))
    return pytest.param(name, id=name, marks=marks)


def test_every_fault_has_settings() -> None:
    assert set(FAULTS) == set(SETTINGS)


@pytest.mark.parametrize(
    "name", [_param(n) for n in SETTINGS if n not in {"write_outside", "network_probe"}]
)
def test_fault_is_a_failed_result_and_the_next_candidate_passes(name: str, tmp_path: Path) -> None:
    result = judge(name, tmp_path)
    assert not result.correct


def test_a_write_outside_the_work_folder_is_flagged(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    target = tmp_path / "escaped.txt"
    monkeypatch.setenv("REDTEAM_ESCAPE_PATH", str(target))
    result = judge("write_outside", tmp_path / "home")
    flagged = next(f for f in result.findings if f.name == "writes_outside_workdir")
    assert str(target) in flagged.detail and target.exists()


TEMPORARY_FILES = HONEST.replace(
    "class ModelNew",
    """import os as _os
import tempfile as _tempfile

# As Triton does when it builds a kernel's launcher: a temporary folder, then a file in it.
_folder = _tempfile.mkdtemp()
with open(_os.path.join(_folder, "launcher.c"), "w") as _handle:
    _handle.write("int main(void) { return 0; }")


class ModelNew""",
    1,
)


def test_temporary_files_are_the_candidates_own(tmp_path: Path) -> None:
    """TMPDIR is inside the work folder, in a forked candidate too: Triton's temporary build
    files are not writes outside it (on the H200 every Triton reply was flagged for them)."""
    assert "class ModelNew" in TEMPORARY_FILES and TEMPORARY_FILES != HONEST
    result = evaluate(redteam_problem(), TEMPORARY_FILES, CONFIG, work_root=tmp_path)
    assert result.correct, result.failure_message
    assert "writes_outside_workdir" not in {f.name for f in result.findings}


def test_the_memory_cap_is_left_out_of_the_configuration_hash() -> None:
    assert EvalConfig(memory_limit_gb=2).config_hash == EvalConfig().config_hash
    assert EvalConfig(sandbox="bwrap").config_hash == EvalConfig().config_hash
    # how outputs cross is not a verdict setting: the H200 recordings' hash still holds
    assert EvalConfig(device="cuda", output_slab=False).config_hash == "b9efd7057455e5ea"


@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads VmSize from /proc")
def test_the_memory_cap_counts_from_what_the_worker_maps_before_the_candidate(
    tmp_path: Path,
) -> None:
    """A cap smaller than what torch maps already (several GiB for a CUDA build; a GPU machine
    failed every candidate under a 2 GiB cap counted from zero) still judges an honest
    candidate, and still stops one that asks for 4 GiB."""
    with open("/proc/self/status", encoding="ascii") as status:
        mapped = next(int(line.split()[1]) for line in status if line.startswith("VmSize:"))
    cap_gb = 0.25
    assert mapped * 1024 > cap_gb * 2**30  # torch imported here maps more than the cap
    config = replace(CONFIG, memory_limit_gb=cap_gb)
    honest = evaluate(redteam_problem(), HONEST, config, work_root=tmp_path)
    assert honest.correct, honest.failure_message
    greedy = evaluate(redteam_problem(), FAULTS["host_oom"].source, config, work_root=tmp_path)
    assert greedy.failure_kind == FailureKind.OUT_OF_MEMORY, greedy.failure_message
