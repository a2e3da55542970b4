"""The rule rewriter: what applies where, what the rules pick with and without a profile.

These tests trace problems on the meta device only (sizes can be realistic); the generated
candidates are judged by the real evaluator in ``test_rules_codegen.py``.
"""

from __future__ import annotations

import types

import pytest
import torch

from autoprofiler.problem import Problem
from autoprofiler.profile.base import KernelSummary, MetricValue, Profile
from autoprofiler.rewrite import profile_hash
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.rules import CATALOGUE, ORDER, RuleRewriter
from autoprofiler.rewrite.rules.graph import analyze
from autoprofiler.rewrite.rules.patterns import ELEMENTWISE_OPS
from autoprofiler.rewrite.rules.signals import read_signals
from autoprofiler.rewrite.rules.triton_codegen import EXPRESSIONS
from tests.rewrite.rule_problems import (
    BIG,
    CHAIN,
    CONV,
    CONV_VIEW,
    GEMM,
    LAYERNORM,
    LINEAR_GELU,
    MANY_TINY,
    ROW_SUM,
    SOFTMAX,
    TINY,
    UNTRACEABLE,
    make,
)

CPU = RewriteContext(device="cpu")
CUDA = RewriteContext(device="cuda", device_name="NVIDIA H200")
CUDA_LOOSE = RewriteContext(device="cuda", atol=1e-2, rtol=1e-2)

# SpeedOfLight values recorded by ncu on an H200 (tests/data/ncu): the fp32 GEMM of
# L1/1_Square_matrix_multiplication_ and the softmax of L1/23_Softmax.
SM = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
GEMM_SOL = {SM: 86.81, MEMORY: 59.41}
SOFTMAX_SOL = {SM: 28.47, MEMORY: 86.50}


def profile(metrics: dict[str, float], **fields) -> Profile:
    return Profile(
        problem_hash="test",
        device="H200",
        metrics={name: MetricValue(value) for name, value in metrics.items()},
        **fields,
    )


def choose(problem: Problem, profile_: Profile | None, context: RewriteContext) -> str:
    return RuleRewriter().rewrite(problem, profile_, context).info["transformation"]


def test_catalogue_is_ordered_and_every_op_has_a_triton_expression():
    assert len(set(ORDER)) == len(ORDER) == len(CATALOGUE)
    assert ORDER[-1] == "compile"
    assert set(ELEMENTWISE_OPS) <= set(EXPRESSIONS)


def test_patterns_found_in_the_traced_graph():
    rewriter = RuleRewriter()
    chain = rewriter.analysis(make("chain", CHAIN, **BIG))
    assert [[s.op for s in g.steps] for g in chain.groups] == [
        ["mul", "sub", "leaky_relu", "sigmoid", "tanh", "clamp", "div", "add"]
    ]
    assert chain.rows == []
    epilogue = rewriter.analysis(make("linear", LINEAR_GELU, **BIG))
    (group,) = epilogue.groups
    assert group.producer == "Linear"
    assert [s.op for s in group.steps] == ["gelu", "mul", "add", "gelu_tanh"]
    conv = rewriter.analysis(make("conv", CONV, B=8, D=32, C=16))
    assert conv.groups[0].producer == "Conv2d" and len(conv.groups[0].inputs) == 3
    rows = rewriter.analysis(make("rows", ROW_SUM, **BIG)).rows
    assert [(s.kind, s.dim) for s in rows] == [("sum", 1), ("mean", 1), ("max", 1)]
    (norm,) = rewriter.analysis(make("ln", LAYERNORM, **BIG)).rows
    assert (norm.kind, norm.weight, norm.bias) == (
        "layer_norm",
        "attr:norm.weight",
        "attr:norm.bias",
    )


def test_op_mix_is_traced_on_meta_with_flops():
    graph = analyze(make("gemm", GEMM, D=4096))
    assert [op.category for op in graph.ops] == ["matmul"]
    assert graph.flops == 2 * 4096**3
    assert graph.heavy_fp32 and not graph.all_tiny


