"""TorchProfiler: torch.profiler over a few forwards, in this process.

Groups and their metrics (per forward):

- ``torch.kernels``: ``torch.kernel_count`` (GPU kernels), ``torch.kernel_time_ms`` (their summed
  GPU time), ``torch.top_kernel_frac`` (the longest kernel's share of it), ``torch.gpu_idle_frac``
  (``1 - busy / elapsed``: near 1 means launch-bound), ``torch.peak_memory_mb``. On a machine
  without CUDA these are absent; the kernel list then holds the top CPU ops instead.
- ``torch.ops``: ``torch.op_count`` (top-level aten ops), ``torch.cpu_time_ms`` (their CPU time),
  ``torch.top_op_frac`` (the costliest op's share), ``torch.launches_per_forward`` (kernel
  launch calls; CUDA only).

``cost_s`` is the wall time of the call; ``startup_s`` the part spent building the model and
warming up, before the profiled forwards.
"""

from __future__ import annotations

import logging
import time
from collections import defaultdict
from collections.abc import Sequence
from typing import Any

import torch
from torch.profiler import ProfilerActivity, profile

from autoprofiler.problem import Problem
from autoprofiler.profile.base import (
    GroupCost,
    KernelSummary,
    MetricGroup,
    MetricValue,
    Profile,
    Profiler,
    ProfilerError,
)
from autoprofiler.profile.devices import device_key

log = logging.getLogger(__name__)

KERNELS_GROUP = "torch.kernels"
OPS_GROUP = "torch.ops"
_LAUNCH_CALLS = ("cudaLaunchKernel", "cuLaunchKernel", "cudaLaunchKernelExC", "cuLaunchKernelEx")
_UNITS = {
    "torch.kernel_time_ms": "ms",
    "torch.cpu_time_ms": "ms",
    "torch.peak_memory_mb": "MiB",
    "torch.gpu_idle_frac": "fraction",
    "torch.top_kernel_frac": "fraction",
    "torch.top_op_frac": "fraction",
}


def _busy_us(intervals: list[tuple[float, float]]) -> float:
    """Length of the union of ``[start, end)`` intervals."""
    busy, end_so_far = 0.0, float("-inf")
    for start, end in sorted(intervals):
        if end <= end_so_far:
            continue
        busy += end - max(start, end_so_far)
        end_so_far = end
    return busy


def _is_gpu(event: Any) -> bool:
    return getattr(event, "device_type", None) == torch.autograd.DeviceType.CUDA


def _to_device(values: list[Any], device: torch.device) -> list[Any]:
    return [v.to(device) if torch.is_tensor(v) else v for v in values]


