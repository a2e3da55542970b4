"""The catalogue of transformations: where each applies, how a profile scores it, its source.

Each transformation has three parts:

- ``blocker(facts)``: "" when it applies to the problem under the context, else why not;
- ``score(facts)``: a value in [0, 1] with a one-line reason, read from the profile's signals,
  or from the prior (the op mix and the tolerance) where the profile says nothing;
- ``generate(facts)``: the candidate source.

Scores rank transformations for one problem; ``ORDER`` breaks ties. The prior follows the H200
notes: with a tolerance that allows it, TF32 is the best simple rewrite for fp32 GEMM/conv;
``torch.compile`` is the safe default (geomean 1.16 over eager); elementwise chains and row
ops get generated Triton kernels; many tiny ops get a CUDA graph.
"""

from __future__ import annotations

import functools
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import ClassVar

from autoprofiler.problem import Problem
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.rules import triton_codegen, wrappers
from autoprofiler.rewrite.rules.fx_codegen import CodegenError, Replacement, emit_forward
from autoprofiler.rewrite.rules.graph import HEAVY_CATEGORIES, ProblemGraph, analyze
from autoprofiler.rewrite.rules.patterns import (
    ElementwiseGroup,
    RowSite,
    channels_last_hazards,
    find_elementwise_groups,
    find_row_sites,
)
from autoprofiler.rewrite.rules.signals import Signals

# TF32 rounds GEMM/conv inputs to 10 mantissa bits: errors near 1e-3 (H200 notes: it fails
# atol = rtol = 1e-4 on most problems and passes 1e-2); bf16 keeps 7 bits.
TF32_MIN_TOLERANCE = 5e-3
BF16_MIN_TOLERANCE = 1e-2
PRIOR_COMPILE = 0.5
PRIOR_TF32 = 0.8
FUSABLE_CATEGORIES = ("elementwise", "norm", "reduction")


@dataclass(frozen=True)
class Score:
    """How much a transformation is expected to help, in [0, 1], and why in one line."""

    value: float
    reason: str


@dataclass
class Analysis:
    """What the rules know about one problem from its source alone; computed once."""

    problem: Problem
    graph: ProblemGraph
    groups: list[ElementwiseGroup] = field(default_factory=list)
    rows: list[RowSite] = field(default_factory=list)
    fx_blocker: str = ""

    @classmethod
    def of(cls, problem: Problem) -> Analysis:
        graph = analyze(problem)
        analysis = cls(problem, graph)
        if graph.fx is None:
            analysis.fx_blocker = f"FX cannot trace the model ({graph.errors.get('fx', '?')})"
            return analysis
        try:
            emit_forward(graph.fx, (), graph.module_name)
        except CodegenError as exc:
            analysis.fx_blocker = f"the traced forward cannot be re-emitted: {exc}"
            return analysis
        analysis.groups = find_elementwise_groups(graph.fx)
        analysis.rows = find_row_sites(graph.fx)
        return analysis

    @functools.cached_property
    def channels_last_blocker(self) -> str:
        """Why channels-last tensors would break the forward ("" when they would not)."""
        if self.graph.fx is None:
            return "cannot check the forward for .view calls (FX cannot trace it)"
        hazards = channels_last_hazards(self.graph.fx)
        if hazards:
            return f"the forward calls .view on 4-D/5-D tensors ({', '.join(hazards)})"
        return ""


@dataclass(frozen=True)
class Facts:
    """Everything a rule reads: the analysis, the profile's signals and the context."""

    analysis: Analysis
    signals: Signals
    context: RewriteContext
    max_single_pass: int = triton_codegen.DEFAULT_MAX_SINGLE_PASS

    @property
    def graph(self) -> ProblemGraph:
        return self.analysis.graph

    @property
    def tolerance(self) -> float:
        return min(self.context.atol, self.context.rtol)

    @property
    def on_cuda(self) -> bool:
        return self.context.device.startswith("cuda")

    @property
    def heavy(self) -> int:
        return self.graph.count(*HEAVY_CATEGORIES)

    @property
    def fusable(self) -> int:
        return self.graph.count(*FUSABLE_CATEGORIES)

    def why(self, flag: str) -> str:
        return self.signals.why(flag)

    def measured(self, flag: str) -> bool:
        """Whether the profile (not the prior) says ``flag``, e.g. ``"memory_bound"``."""
        return self.signals.measured_true(flag)