@pytest.mark.parametrize(
    ("body", "sizes", "context", "applies", "refused"),
    [
        (CHAIN, BIG, CPU, {"triton_elementwise", "compile"}, {"tf32", "cuda_graph", "triton_row"}),
        (SOFTMAX, BIG, CUDA, {"triton_row", "cuda_graph", "compile"}, {"triton_elementwise"}),
        (GEMM, {"D": 4096}, CUDA, {"compile_max_autotune"}, {"tf32", "bf16_autocast"}),
        (GEMM, {"D": 4096}, CUDA_LOOSE, {"tf32", "compile_tf32", "bf16_autocast"}, set()),
        (CONV, {"B": 8, "D": 64, "C": 16}, CUDA, {"channels_last", "triton_elementwise"}, set()),
        (CONV_VIEW, {"B": 8, "D": 16}, CUDA, set(), {"channels_last", "triton_elementwise"}),
        (UNTRACEABLE, TINY, CPU, {"compile"}, {"triton_elementwise", "triton_row"}),
    ],
)
def test_applicability(body, sizes, context, applies, refused):
    rewriter = RuleRewriter()
    problem = make("p", body, **sizes)
    applicable = rewriter.applicable(problem, context)
    assert applies <= set(applicable) and not refused & set(applicable)
    assert applicable == [n for n in ORDER if n in applicable]
    blockers = rewriter.blockers(problem, context)
    assert all(blockers[name] for name in refused)


def test_refusals_say_why():
    rewriter = RuleRewriter()
    blockers = rewriter.blockers(make("gemm", GEMM, D=4096), CUDA)
    assert "tolerance 0.0001" in blockers["tf32"]
    assert "CUDA" in rewriter.blockers(make("gemm", GEMM, D=4096), CPU)["cuda_graph"]
    view = rewriter.blockers(make("view", CONV_VIEW, B=8, D=16), CUDA)["channels_last"]
    assert ".view" in view
    untraceable = rewriter.blockers(make("u", UNTRACEABLE, **TINY), CPU)["triton_elementwise"]
    assert "FX cannot trace" in untraceable


@pytest.mark.parametrize(
    ("body", "sizes", "context", "expected"),
    [
        (CHAIN, BIG, CUDA, "triton_elementwise"),
        (SOFTMAX, BIG, CUDA, "triton_row"),
        (LAYERNORM, BIG, CUDA, "triton_row"),
        (ROW_SUM, BIG, CUDA, "triton_all"),  # row reductions, then adds
        (GEMM, {"D": 4096}, CUDA, "compile"),
        (GEMM, {"D": 4096}, CUDA_LOOSE, "tf32"),
        (LINEAR_GELU, BIG, CUDA_LOOSE, "compile_tf32"),
        (CONV, {"B": 64, "D": 128, "C": 64}, CUDA, "triton_elementwise"),
        (MANY_TINY, TINY, CUDA, "cuda_graph"),
        (MANY_TINY, TINY, CPU, "compile"),
        (UNTRACEABLE, TINY, CUDA, "compile"),
    ],
)
def test_prior_without_a_profile(body, sizes, context, expected):
    assert choose(make("p", body, **sizes), None, context) == expected


def test_tf32_refused_at_1e4_and_chosen_at_1e2_for_a_compute_bound_gemm():
    gemm = make("gemm", GEMM, D=4096)
    strict = RuleRewriter().rewrite(gemm, profile(GEMM_SOL), CUDA)
    assert strict.info["transformation"] == "compile_max_autotune"
    assert "TF32 refused at tolerance 0.0001" in strict.info["reason"]
    assert "tolerance" in strict.info["not_applicable"]["tf32"]
    loose = RuleRewriter().rewrite(gemm, profile(GEMM_SOL), CUDA_LOOSE)
    assert loose.info["transformation"] == "tf32"
    assert loose.info["reason"].startswith("compute-bound fp32 GEMM/conv (SM 87%")
    assert loose.info["scores"]["tf32"] > loose.info["scores"]["compile"]


def test_profile_guides_the_choice():
    softmax = make("softmax", SOFTMAX, **BIG)
    memory_bound = RuleRewriter().rewrite(softmax, profile(SOFTMAX_SOL), CUDA)
    assert memory_bound.info["transformation"] == "triton_row"
    assert memory_bound.info["scores"]["triton_row"] == 0.9
    chain = make("chain", CHAIN, **BIG)
    idle = profile({"torch.gpu_idle_frac": 0.7})
    assert choose(chain, idle, CUDA) == "cuda_graph"
    assert choose(chain, idle, CPU) == "triton_elementwise"
    tiny_kernels = profile(
        {"torch.kernel_count": 24.0}, kernels=[KernelSummary("k", duration_ns=48000.0, count=24)]
    )
    assert choose(chain, tiny_kernels, CUDA) == "cuda_graph"


