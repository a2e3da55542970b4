"""Shared fixtures: real SpeedOfLight values recorded by ncu on an H200, and a replay profiler.

The profiler here only serves those values with known costs; profilers are not under test.
"""

from __future__ import annotations

import csv
from collections.abc import Callable, Sequence
from pathlib import Path

import pytest

from autoprofiler.problem import Problem
from autoprofiler.profile.base import (
    GroupCost,
    MetricGroup,
    MetricValue,
    Profile,
    Profiler,
    cut_profile,
)
from autoprofiler.tree import load_tree

NCU_DATA = Path(__file__).resolve().parents[1] / "data" / "ncu"
EXPERT = Path(__file__).resolve().parents[2] / "examples" / "trees" / "expert.json"
MEMORY = "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed"
COMPUTE = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
SOL_METRICS = (MEMORY, COMPUTE, "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed")

# (recording, kernel-name prefix of its first match): one real kernel per expert-tree branch.
# tiny = a 2 us batch-norm elementwise kernel: neither memory nor compute is busy.
KERNELS = {
    "softmax": ("sol_23_Softmax.csv", "void unnamed>::cunn_SoftMaxForward"),
    "gemm": ("sol_1_Square_matrix_multiplication_.csv", "sm80_xmma_gemm"),
    "tiny": ("sol_41_Gemm_BatchNorm_GELU_ReLU.csv", "void at::vectorized_elementwise_kernel"),
}


def read_sol_kernel(file_name: str, kernel_prefix: str) -> dict[str, MetricValue]:
    """The SpeedOfLight metrics of the first kernel whose name starts with ``kernel_prefix``."""
    lines = (NCU_DATA / file_name).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    header, units, *rows = csv.reader(lines[start:])
    for row in rows:
        record = dict(zip(header, row))
        if record["Kernel Name"].startswith(kernel_prefix):
            unit = dict(zip(header, units))
            return {
                m: MetricValue(float(record[m].replace(",", "")), unit[m], "ncu.SpeedOfLight")
                for m in SOL_METRICS
            }
    raise LookupError(f"no kernel {kernel_prefix!r} in {file_name}")


class ReplayProfiler(Profiler):
    """Serves fixed metric values per group (a composite serves its members' values too).

    Each call costs start-up + the groups' costs + ``extra_s`` (what estimates do not foresee).
    """

    name = "replay"

    def __init__(
        self,
        metrics: dict[str, dict[str, MetricValue]],
        costs_s: dict[str, float],
        startup_s: float = 2.0,
        extra_s: float = 0.0,
    ) -> None:
        self.metrics = metrics
        self.costs_s = costs_s
        self.startup_s = startup_s
        self.extra_s = extra_s
        self.calls: list[tuple[str, ...]] = []

    def estimated_startup_s(self) -> float:
        return self.startup_s

    def estimate_cost_s(self, problem: Problem, groups: Sequence[MetricGroup]) -> float:
        if not groups:
            return 0.0
        return self.startup_s + sum(self.costs_s.get(g.name, 1.0) for g in groups)

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        self.calls.append(tuple(g.name for g in groups))
        profile = Profile(problem_hash=problem.content_hash, device="NVIDIA H200")
        for group in groups:
            for served in (group.name, *group.composite_of):
                profile.metrics.update(self.metrics.get(served, {}))
            profile.groups.append(group.name)
            profile.group_costs[group.name] = GroupCost(self.costs_s.get(group.name, 1.0))
        profile.startup_s = self.startup_s
        profile.cost_s = self.estimate_cost_s(problem, groups) + self.extra_s
        if limit_s is not None and profile.cost_s > limit_s:  # stopped, as a live one would be
            return cut_profile(problem, groups, limit_s, "fake")
        return profile


COSTS_S = {
    "static": 0.0,
    "ncu.SpeedOfLight": 1.5,
    "ncu.MemoryWorkloadAnalysis": 2.0,
    "ncu.ComputeWorkloadAnalysis": 1.0,
    "ncu.WarpStateStats": 1.0,
    "ncu.LaunchStats": 0.5,
    "ncu.Occupancy": 0.5,
}


@pytest.fixture
def problem() -> Problem:
    return Problem(name="23_Softmax", source="# a problem's source\n")


@pytest.fixture
def expert():
    return load_tree(EXPERT)


@pytest.fixture
def make_profiler() -> Callable[..., ReplayProfiler]:
    """``make_profiler(kernel, startup_s=2.0, extra_s=0.0)``: SpeedOfLight serves ``kernel``."""

    def make(kernel: str | None, startup_s: float = 2.0, extra_s: float = 0.0) -> ReplayProfiler:
        metrics = {"ncu.SpeedOfLight": read_sol_kernel(*KERNELS[kernel])} if kernel else {}
        return ReplayProfiler(metrics, COSTS_S, startup_s, extra_s)

    return make