class Transformation(ABC):
    """One rewrite: where it applies, how the profile scores it, and the source it emits."""

    name: ClassVar[str]
    summary: ClassVar[str]

    def blocker(self, facts: Facts) -> str:
        """Why the transformation does not apply, or "" when it does."""
        return ""

    @abstractmethod
    def score(self, facts: Facts) -> Score:
        """The expected benefit on this problem under this profile."""

    @abstractmethod
    def generate(self, facts: Facts) -> str:
        """The candidate source (a ``ModelNew``)."""


class _Wrapper(Transformation):
    """A transformation that wraps the whole reference module (see ``wrappers.WrapperSpec``)."""

    spec: ClassVar[wrappers.WrapperSpec]

    def generate(self, facts: Facts) -> str:
        return wrappers.wrapper_candidate(facts.analysis.problem, self.name, self.spec)


def _tf32_blocker(facts: Facts, minimum: float, what: str) -> str:
    if not facts.graph.heavy_fp32:
        return "no float32 GEMM, convolution or attention to run at lower precision"
    if facts.tolerance < minimum:
        return f"tolerance {facts.tolerance:g} is below the {minimum:g} that {what} needs"
    return ""


def _tf32_score(facts: Facts) -> Score:
    if facts.measured("compute_bound") and facts.signals.tensor_pipes_idle:
        return Score(
            0.9,
            f"compute-bound fp32 GEMM/conv ({facts.why('compute_bound')}; "
            f"{facts.why('tensor_pipes_idle')}): TF32 allowed at tolerance {facts.tolerance:g}",
        )
    if facts.measured("memory_bound"):
        return Score(
            0.55,
            f"memory-bound ({facts.why('memory_bound')}): TF32 speeds up only the GEMM/conv math",
        )
    return Score(
        PRIOR_TF32,
        f"fp32 GEMM/conv and tolerance {facts.tolerance:g}: TF32 "
        "(prior: the best simple rewrite at 1e-2 on an H200)",
    )


class Tf32(_Wrapper):
    name = "tf32"
    summary = "TF32 for fp32 matmul and cuDNN convolution, set around the forward only"
    spec = wrappers.WrapperSpec(doc="The reference with TF32 matmul and convolution.", tf32=True)

    def blocker(self, facts: Facts) -> str:
        if not facts.on_cuda:
            return "TF32 exists on CUDA devices only"
        return _tf32_blocker(facts, TF32_MIN_TOLERANCE, "TF32 (errors near 1e-3)")

    def score(self, facts: Facts) -> Score:
        return _tf32_score(facts)


class CompileTf32(Tf32):
    name = "compile_tf32"
    summary = "torch.compile with TF32 matmul and convolution"
    spec = wrappers.WrapperSpec(
        doc="The reference under torch.compile with TF32.", tf32=True, compile_mode="default"
    )

    def score(self, facts: Facts) -> Score:
        base = _tf32_score(facts)
        if facts.fusable:
            return Score(
                base.value + 0.02, f"{base.reason}; compile also fuses {facts.fusable} other ops"
            )
        return Score(base.value - 0.1, f"{base.reason}; nothing around the GEMM/conv to fuse")


class Bf16Autocast(_Wrapper):
    name = "bf16_autocast"
    summary = "bfloat16 autocast for matmul and convolution, outputs back in float32"
    spec = wrappers.WrapperSpec(
        doc="The reference under bfloat16 autocast, outputs in float32.", bf16_autocast=True
    )

    def blocker(self, facts: Facts) -> str:
        return _tf32_blocker(facts, BF16_MIN_TOLERANCE, "bfloat16 (errors near 1e-2)")

    def score(self, facts: Facts) -> Score:
        base = _tf32_score(facts)
        return Score(base.value - 0.15, f"{base.reason}; bf16 errs more than TF32, ranked below")