def test_static_features_alone_steer_the_choice():
    softmax = make("softmax", SOFTMAX, **BIG)
    static = profile({"static.arithmetic_intensity": 0.6, "static.bound": 0.0})
    candidate = RuleRewriter().rewrite(softmax, static, CUDA)
    assert candidate.info["transformation"] == "triton_row"
    assert "(static)" in candidate.info["reason"]


def test_missing_or_unknown_metrics_fall_back_to_the_prior():
    chain = make("chain", CHAIN, **BIG)
    odd = profile({"some.metric": 3.0, SM: float("nan")})
    rewriter = RuleRewriter()
    assert rewriter.rewrite(chain, odd, CUDA).info == rewriter.rewrite(chain, None, CUDA).info
    signals = read_signals(odd, rewriter.analysis(chain).graph)
    assert not signals.measured and not signals.memory_bound


def test_candidate_fields_and_profile_hash():
    problem = make("softmax", SOFTMAX, **BIG)
    measured = profile(SOFTMAX_SOL)
    candidate = RuleRewriter().rewrite(problem, measured, CUDA)
    assert candidate.producer == "rules" and candidate.usable
    assert candidate.profile_hash == profile_hash(measured) != ""
    assert set(candidate.info) >= {"transformation", "reason", "scores"}
    assert list(candidate.info["scores"]) == [n for n in ORDER if n in candidate.info["scores"]]
    assert "class ModelNew" in candidate.source and problem.source in candidate.source
    assert RuleRewriter().rewrite(problem, None, CUDA).profile_hash == ""


def test_same_input_gives_the_same_source():
    problem = make("conv", CONV, B=8, D=32, C=16)
    first, second = RuleRewriter(), RuleRewriter()
    for name in first.applicable(problem, CUDA_LOOSE):
        a = first.generate(problem, name, CUDA_LOOSE)
        b = second.generate(problem, name, CUDA_LOOSE)
        assert a.usable and a.content_hash == b.content_hash, name
    assert (
        first.rewrite(problem, profile(GEMM_SOL), CUDA).content_hash
        == second.rewrite(problem, profile(GEMM_SOL), CUDA).content_hash
    )


def test_generate_refuses_what_does_not_apply():
    rewriter = RuleRewriter()
    candidate = rewriter.generate(make("chain", CHAIN, **BIG), "triton_row", CPU)
    assert not candidate.usable and "does not apply" in candidate.failure
    with pytest.raises(KeyError, match="unknown transformation"):
        rewriter.generate(make("chain", CHAIN, **BIG), "nope", CPU)


def test_untraceable_problem_gets_compile_with_a_reason():
    candidate = RuleRewriter().rewrite(make("u", UNTRACEABLE, **TINY), None, CPU)
    assert candidate.info["transformation"] == "compile"
    assert candidate.info["reason"]
    assert "FX cannot trace" in candidate.info["not_applicable"]["triton_elementwise"]


def _load(source: str) -> types.ModuleType:
    module = types.ModuleType("candidate_under_test")
    exec(compile(source, "<candidate>", "exec"), module.__dict__)
    return module


def test_backend_flags_are_set_for_the_forward_only():
    body = """
    class Model(nn.Module):
        def forward(self, x):
            self.seen = (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark)
            return torch.relu(nn.functional.conv2d(x, torch.ones(2, 3, 1, 1)))

    def get_inputs():
        return [torch.randn({B}, 3, {D}, {D})]

    def get_init_inputs():
        return []
    """
    problem = make("flags", body, B=2, D=4)
    before = (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark)
    for name, inside in (("tf32", ("high", before[1])), ("channels_last", (before[0], True))):
        module = _load(RuleRewriter().generate(problem, name, CUDA_LOOSE).source)
        model = module.ModelNew()
        with torch.no_grad():
            model(torch.randn(2, 3, 4, 4))
        assert model.reference.seen == inside, name
        assert (torch.get_float32_matmul_precision(), torch.backends.cudnn.benchmark) == before


