"""What a problem computes, traced on the ``meta`` device (shapes, no data, no GPU).

Two traces of one forward: a ``TorchDispatchMode`` records the aten ops (the op mix every rule
reads: categories, dtypes, bytes, FLOPs), and ``torch.fx.symbolic_trace`` gives the graph the
Triton transformations rewrite, with the shape and dtype of every tensor node. When FX
cannot trace the model (data-dependent control flow), the op list alone remains and only the
transformations that wrap the whole model apply.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from typing import Any

import torch
from torch.fx import GraphModule, Interpreter, symbolic_trace
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from autoprofiler.problem import Problem
from autoprofiler.profile.static import op_category

log = logging.getLogger(__name__)

HEAVY_CATEGORIES = ("matmul", "conv", "attention")
# An op is "tiny" when it moves less than this and computes less than TINY_FLOPS: on an H200 it
# runs for about a microsecond, less than its launch costs.
TINY_BYTES = 4 * 2**20
TINY_FLOPS = 1e8
TENSOR_INFO = "autoprofiler_tensor_info"


@dataclass(frozen=True)
class TracedOp:
    """One aten op of the forward: what kind it is, its dtype, rank and the bytes it touches."""

    name: str
    category: str
    dtype: str
    ndim: int
    bytes: int
    flops: float = 0.0

    @property
    def tiny(self) -> bool:
        return self.bytes < TINY_BYTES and self.flops < TINY_FLOPS


@dataclass
class ProblemGraph:
    """The traced forward: its aten ops and, when FX could trace it, its graph with shapes.

    ``errors`` maps a trace (``"dispatch"``, ``"fx"``) to the one-line reason it failed.
    ``module_name`` is the name the problem's module was loaded under, which FX uses to name
    the problem's own helper functions.
    """

    ops: list[TracedOp] = field(default_factory=list)
    fx: GraphModule | None = None
    module_name: str = ""
    errors: dict[str, str] = field(default_factory=dict)

    @property
    def traced(self) -> bool:
        return "dispatch" not in self.errors

    @property
    def launches(self) -> int:
        """Aten ops that launch work (views excluded): a proxy for kernel launches."""
        return len(self.ops)

    def count(self, *categories: str) -> int:
        return sum(op.category in categories for op in self.ops)

    @property
    def heavy_fp32(self) -> bool:
        """Whether a float32 matmul, convolution or attention runs (what TF32 speeds up)."""
        return any(op.category in HEAVY_CATEGORIES and op.dtype == "float32" for op in self.ops)

    @property
    def flops(self) -> float:
        return sum(op.flops for op in self.ops)

    @property
    def all_tiny(self) -> bool:
        return bool(self.ops) and all(op.tiny for op in self.ops)

    def conv_ranks(self) -> set[int]:
        """Ranks of the convolutions' inputs (4 for conv2d, 5 for conv3d)."""
        return {op.ndim for op in self.ops if op.category == "conv"}


@dataclass(frozen=True)
class TensorInfo:
    """Shape and dtype of the tensor an FX node yields in the meta trace."""

    shape: tuple[int, ...]
    dtype: torch.dtype


class _ShapeRecorder(Interpreter):
    """Runs the graph on meta tensors and records each tensor result's shape and dtype."""

    def run_node(self, node: torch.fx.Node) -> Any:
        result = super().run_node(node)
        if isinstance(result, torch.Tensor):
            node.meta[TENSOR_INFO] = TensorInfo(tuple(result.shape), result.dtype)
        return result


def tensor_meta(node: torch.fx.Node) -> TensorInfo | None:
    """The shape and dtype of the tensor ``node`` yields (None for other values)."""
    return node.meta.get(TENSOR_INFO)


def build_on_meta(problem: Problem) -> tuple[Any, torch.nn.Module, list[Any]]:
    """The problem's module, its ``Model`` in eval mode and its inputs, all on ``meta``."""
    module = problem.load_module()
    with torch.device("meta"):
        init = list(module.get_init_inputs()) if hasattr(module, "get_init_inputs") else []
        model = module.Model(*init).eval()
        inputs = list(module.get_inputs())
    return module, model, inputs


class _OpRecorder(TorchDispatchMode):
    """Records each aten op that launches work, with its dtype, rank and bytes."""

    def __init__(self) -> None:
        super().__init__()
        self.ops: list[TracedOp] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        category = op_category(func)
        name = func.overloadpacket.__name__
        if category is not None and name not in ("empty", "empty_like", "empty_strided"):
            tensors = [t for t in tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
            first = tensors[0] if tensors else None
            touched = [*tensors, *(t for t in tree_leaves(out) if isinstance(t, torch.Tensor))]
            self.ops.append(
                TracedOp(
                    name=name,
                    category=category,
                    dtype=str(first.dtype).removeprefix("torch.") if first is not None else "",
                    ndim=first.dim() if first is not None else 0,
                    bytes=sum(t.numel() * t.element_size() for t in touched),
                )
            )
        return out


def _dispatch_trace(model: torch.nn.Module, inputs: list[Any]) -> list[TracedOp]:
    recorder = _OpRecorder()
    with torch.no_grad(), FlopCounterMode(display=False) as counter, recorder:
        model(*inputs)
    return _with_flops(recorder.ops, counter)


def _with_flops(ops: list[TracedOp], counter: FlopCounterMode) -> list[TracedOp]:
    """Share the counted FLOPs of each op name over the recorded ops of that name."""
    per_name = {
        getattr(packet, "__name__", str(packet)): float(flops)
        for packet, flops in counter.get_flop_counts().get("Global", {}).items()
    }
    totals: dict[str, int] = {}
    for op in ops:
        totals[op.name] = totals.get(op.name, 0) + 1
    return [
        TracedOp(
            op.name,
            op.category,
            op.dtype,
            op.ndim,
            op.bytes,
            per_name.get(op.name, 0.0) / totals[op.name],
        )
        for op in ops
    ]


def _fx_trace(model: torch.nn.Module, inputs: list[Any]) -> GraphModule:
    graph_module = symbolic_trace(model)
    with torch.no_grad():
        _ShapeRecorder(graph_module).run(*inputs)
    return graph_module


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def analyze(problem: Problem) -> ProblemGraph:
    """Trace ``problem`` on the meta device; a trace that fails is named in ``errors``."""
    graph = ProblemGraph()
    try:
        module, model, inputs = build_on_meta(problem)
    except Exception as exc:  # the problem's own code: any failure only limits the analysis
        reason = f"cannot build on the meta device: {_line(exc)}"
        graph.errors = {"dispatch": reason, "fx": reason}
        log.info("rules: %s: %s", problem.name, reason)
        return graph
    graph.module_name = module.__name__
    try:
        graph.ops = _dispatch_trace(model, inputs)
    except Exception as exc:  # data-dependent code cannot run on meta tensors
        graph.errors["dispatch"] = _line(exc)
    try:
        graph.fx = _fx_trace(model, inputs)
    except Exception as exc:  # control flow on values, untraceable calls
        graph.errors["fx"] = _line(exc)
    for trace, reason in graph.errors.items():
        log.info("rules: %s: %s trace failed: %s", problem.name, trace, reason)
    return graph