class Compile(_Wrapper):
    name = "compile"
    summary = "torch.compile (default mode): the fallback that always applies"
    spec = wrappers.WrapperSpec(doc="The reference under torch.compile.", compile_mode="default")

    def score(self, facts: Facts) -> Score:
        if facts.signals.launch_bound:
            value = 0.6 if facts.on_cuda else 0.75  # without CUDA graphs, compile cuts overhead
            return Score(value, f"launch-bound ({facts.why('launch_bound')}): compile fuses ops")
        if facts.measured("memory_bound") and facts.fusable >= 2:
            return Score(
                0.6,
                f"memory-bound ({facts.why('memory_bound')}) with {facts.fusable} fusable ops",
            )
        return Score(PRIOR_COMPILE, "default: torch.compile fuses what it can (1.16x on H200)")


class CompileMaxAutotune(_Wrapper):
    name = "compile_max_autotune"
    summary = "torch.compile(mode='max-autotune'): autotuned GEMM/conv templates"
    spec = wrappers.WrapperSpec(
        doc="The reference under torch.compile(mode='max-autotune').", compile_mode="max-autotune"
    )

    def blocker(self, facts: Facts) -> str:
        return "" if facts.heavy else "no GEMM or convolution for max-autotune to tune"

    def score(self, facts: Facts) -> Score:
        if not facts.on_cuda:
            return Score(0.3, "max-autotune tunes GPU GEMM templates: little to gain here")
        if facts.measured("compute_bound"):
            tf32_refused = facts.tolerance < TF32_MIN_TOLERANCE
            note = f"TF32 refused at tolerance {facts.tolerance:g}" if tf32_refused else "TF32 ok"
            value = 0.75 if tf32_refused else 0.6
            return Score(
                value,
                f"compute-bound fp32 GEMM/conv ({facts.why('compute_bound')}), {note}: "
                "autotuned GEMM/conv",
            )
        return Score(0.45, "GEMM/conv without a measured compute bound: compile's default first")


class ChannelsLast(_Wrapper):
    name = "channels_last"
    summary = "channels-last parameters and inputs with cuDNN autotuning, for 2-D/3-D convolution"
    spec = wrappers.WrapperSpec(
        doc="The reference in channels-last memory format with cuDNN autotuning.",
        channels_last=True,
        cudnn_benchmark=True,
    )

    def blocker(self, facts: Facts) -> str:
        if not facts.graph.conv_ranks() & {4, 5}:
            return "no 2-D or 3-D convolution"
        return facts.analysis.channels_last_blocker

    def score(self, facts: Facts) -> Score:
        if facts.measured("compute_bound"):
            return Score(0.45, f"compute-bound convolution ({facts.why('compute_bound')})")
        return Score(0.4, "convolution: channels-last (won 1 of 40 problems on an H200)")


class CudaGraph(Transformation):
    name = "cuda_graph"
    summary = "capture the forward once in a CUDA graph and replay it (output cloned)"

    def blocker(self, facts: Facts) -> str:
        return "" if facts.on_cuda else "CUDA graphs exist on CUDA devices only"

    def score(self, facts: Facts) -> Score:
        if facts.signals.launch_bound:
            value = 0.9 if facts.measured("launch_bound") else 0.8
            return Score(
                value, f"launch-bound ({facts.why('launch_bound')}): one replay, not N launches"
            )
        return Score(0.15, f"not launch-bound ({facts.why('launch_bound')})")

    def generate(self, facts: Facts) -> str:
        return wrappers.cuda_graph_candidate(facts.analysis.problem, self.name)


class _Traced(Transformation):
    """A transformation that replaces FX nodes with calls of generated Triton kernels."""

    pattern: ClassVar[str]
    doc: ClassVar[str]

    @abstractmethod
    def sites(self, facts: Facts) -> Sequence[ElementwiseGroup | RowSite]:
        """The matched patterns this transformation rewrites."""

    @abstractmethod
    def section(self, facts: Facts) -> tuple[str, list[Replacement]]:
        """The kernels' source and the FX replacements that call them."""

    def blocker(self, facts: Facts) -> str:
        if facts.analysis.fx_blocker:
            return facts.analysis.fx_blocker
        return "" if self.sites(facts) else f"no {self.pattern} in the traced graph"

    def generate(self, facts: Facts) -> str:
        analysis = facts.analysis
        kernels, replacements = self.section(facts)
        forward = emit_forward(analysis.graph.fx, replacements, analysis.graph.module_name)
        return wrappers.traced_candidate(analysis.problem, self.name, self.doc, kernels, forward)