def test_cuda_graph_candidate_runs_the_reference_off_cuda():
    problem = make("chain", CHAIN, B=4, D=8)
    module = _load(RuleRewriter().generate(problem, "cuda_graph", CUDA).source)
    torch.manual_seed(0)
    model = module.ModelNew()
    x = torch.randn(4, 8)
    assert torch.equal(model(x), model.reference(x))


IDLE_TENSOR = "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active"
PROFILE_FAMILY = [
    None,
    profile(GEMM_SOL),
    profile(SOFTMAX_SOL),
    profile({SM: 20.0, MEMORY: 20.0}),
    profile(GEMM_SOL | {IDLE_TENSOR: 0.0}),
    profile(GEMM_SOL | {IDLE_TENSOR: 40.0}),
    profile({"torch.gpu_idle_frac": 0.7}),
    profile({"torch.gpu_idle_frac": 0.05}),
    profile(SOFTMAX_SOL | {"torch.gpu_idle_frac": 0.7}),
    profile({"static.arithmetic_intensity": 0.6, "static.bound": 0.0}),
    profile({"static.arithmetic_intensity": 90.0, "static.bound": 1.0}),
]


@pytest.mark.parametrize("context", [CPU, CUDA, CUDA_LOOSE], ids=["cpu", "cuda", "cuda-1e-2"])
@pytest.mark.parametrize(
    "body, sizes",
    [
        (GEMM, BIG),
        (SOFTMAX, BIG),
        (CHAIN, BIG),
        (CONV, {"B": 64, "D": 128, "C": 64}),
        (LINEAR_GELU, BIG),
        (MANY_TINY, TINY),
    ],
    ids=["gemm", "softmax", "chain", "conv", "linear-gelu", "many-tiny"],
)
def test_reachable_covers_every_choice_with_the_same_source(body, sizes, context):
    """What replay rests on: whatever profile comes, the pick is reachable, and its source is
    exactly what ``generate`` (which sees no profile) emits for it."""
    problem = make("p", body, **sizes)
    rewriter = RuleRewriter()
    reachable = rewriter.reachable(problem, context)
    assert reachable == [n for n in ORDER if n in reachable]
    picked = set()
    for measured in PROFILE_FAMILY:
        candidate = rewriter.rewrite(problem, measured, context)
        name = candidate.info["transformation"]
        picked.add(name)
        assert name in reachable
        assert rewriter.generate(problem, name, context).source == candidate.source
    assert picked <= set(reachable)


def test_reachable_is_not_everything_that_applies():
    softmax = make("softmax", SOFTMAX, **BIG)
    rewriter = RuleRewriter()
    # compile always applies, but a softmax always has a better-scored Triton row kernel
    assert "compile" in rewriter.applicable(softmax, CUDA)
    assert "compile" not in rewriter.reachable(softmax, CUDA)
    assert "triton_row" in rewriter.reachable(softmax, CUDA)


def test_excluded_transformations_are_never_picked():
    gemm = make("gemm", GEMM, **BIG)
    full = RuleRewriter()
    assert "compile_max_autotune" in full.reachable(gemm, CUDA)
    without = RuleRewriter(exclude=["compile_max_autotune"])
    assert without.name == "rules-without-compile_max_autotune" != full.name
    assert "compile_max_autotune" not in without.reachable(gemm, CUDA)
    assert "excluded" in without.blockers(gemm, CUDA)["compile_max_autotune"]
    for measured in PROFILE_FAMILY:
        picked = without.rewrite(gemm, measured, CUDA).info["transformation"]
        assert picked != "compile_max_autotune"
    with pytest.raises(KeyError, match="unknown transformation"):
        RuleRewriter(exclude=["no_such_rule"])


def test_from_name_reads_the_name_a_rule_rewriter_gives_itself() -> None:
    assert RuleRewriter.from_name("rules").exclude == frozenset()
    left_out = RuleRewriter.from_name("rules-without-cuda_graph-compile_max_autotune")
    assert left_out.exclude == {"cuda_graph", "compile_max_autotune"}
    assert RuleRewriter.from_name(left_out.name).name == left_out.name
    with pytest.raises(ValueError, match="not rules or rules-without-NAME"):
        RuleRewriter.from_name("rulez")
    with pytest.raises(KeyError, match="unknown transformation 'warp'"):
        RuleRewriter.from_name("rules-without-warp")
