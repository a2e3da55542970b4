"""The built-in example problems load, run on CPU at the small size, and scale with the knob."""

from pathlib import Path

import pytest
import torch

from autoprofiler.problem import ProblemError, load_problems

EXAMPLES = Path(__file__).resolve().parents[1] / "examples" / "problems"
SIZE_VAR = "AUTOPROFILER_EXAMPLE_SIZE"
PROBLEMS = load_problems(EXAMPLES).problems


def _constants(module) -> dict:
    return {k: v for k, v in vars(module).items() if k.isupper() and isinstance(v, (int, tuple))}


def test_folder_loads_cleanly():
    report = load_problems(EXAMPLES)
    assert report.errors == []
    assert len(report.problems) >= 12
    assert len({p.content_hash for p in report.problems}) == len(report.problems)


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_small_forward_is_finite(problem, monkeypatch):
    monkeypatch.setenv(SIZE_VAR, "small")
    module = problem.load_module()
    torch.manual_seed(0)
    model = module.Model(*module.get_init_inputs())
    with torch.no_grad():
        out = model(*module.get_inputs())
    assert isinstance(out, torch.Tensor)
    assert out.numel() > 0
    assert torch.isfinite(out).all()


def test_large_constants_differ_for_gemm(monkeypatch):
    (gemm,) = [p for p in PROBLEMS if p.name == "01_square_gemm"]
    monkeypatch.setenv(SIZE_VAR, "small")
    small = gemm.load_module()
    monkeypatch.setenv(SIZE_VAR, "large")
    large = gemm.load_module()
    assert small.N == 256
    assert large.N > small.N


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: p.name)
def test_size_knob(problem, monkeypatch):
    monkeypatch.delenv(SIZE_VAR, raising=False)
    default = _constants(problem.load_module())
    monkeypatch.setenv(SIZE_VAR, "large")
    assert _constants(problem.load_module()) != default  # imports only, no large forward
    monkeypatch.setenv(SIZE_VAR, "huge")
    with pytest.raises(ProblemError, match=r"ValueError.*small.*large"):
        problem.load_module()