class TritonElementwise(_Traced):
    name = "triton_elementwise"
    summary = "one generated Triton kernel per chain of elementwise ops (GEMM/conv epilogues too)"
    pattern = "float32 elementwise ops"
    doc = "The reference with its elementwise chains fused into generated Triton kernels."

    def sites(self, facts: Facts) -> list[ElementwiseGroup]:
        return facts.analysis.groups

    def section(self, facts: Facts) -> tuple[str, list[Replacement]]:
        return triton_codegen.elementwise_section(facts.analysis.groups)

    def score(self, facts: Facts) -> Score:
        groups = facts.analysis.groups
        ops = sum(len(g.steps) for g in groups)
        longest = max(len(g.steps) for g in groups)
        fused = f"{ops} elementwise ops in {len(groups)} kernels"
        if not facts.heavy:
            if facts.measured("memory_bound"):
                return Score(0.9, f"memory-bound ({facts.why('memory_bound')}): {fused}")
            return Score(0.7 + 0.02 * min(ops - len(groups), 5), f"{fused}: one pass each")
        producers = sorted({g.producer for g in groups if g.producer})
        what = f"epilogue of {', '.join(producers)}" if producers else "ops beside GEMM/conv"
        if longest >= 2 and facts.measured("memory_bound"):
            return Score(0.7, f"memory-bound ({facts.why('memory_bound')}): fuse the {what}")
        if longest >= 2:
            return Score(
                0.45 + 0.02 * min(longest, 5), f"{longest} ops in the {what}: fused in one pass"
            )
        return Score(0.35, f"single-op {what}: little to fuse")


class TritonRow(_Traced):
    name = "triton_row"
    summary = "generated Triton row kernels for softmax, layer norm and sum/mean/max/min"
    pattern = "softmax, layer norm or single-dim reduction"
    doc = "The reference with its row-wise ops (softmax, layer norm, reductions) in Triton."

    def sites(self, facts: Facts) -> list[RowSite]:
        return facts.analysis.rows

    def section(self, facts: Facts) -> tuple[str, list[Replacement]]:
        return triton_codegen.row_section(facts.analysis.rows, facts.max_single_pass)

    def score(self, facts: Facts) -> Score:
        kinds = ", ".join(sorted({s.kind for s in facts.analysis.rows}))
        if facts.heavy:
            return Score(0.45, f"{kinds} beside GEMM/conv, which dominate")
        if facts.measured("memory_bound"):
            return Score(0.9, f"memory-bound ({facts.why('memory_bound')}) {kinds}: one pass")
        return Score(0.75, f"{kinds}: one Triton program per row, one pass over memory")


class TritonAll(_Traced):
    name = "triton_all"
    summary = "triton_row and triton_elementwise together, for problems that have both"
    pattern = "row op together with elementwise ops"
    doc = "The reference with its row-wise ops and elementwise chains in generated Triton."

    def sites(self, facts: Facts) -> list[ElementwiseGroup | RowSite]:
        analysis = facts.analysis
        return [*analysis.groups, *analysis.rows] if analysis.groups and analysis.rows else []

    def section(self, facts: Facts) -> tuple[str, list[Replacement]]:
        rows, row_calls = TritonRow().section(facts)
        elementwise, elementwise_calls = TritonElementwise().section(facts)
        return f"{rows}\n\n{elementwise}", [*row_calls, *elementwise_calls]

    def score(self, facts: Facts) -> Score:
        best = max(
            (TritonRow().score(facts), TritonElementwise().score(facts)), key=lambda s: s.value
        )
        return Score(best.value + 0.02, f"{best.reason}; the other kind fused too")


# Fixed order: ties in score go to the earlier transformation.
CATALOGUE: tuple[Transformation, ...] = (
    Tf32(),
    CompileTf32(),
    Bf16Autocast(),
    TritonAll(),
    TritonRow(),
    TritonElementwise(),
    CudaGraph(),
    CompileMaxAutotune(),
    ChannelsLast(),
    Compile(),
)
ORDER: tuple[str, ...] = tuple(t.name for t in CATALOGUE)


def get(name: str) -> Transformation:
    """The transformation called ``name`` (raises ``KeyError`` listing the known names)."""
    for transformation in CATALOGUE:
        if transformation.name == name:
            return transformation
    raise KeyError(f"unknown transformation {name!r}; known: {', '.join(ORDER)}")