class TorchProfiler(Profiler):
    """Runs ``warmup`` then ``steps`` profiled forwards on CUDA when available, else the CPU."""

    name = "torch"

    def __init__(self, steps: int = 3, warmup: int = 3, device: str | None = None) -> None:
        self.steps = steps
        self.warmup = warmup
        self.torch_device = torch.device(device or ("cuda" if torch.cuda.is_available() else "cpu"))

    def _device_name(self) -> str:
        if self.torch_device.type == "cuda":
            return device_key(torch.cuda.get_device_name(self.torch_device))
        return "cpu"

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        wanted = [g for g in groups if g.name in (KERNELS_GROUP, OPS_GROUP)]
        result = Profile(problem_hash=problem.content_hash, device=self._device_name())
        if not wanted:
            return result
        started = time.perf_counter()
        try:
            events, elapsed_s, peak_mb = self._run(problem)
        except Exception as exc:  # the problem's own code: any failure is reported
            text = " ".join(str(exc).split())[:200]
            why = f"{type(exc).__name__}: {text}"
            raise ProfilerError(f"torch profiler on {problem.name}: {why}") from None
        in_range_s = elapsed_s
        names = {g.name for g in wanted}
        metrics: dict[str, float] = {}
        if KERNELS_GROUP in names:
            metrics |= self._kernel_metrics(events, elapsed_s, peak_mb)
            result.kernels = self._kernels(events)
        if OPS_GROUP in names:
            metrics |= self._op_metrics(events)
            if not result.kernels:
                result.kernels = self._top_ops(events)
        owner = {m: g.name for g in wanted for m in g.metrics}
        result.metrics = {
            name: MetricValue(value=v, unit=_UNITS.get(name, ""), group=owner.get(name, ""))
            for name, v in metrics.items()
        }
        result.groups = [g.name for g in wanted]
        result.cost_s = time.perf_counter() - started
        result.startup_s = max(result.cost_s - in_range_s, 0.0)
        total = sum(g.cost_s for g in wanted) or len(wanted)
        result.group_costs = {
            g.name: GroupCost(seconds=in_range_s * (g.cost_s or 1) / total) for g in wanted
        }
        return result

    def _run(self, problem: Problem) -> tuple[Any, float, float]:
        """Profiled events, seconds of the profiled forwards, and peak CUDA memory in MiB."""
        module = problem.load_module()
        device = self.torch_device
        torch.manual_seed(0)
        with torch.device(device):
            init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
            model = module.Model(*init).to(device).eval()
            inputs = _to_device(list(module.get_inputs()), device)
        cuda = device.type == "cuda"
        activities = [ProfilerActivity.CPU] + ([ProfilerActivity.CUDA] if cuda else [])
        with torch.no_grad():
            for _ in range(self.warmup):
                model(*inputs)
            if cuda:
                torch.cuda.synchronize(device)
                torch.cuda.reset_peak_memory_stats(device)
            with profile(activities=activities) as prof:
                start = time.perf_counter()
                for _ in range(self.steps):
                    model(*inputs)
                if cuda:
                    torch.cuda.synchronize(device)
                elapsed_s = time.perf_counter() - start
        peak_mb = 0.0
        if cuda:
            peak_mb = torch.cuda.max_memory_allocated(device) / 2**20
            del model, inputs
            torch.cuda.empty_cache()
        return prof.events(), elapsed_s, peak_mb

    def _kernel_metrics(self, events: Any, elapsed_s: float, peak_mb: float) -> dict[str, float]:
        if self.torch_device.type != "cuda":
            return {}
        kernels = [e for e in events if _is_gpu(e)]
        times_us = [e.device_time for e in kernels]
        total_us = sum(times_us)
        busy_us = _busy_us([(e.time_range.start, e.time_range.end) for e in kernels])
        return {
            "torch.kernel_count": len(kernels) / self.steps,
            "torch.kernel_time_ms": total_us / 1e3 / self.steps,
            "torch.top_kernel_frac": max(times_us) / total_us if total_us else 0.0,
            "torch.gpu_idle_frac": max(1.0 - busy_us / 1e6 / elapsed_s, 0.0) if elapsed_s else 0.0,
            "torch.peak_memory_mb": peak_mb,
        }

    def _kernels(self, events: Any) -> list[KernelSummary]:
        by_name: dict[str, list[float]] = defaultdict(list)
        for event in events:
            if _is_gpu(event):
                by_name[event.name].append(event.device_time * 1e3)
        return self._summaries(by_name)

    def _top_ops(self, events: Any) -> list[KernelSummary]:
        by_name: dict[str, list[float]] = defaultdict(list)
        for event in self._top_level_ops(events):
            by_name[event.name].append(event.cpu_time_total * 1e3)
        return self._summaries(by_name)

    def _summaries(self, by_name: dict[str, list[float]], top: int = 10) -> list[KernelSummary]:
        summaries = [
            KernelSummary(name=n, duration_ns=sum(t) / self.steps, count=len(t) // self.steps or 1)
            for n, t in by_name.items()
        ]
        return sorted(summaries, key=lambda k: k.duration_ns, reverse=True)[:top]

    @staticmethod
    def _top_level_ops(events: Any) -> list[Any]:
        def is_aten(event: Any) -> bool:
            return event is not None and event.name.startswith("aten::")

        return [e for e in events if is_aten(e) and not is_aten(e.cpu_parent) and not _is_gpu(e)]

    def _op_metrics(self, events: Any) -> dict[str, float]:
        ops = self._top_level_ops(events)
        per_op: dict[str, float] = defaultdict(float)
        for op in ops:
            per_op[op.name] += op.cpu_time_total
        total_us = sum(per_op.values())
        metrics = {
            "torch.op_count": len(ops) / self.steps,
            "torch.cpu_time_ms": total_us / 1e3 / self.steps,
            "torch.top_op_frac": max(per_op.values()) / total_us if total_us else 0.0,
        }
        if self.torch_device.type == "cuda":
            launches = sum(1 for e in events if e.name in _LAUNCH_CALLS)
            metrics["torch.launches_per_forward"] = launches / self.steps
        return metrics
