"""StaticProfiler: what a problem should cost, from the program alone (no GPU, nearly free).

The model and its inputs are built on the ``meta`` device (shapes, no data) and one forward is
traced: ``FlopCounterMode`` counts FLOPs, a ``TorchDispatchMode`` records the aten ops. If the
meta forward fails (data-dependent code), a problem whose inputs and parameters are small
(``CPU_FALLBACK_BYTES``) is run for real on the CPU instead; otherwise ``ProfilerError`` says
what failed.

Metrics (group ``static``, all numbers):

- ``static.flops``: FLOPs of one forward (matmul, conv, attention; what FlopCounterMode counts).
- ``static.bytes``: bytes of the inputs, outputs, parameters and buffers -- the least one forward
  must move. ``static.param_bytes``: the parameters and buffers alone.
- ``static.arithmetic_intensity``: ``flops / bytes`` (FLOP per byte).
- ``static.op_count``: aten ops that launch work (views excluded), a proxy for kernel launches.
- ``static.frac_<category>``: share of those ops per category: ``matmul``, ``conv``, ``norm``,
  ``reduction``, ``elementwise``, ``attention``, ``other``.
- ``static.dtype_bytes``: element size of the dominant floating dtype (4 for float32).
- ``static.roofline_time_ms``: ``max(flops / peak compute, bytes / DRAM bandwidth)`` on the named
  device (``data/devices.json``, matmul rate of the dominant dtype, no TF32): a lower bound.
- ``static.bound``: 1 when that bound is set by compute, 0 when by memory.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Sequence
from typing import Any

import torch
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_leaves
from torch.utils.flop_counter import FlopCounterMode

from autoprofiler.problem import Problem
from autoprofiler.profile.base import MetricGroup, MetricValue, Profile, Profiler, ProfilerError
from autoprofiler.profile.devices import get_device

log = logging.getLogger(__name__)

GROUP = "static"
CPU_FALLBACK_BYTES = 32 * 2**20
CATEGORIES = ("matmul", "conv", "norm", "reduction", "elementwise", "attention", "other")
# Matmul names match exactly; the others match as substrings (``native_layer_norm``).
_MATMUL = frozenset(
    ("mm", "addmm", "bmm", "baddbmm", "matmul", "linear", "addmv", "mv", "dot", "_scaled_mm")
)
_SUBSTRINGS = {
    "attention": ("scaled_dot_product", "attention"),
    "conv": ("convolution", "conv1d", "conv2d", "conv3d", "conv_transpose"),
    "norm": ("batch_norm", "layer_norm", "group_norm", "instance_norm", "rms_norm"),
    "reduction": ("softmax", "logsumexp", "cumsum", "cumprod", "topk"),
}
_UNITS = {
    "static.flops": "FLOP",
    "static.bytes": "byte",
    "static.param_bytes": "byte",
    "static.arithmetic_intensity": "FLOP/byte",
    "static.op_count": "op",
    "static.dtype_bytes": "byte",
    "static.roofline_time_ms": "ms",
}


def op_category(func: Any) -> str | None:
    """The category of an aten op overload; None for views (no kernel)."""
    if getattr(func, "is_view", False):
        return None
    name = func.overloadpacket.__name__
    if name in _MATMUL:
        return "matmul"
    for category, parts in _SUBSTRINGS.items():
        if any(part in name for part in parts):
            return category
    tags = getattr(func, "tags", ())
    if getattr(torch.Tag, "reduction", None) in tags:
        return "reduction"
    if torch.Tag.pointwise in tags:
        return "elementwise"
    return "other"


class _OpTrace(TorchDispatchMode):
    """Counts the aten ops a forward dispatches, by category."""

    def __init__(self) -> None:
        super().__init__()
        self.counts: Counter[str] = Counter()

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        category = op_category(func)
        if category is not None and func.overloadpacket.__name__ not in ("empty", "empty_like"):
            self.counts[category] += 1
        return func(*args, **(kwargs or {}))


def _tensor_bytes(values: Any) -> int:
    return sum(t.numel() * t.element_size() for t in tree_leaves(values) if torch.is_tensor(t))


def _dominant_dtype(tensors: list[torch.Tensor]) -> torch.dtype:
    weights: Counter[torch.dtype] = Counter()
    for t in tensors:
        if t.is_floating_point():
            weights[t.dtype] += t.numel()
    return weights.most_common(1)[0][0] if weights else torch.float32


def _build(problem: Problem, device: str) -> tuple[torch.nn.Module, list[Any]]:
    module = problem.load_module()
    torch.manual_seed(0)
    with torch.device(device):
        init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
        model = module.Model(*init)
        inputs = list(module.get_inputs())
    return model.eval(), inputs


def _trace(model: torch.nn.Module, inputs: list[Any]) -> tuple[int, Counter[str], Any]:
    with torch.no_grad(), FlopCounterMode(display=False) as flops, _OpTrace() as ops:
        output = model(*inputs)
    return flops.get_total_flops(), ops.counts, output


class StaticProfiler(Profiler):
    """Static features of a problem and a roofline bound on ``device`` (a ``devices.json`` key)."""

    name = "static"

    def __init__(self, device: str = "H200") -> None:
        self.device = device

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        started = time.perf_counter()
        profile = Profile(problem_hash=problem.content_hash, device=self.device)
        if not any(g.name == GROUP for g in groups):
            return profile
        values = self.features(problem)
        profile.metrics = {
            name: MetricValue(value=value, unit=_UNITS.get(name, ""), group=GROUP)
            for name, value in values.items()
        }
        profile.groups = [GROUP]
        profile.cost_s = time.perf_counter() - started
        return profile

    def features(self, problem: Problem) -> dict[str, float]:
        """The ``static.*`` metric values of ``problem`` (raises ``ProfilerError``)."""
        try:
            model, inputs = _build(problem, "meta")
        except Exception as exc:  # the problem's own code: any failure is reported
            raise ProfilerError(f"static: cannot build {problem.name}: {_line(exc)}") from None
        param_tensors = [*model.parameters(), *model.buffers()]
        param_bytes = _tensor_bytes(param_tensors)
        input_bytes = _tensor_bytes(inputs)
        try:
            flops, counts, output = _trace(model, inputs)
        except Exception as exc:  # data-dependent code cannot run on meta tensors
            if param_bytes + input_bytes > CPU_FALLBACK_BYTES:
                raise ProfilerError(
                    f"static: {problem.name} does not run on the meta device ({_line(exc)}) and"
                    f" is too big ({(param_bytes + input_bytes) / 2**20:.0f} MiB) for a CPU run"
                ) from None
            log.info("static: %s falls back to a CPU run: %s", problem.name, _line(exc))
            try:
                model, inputs = _build(problem, "cpu")
                flops, counts, output = _trace(model, inputs)
            except Exception as cpu_exc:  # the problem's own code: any failure is reported
                raise ProfilerError(f"static: {problem.name} fails: {_line(cpu_exc)}") from None
        dtype = _dominant_dtype([*param_tensors, *(t for t in inputs if torch.is_tensor(t))])
        total_bytes = param_bytes + input_bytes + _tensor_bytes(output)
        op_count = sum(counts.values())
        values = {
            "static.flops": float(flops),
            "static.bytes": float(total_bytes),
            "static.param_bytes": float(param_bytes),
            "static.arithmetic_intensity": flops / total_bytes if total_bytes else 0.0,
            "static.op_count": float(op_count),
            "static.dtype_bytes": float(torch.empty((), dtype=dtype).element_size()),
        }
        for category in CATEGORIES:
            values[f"static.frac_{category}"] = counts[category] / op_count if op_count else 0.0
        values.update(self._roofline(flops, total_bytes, str(dtype).removeprefix("torch.")))
        return values

    def _roofline(self, flops: float, total_bytes: float, dtype: str) -> dict[str, float]:
        peaks = get_device(self.device)
        if peaks is None or not peaks.dram_tb_s:
            return {}
        compute_s = flops / (peaks.matmul_tflops(dtype) * 1e12)
        memory_s = total_bytes / (peaks.dram_tb_s * 1e12)
        return {
            "static.roofline_time_ms": max(compute_s, memory_s) * 1e3,
            "static.bound": 1.0 if compute_s > memory_s else 0.0,
        }


def _line(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:200]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
