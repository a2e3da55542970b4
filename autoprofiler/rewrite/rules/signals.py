"""What bounds a problem's speed, read from its profile, or from a prior when the profile is silent.

Each signal is taken from the strongest evidence present: hardware counters (Nsight Compute),
then the torch profiler's timeline, then the static features (``static.*``). Compute- and
memory-boundness are only ever measured; launch-boundness falls back to a prior from the traced
op mix (many ops, all tiny), and idle tensor pipes to the assumption that fp32 GEMMs leave them
idle. Metrics are read defensively: any may be missing, and several names are accepted for one
quantity (names differ across ncu versions and between this project's profilers).

Thresholds (documented, deliberately round):

- a unit is the bottleneck when it runs at ``BUSY_PCT`` (60 %) of its peak or more, and above
  the other unit;
- tensor pipes are idle below ``IDLE_TENSOR_PCT`` (5 %);
- a forward is launch-bound when the GPU idles ``LAUNCH_IDLE_FRACTION`` (40 %) of the time, or
  runs ``MANY_LAUNCHES`` (8) or more kernels averaging under ``TINY_KERNEL_US`` (10 us);
- statically, arithmetic intensity of ``COMPUTE_INTENSITY`` (30 FLOP/B) or more is compute-bound,
  ``MEMORY_INTENSITY`` (4 FLOP/B) or less memory-bound (an H200 balances near 15 FLOP/B in fp32).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from autoprofiler.profile.base import Profile
from autoprofiler.rewrite.rules.graph import ProblemGraph

SM_THROUGHPUT = ("sm__throughput.avg.pct_of_peak_sustained_elapsed",)
MEMORY_THROUGHPUT = (
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
)
TENSOR_PIPE = (
    "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__inst_executed_pipe_tensor_op_hmma.avg.pct_of_peak_sustained_active",
)
GPU_IDLE = ("torch.gpu_idle_fraction", "torch.gpu_idle_frac")
LAUNCHES = ("torch.kernel_launches", "torch.launches_per_forward", "torch.kernel_count")
KERNEL_TIME_MS = ("torch.kernel_time_ms",)
GPU_TIME = ("gpu__time_duration.sum",)
INTENSITY = ("static.arithmetic_intensity",)
STATIC_BOUND = ("static.bound",)

BUSY_PCT = 60.0
IDLE_TENSOR_PCT = 5.0
LAUNCH_IDLE_FRACTION = 0.4
MANY_LAUNCHES = 8
TINY_KERNEL_US = 10.0
COMPUTE_INTENSITY = 30.0
MEMORY_INTENSITY = 4.0

_TIME_UNITS_US = {"ns": 1e-3, "nsecond": 1e-3, "us": 1.0, "usecond": 1.0, "ms": 1e3, "msecond": 1e3}


@dataclass(frozen=True)
class Signals:
    """Bottleneck flags with the evidence behind each (``evidence[flag]``, one short phrase).

    ``measured`` names the flags that came from a profile rather than the prior.
    """

    compute_bound: bool = False
    memory_bound: bool = False
    launch_bound: bool = False
    tensor_pipes_idle: bool = False
    evidence: dict[str, str] = field(default_factory=dict)
    measured: frozenset[str] = frozenset()

    def why(self, flag: str) -> str:
        return self.evidence.get(flag, "")

    def measured_true(self, flag: str) -> bool:
        """Whether ``flag`` is set and a profile, not the prior, says so."""
        return bool(getattr(self, flag)) and flag in self.measured


def _first(profile: Profile | None, names: tuple[str, ...]) -> tuple[str, float] | None:
    if profile is None:
        return None
    for name in names:
        value = profile.value(name)
        if value is not None:
            return name, value
    return None


def _boundedness(profile: Profile | None) -> tuple[bool, bool, str, bool]:
    """(compute-bound, memory-bound, evidence, measured)."""
    sm = _first(profile, SM_THROUGHPUT)
    memory = _first(profile, MEMORY_THROUGHPUT)
    if sm is not None or memory is not None:
        sm_pct = sm[1] if sm else 0.0
        mem_pct = memory[1] if memory else 0.0
        text = f"SM {sm_pct:.0f}%, memory {mem_pct:.0f}% of peak"
        compute = sm_pct >= BUSY_PCT and sm_pct >= mem_pct
        return compute, mem_pct >= BUSY_PCT and mem_pct > sm_pct, text, True
    intensity = _first(profile, INTENSITY)
    bound = _first(profile, STATIC_BOUND)
    if intensity is not None:
        value = intensity[1]
        text = f"arithmetic intensity {value:.1f} FLOP/B (static)"
        compute = value >= COMPUTE_INTENSITY or (bound is not None and bound[1] >= 0.5)
        return compute, value <= MEMORY_INTENSITY and not compute, text, True
    return False, False, "boundedness not measured", False


def _launches(profile: Profile) -> float | None:
    """Kernel launches per forward: the torch profiler's count, else ncu's kernel list."""
    counted = _first(profile, LAUNCHES)
    if counted is not None:
        return counted[1]
    return float(sum(k.count for k in profile.kernels)) if profile.kernels else None


def _kernel_time_us(profile: Profile) -> float | None:
    """GPU time of the kernels of one forward, in microseconds."""
    kernel_ms = _first(profile, KERNEL_TIME_MS)
    if kernel_ms is not None:
        return kernel_ms[1] * 1e3
    total = _first(profile, GPU_TIME)
    if total is not None:
        unit = profile.metrics[total[0]].unit.strip().lower()
        return total[1] * _TIME_UNITS_US.get(unit, 1e-3)
    return sum(k.duration_ns for k in profile.kernels) / 1e3 if profile.kernels else None


def _launch_bound(profile: Profile | None, graph: ProblemGraph) -> tuple[bool, str, bool]:
    """(launch-bound, evidence, measured)."""
    if profile is not None:
        idle = _first(profile, GPU_IDLE)
        fraction = None if idle is None else idle[1] / 100.0 if idle[1] > 1.0 else idle[1]
        if fraction is not None and fraction >= LAUNCH_IDLE_FRACTION:
            return True, f"GPU idle {fraction:.0%} of the forward", True
        launches, time_us = _launches(profile), _kernel_time_us(profile)
        if launches and time_us is not None:
            mean_us = time_us / launches
            many_tiny = launches >= MANY_LAUNCHES and mean_us < TINY_KERNEL_US
            return many_tiny, f"{launches:.0f} kernels of {mean_us:.1f} us on average", True
        if fraction is not None:
            return False, f"GPU idle {fraction:.0%} of the forward", True
    if graph.traced:
        many_tiny = graph.all_tiny and graph.launches >= MANY_LAUNCHES
        size = "all tiny" if graph.all_tiny else "not all tiny"
        return many_tiny, f"{graph.launches} ops, {size} (traced)", False
    return False, "launches not measured", False


def read_signals(profile: Profile | None, graph: ProblemGraph) -> Signals:
    """The signals of one problem: from ``profile`` where it says, from ``graph`` otherwise."""
    compute, memory, bound_text, bound_measured = _boundedness(profile)
    launch, launch_text, launch_measured = _launch_bound(profile, graph)
    tensor = _first(profile, TENSOR_PIPE)
    if tensor is not None:
        idle = tensor[1] < IDLE_TENSOR_PCT
        tensor_text = f"tensor pipes {tensor[1]:.0f}% active"
    else:
        idle = graph.heavy_fp32
        tensor_text = (
            "fp32 GEMM/conv: tensor pipes idle without TF32 (assumed)"
            if idle
            else "no fp32 GEMM/conv"
        )
    evidence = {
        "compute_bound": bound_text,
        "memory_bound": bound_text,
        "launch_bound": launch_text,
        "tensor_pipes_idle": tensor_text,
    }
    measured = {
        flag
        for flag, is_measured in (
            ("compute_bound", bound_measured),
            ("memory_bound", bound_measured),
            ("launch_bound", launch_measured),
            ("tensor_pipes_idle", tensor is not None),
        )
        if is_measured
    }
    return Signals(compute, memory, launch, idle, evidence, frozenset(measured))
