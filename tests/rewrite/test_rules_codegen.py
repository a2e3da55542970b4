"""Generated candidates judged by the real evaluator on the CPU (Triton via its interpreter).

Every Triton kernel the rule rewriter emits (fused elementwise with each operand mode, softmax
rows and columns, layer norm, row and column reductions; single-pass and looped) must match
eager float32 at the default tolerance, atol = rtol = 1e-4.
"""

from __future__ import annotations

import pytest

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.rules import RuleRewriter
from tests.rewrite.rule_problems import (
    CHAIN,
    CONV,
    EVERY_OP,
    LAYERNORM,
    LINEAR_GELU,
    ROWS,
    SOFTMAX,
    make,
)

FAST = EvalConfig(
    device="cpu",
    correctness_trials=2,
    timing_budget_ms=5,
    warmup_ms=1,
    min_timing_trials=2,
    max_timing_trials=3,
    compile_timeout_s=120,
    run_timeout_s=60,
)
LOOSE = EvalConfig(**{**FAST.to_dict(), "atol": 1e-2, "rtol": 1e-2})
CPU = RewriteContext(device="cpu")
CUDA_LOOSE = RewriteContext(device="cuda", atol=1e-2, rtol=1e-2)


@pytest.fixture(autouse=True)
def _triton_on_the_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TRITON_INTERPRET", "1")  # the evaluator's worker inherits it


def judge(problem, name: str, context=CPU, config=FAST, rewriter=None):
    candidate = (rewriter or RuleRewriter()).generate(problem, name, context)
    assert candidate.usable, candidate.failure
    result = evaluate(problem, candidate.source, config)
    assert result.correct, f"{name}: {result.failure_kind}: {result.failure_message}"
    return result


@pytest.mark.parametrize(
    ("body", "sizes"),
    [
        (CHAIN, {"B": 16, "D": 40}),
        (EVERY_OP, {"B": 6, "D": 24}),
        (LINEAR_GELU, {"B": 8, "D": 32}),
        (CONV, {"B": 2, "D": 8, "C": 4}),  # channel bias, scalar parameter, conv epilogue
    ],
)
def test_fused_elementwise_kernels_are_correct(body, sizes):
    result = judge(make("p", body, **sizes), "triton_elementwise")
    assert result.max_abs_diff < 1e-4


def test_row_kernels_are_correct_looped_and_strided():
    # rows longer than 16 loop; softmax and reductions over dims 0 and 1 take the 2-D kernels;
    # the single-pass row kernels are judged in test_softmax_and_layernorm_rows
    rewriter = RuleRewriter(max_single_pass=16)
    problem = make("rows", ROWS, B=2, C=18, D=20)
    applicable = rewriter.applicable(problem, CPU)
    assert applicable[:3] == ["triton_all", "triton_row", "triton_elementwise"]
    judge(problem, "triton_all", rewriter=rewriter)


@pytest.mark.parametrize(("body", "width"), [(SOFTMAX, 100), (LAYERNORM, 100)])
def test_softmax_and_layernorm_rows(body, width):
    judge(make("p", body, B=8, D=width), "triton_row")


def test_wrappers_keep_the_weights():
    conv = make("conv", CONV, B=2, D=8, C=4)
    assert judge(conv, "channels_last", context=CUDA_LOOSE).max_abs_diff == 0.0
    judge(conv, "bf16_autocast", context=CUDA_LOOSE, config=LOOSE)


def test_compile_fallback_runs():
    judge(make("chain", CHAIN, B=4, D=8), "compile")
