"""The catalogue of metric groups: what each collects, what it teaches, and what it costs.

Group names are stable identifiers used by trees, recordings and the CLI:

- ``static`` (profiler ``static``): FLOPs, bytes, op mix and a roofline bound, no GPU.
- ``torch.kernels``, ``torch.ops`` (profiler ``torch``): torch.profiler views.
- ``ncu.<Section>`` (profiler ``ncu``): one Nsight Compute section (or a few that belong together).
- ``ncu.set.basic|detailed|full``: ncu's section sets (``composite_of`` names the member groups).
- ``ncu.curated24``: an explicit ``--metrics`` list of 24 metrics, the kind of fixed list that
  LLM kernel optimizers hand to the model.

Costs (``cost_s``: marginal in-range seconds per problem, start-up excluded; ``replay_passes``:
ncu replay passes per kernel) start as rough values from the H200 notes and are replaced by the
medians measured by ``benchmarks/build_catalogue.py`` (``data/catalogue_costs.json``) once that
file exists.

Which metric names a group yields: explicit ``metrics`` for ``static``/``torch``/``curated24``;
for ncu groups the lists seen on a real GPU in ``data/ncu_section_metrics.json``, keyed by
``metrics_key`` (the section identifier for one-section groups, ``set.<name>``, ``Roofline``,
``MemoryWorkloadAnalysis``), plus ``"_always"``: the launch/device/profiler columns that every ncu
run reports. For a group with no recorded list yet, ``metric_available`` uses the lists of its
sections, and for a section with none, a prefix rule (``_SECTION_PREFIXES``): approximate, to be
replaced by ``benchmarks/build_catalogue.py`` from recordings.
"""

from __future__ import annotations

import difflib
import json
import logging
from collections.abc import Iterable
from dataclasses import replace
from functools import cache
from importlib import resources

from autoprofiler.profile.base import MetricGroup

log = logging.getLogger(__name__)

COSTS_FILE = "catalogue_costs.json"
SECTION_METRICS_FILE = "ncu_section_metrics.json"
ALWAYS_KEY = "_always"

# Rough start-up per invocation (H200 notes: the ncu runner process 4.2-5.8 s, plus ncu's own).
STARTUP_S = {"ncu": 5.5, "cupti": 1.0, "cupti_cold": 6.0, "torch": 0.5, "static": 0.0}


class UnknownGroupError(ValueError):
    """A metric group name that is not in the catalogue."""


STATIC_METRICS = (
    "static.flops",
    "static.bytes",
    "static.param_bytes",
    "static.arithmetic_intensity",
    "static.op_count",
    "static.frac_matmul",
    "static.frac_conv",
    "static.frac_norm",
    "static.frac_reduction",
    "static.frac_elementwise",
    "static.frac_attention",
    "static.frac_other",
    "static.dtype_bytes",
    "static.roofline_time_ms",
    "static.bound",
)

TORCH_KERNEL_METRICS = (
    "torch.kernel_count",
    "torch.kernel_time_ms",
    "torch.top_kernel_frac",
    "torch.gpu_idle_frac",
    "torch.peak_memory_mb",
)

TORCH_OP_METRICS = (
    "torch.op_count",
    "torch.cpu_time_ms",
    "torch.top_op_frac",
    "torch.launches_per_forward",
)

CURATED24_METRICS = (
    "gpu__time_duration.sum",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "sm__maximum_warps_per_active_cycle_pct",
    "launch__occupancy_limit_registers",
    "launch__occupancy_limit_shared_mem",
    "launch__occupancy_limit_warps",
    "launch__registers_per_thread",
    "launch__waves_per_multiprocessor",
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "l1tex__t_sector_hit_rate.pct",
    "lts__t_sector_hit_rate.pct",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
    "sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",
    "sm__pipe_tensor_cycles_active.avg.pct_of_peak_sustained_active",
    "smsp__issue_active.avg.pct_of_peak_sustained_active",
    "smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio",
    "smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio",
    "smsp__sass_average_branch_targets_threads_uniform.pct",
)

ROOFLINE_SECTIONS = (
    "SpeedOfLight_RooflineChart",
    "SpeedOfLight_HierarchicalDoubleRooflineChart",
    "SpeedOfLight_HierarchicalHalfRooflineChart",
    "SpeedOfLight_HierarchicalSingleRooflineChart",
    "SpeedOfLight_HierarchicalTensorRooflineChart",
)
MEMORY_SECTIONS = (
    "MemoryWorkloadAnalysis",
    "MemoryWorkloadAnalysis_Chart",
    "MemoryWorkloadAnalysis_Tables",
)

# ncu --list-sets (2025.3.1): the sections of each set.
NCU_SETS: dict[str, tuple[str, ...]] = {
    "basic": ("LaunchStats", "Occupancy", "SpeedOfLight", "WorkloadDistribution"),
    "detailed": (
        "ComputeWorkloadAnalysis",
        "LaunchStats",
        "MemoryWorkloadAnalysis",
        "MemoryWorkloadAnalysis_Chart",
        "Occupancy",
        "SourceCounters",
        "SpeedOfLight",
        "SpeedOfLight_RooflineChart",
        "WorkloadDistribution",
    ),
    "full": (
        "ComputeWorkloadAnalysis",
        "InstructionStats",
        "LaunchStats",
        *MEMORY_SECTIONS,
        "NumaAffinity",
        "Nvlink_Tables",
        "Nvlink_Topology",
        "Occupancy",
        "PmSampling",
        "SchedulerStats",
        "SourceCounters",
        "SpeedOfLight",
        *ROOFLINE_SECTIONS[1:],
        "SpeedOfLight_RooflineChart",
        "WarpStateStats",
        "WorkloadDistribution",
    ),
}

# Fallback for sections without a recorded metric list: metric-name prefixes they report.
_SECTION_PREFIXES: dict[str, tuple[str, ...]] = {
    "LaunchStats": ("launch__",),
    "Occupancy": ("launch__occupancy", "sm__warps_active", "sm__maximum_warps", "achieved_"),
    "WorkloadDistribution": (
        "sm__cycles_active",
        "smsp__cycles_active",
        "l1tex__cycles_active",
        "lts__cycles_active",
        "dram__cycles_active",
    ),
    "ComputeWorkloadAnalysis": (
        "sm__inst_executed_pipe_",
        "sm__pipe_",
        "smsp__inst_executed",
        "sm__instruction_throughput",
    ),
    "WarpStateStats": (
        "smsp__average_warps_issue_stalled_",
        "smsp__average_warp_latency",
        "smsp__warps_issue_stalled_",
    ),
    "SchedulerStats": (
        "smsp__issue_active",
        "smsp__warps_eligible",
        "smsp__warps_active",
        "smsp__maximum_warps",
    ),
    "InstructionStats": ("smsp__inst_executed", "smsp__sass_inst_executed", "sass__inst_executed"),
    "SourceCounters": ("smsp__sass_", "smsp__branch_targets", "smsp__pcsamp_"),
    "MemoryWorkloadAnalysis": ("dram__", "lts__", "l1tex__", "gpu__dram"),
    "SpeedOfLight_RooflineChart": ("sm__sass_thread_inst_executed_op_", "derived__"),
}
for _section in MEMORY_SECTIONS[1:]:
    _SECTION_PREFIXES[_section] = _SECTION_PREFIXES["MemoryWorkloadAnalysis"]
for _section in ROOFLINE_SECTIONS[1:]:
    _SECTION_PREFIXES[_section] = _SECTION_PREFIXES["SpeedOfLight_RooflineChart"]


def _ncu(name: str, description: str, sections: tuple[str, ...], cost_s: float, passes: int):
    return MetricGroup(
        name=f"ncu.{name}",
        profiler="ncu",
        description=description,
        sections=sections,
        cost_s=cost_s,
        replay_passes=passes,
    )


def _set_members(set_name: str, groups: Iterable[MetricGroup]) -> tuple[str, ...]:
    sections = set(NCU_SETS[set_name])
    return tuple(
        g.name
        for g in groups
        if g.profiler == "ncu" and g.sections and sections.intersection(g.sections)
    )


def _builtin_groups() -> dict[str, MetricGroup]:
    singles = [
        _ncu(
            "SpeedOfLight",
            "How close compute and memory come to peak: compute- or "
            "memory-bound, and how far from the roofline.",
            ("SpeedOfLight",),
            1.5,
            10,
        ),
        _ncu(
            "LaunchStats",
            "Grid/block sizes, registers and shared memory per thread/block, "
            "waves per SM: is the launch configuration sane.",
            ("LaunchStats",),
            0.5,
            1,
        ),
        _ncu(
            "Occupancy",
            "Theoretical vs achieved occupancy and which resource (registers, "
            "shared memory, warps, blocks) limits it.",
            ("Occupancy",),
            0.5,
            1,
        ),
        _ncu(
            "MemoryWorkloadAnalysis",
            "DRAM/L2/L1 traffic, hit rates and bandwidth per level: "
            "where bytes move and whether caching or coalescing fails.",
            MEMORY_SECTIONS,
            2.0,
            8,
        ),
        _ncu(
            "ComputeWorkloadAnalysis",
            "Utilization of each pipeline (FMA, ALU, tensor, FP64, "
            "LSU): which unit is busy and whether tensor cores are used.",
            ("ComputeWorkloadAnalysis",),
            1.0,
            4,
        ),
        _ncu(
            "WarpStateStats",
            "Why warps stall (memory dependency, barrier, math throttle, "
            "MIO...): the latency bottleneck.",
            ("WarpStateStats",),
            1.0,
            4,
        ),
        _ncu(
            "SchedulerStats",
            "Eligible vs active warps per scheduler and issue-slot use: "
            "whether there is enough parallelism to hide latency.",
            ("SchedulerStats",),
            0.8,
            2,
        ),
        _ncu(
            "InstructionStats",
            "Executed instruction mix and counts: wasted or unexpected "
            "instructions (conversions, address math).",
            ("InstructionStats",),
            1.0,
            4,
        ),
        _ncu(
            "SourceCounters",
            "Branch divergence, uncoalesced global accesses and sampled stall "
            "hot spots per source line.",
            ("SourceCounters",),
            3.0,
            6,
        ),
        _ncu(
            "WorkloadDistribution",
            "Balance of work across SMs, L2 slices and DRAM: tail effects and load imbalance.",
            ("WorkloadDistribution",),
            0.7,
            2,
        ),
        _ncu(
            "Roofline",
            "Achieved FLOP/s against arithmetic intensity per precision and memory "
            "level: the headroom left at each level.",
            ROOFLINE_SECTIONS,
            2.5,
            8,
        ),
    ]
    groups: dict[str, MetricGroup] = {
        "static": MetricGroup(
            name="static",
            profiler="static",
            description="FLOPs, bytes, arithmetic intensity, op mix and a roofline lower bound "
            "from the program alone: what the kernel should cost.",
            metrics=STATIC_METRICS,
            cost_s=0.05,
        ),
        "torch.kernels": MetricGroup(
            name="torch.kernels",
            profiler="torch",
            description="The kernels a forward launches with their GPU times, and GPU idle time: "
            "which kernel dominates and whether the model is launch-bound.",
            metrics=TORCH_KERNEL_METRICS,
            cost_s=1.0,
        ),
        "torch.ops": MetricGroup(
            name="torch.ops",
            profiler="torch",
            description="The aten ops a forward runs with their CPU-side times: framework "
            "overhead and fusion opportunities.",
            metrics=TORCH_OP_METRICS,
            cost_s=0.8,
        ),
    }
    groups.update({g.name: g for g in singles})
    set_costs = {"basic": (1.5, 10), "detailed": (12.0, 60), "full": (16.0, 90)}
    set_text = {
        "basic": "ncu's basic set: speed of light, launch, occupancy and workload distribution.",
        "detailed": "ncu's detailed set: basic plus compute and memory workload analysis, source "
        "counters and the roofline chart.",
        "full": "ncu's full set (21 sections): every section, the most complete and the most "
        "expensive view.",
    }
    for set_name, (cost_s, passes) in set_costs.items():
        groups[f"ncu.set.{set_name}"] = MetricGroup(
            name=f"ncu.set.{set_name}",
            profiler="ncu",
            description=set_text[set_name],
            sections=NCU_SETS[set_name],
            cost_s=cost_s,
            replay_passes=passes,
            composite_of=_set_members(set_name, singles),
        )
    groups["ncu.curated24"] = MetricGroup(
        name="ncu.curated24",
        profiler="ncu",
        description="A fixed list of 24 key metrics (occupancy and its limits, memory throughput "
        "and hit rates, pipe use, top stall reasons, branch efficiency, time).",
        metrics=CURATED24_METRICS,
        cost_s=1.5,
        replay_passes=10,
    )
    return groups


@cache
def _load_json(name: str) -> dict:
    """A data file of the package, read once (callers only read it)."""
    try:
        text = resources.files("autoprofiler").joinpath("data", name).read_text("utf-8")
    except (FileNotFoundError, OSError):
        return {}
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        log.warning("ignoring %s: %s", name, exc)
        return {}


def _with_measured_costs(groups: dict[str, MetricGroup]) -> dict[str, MetricGroup]:
    """Replace rough costs with the measured ones of ``data/catalogue_costs.json`` if present."""
    measured = _load_json(COSTS_FILE).get("groups", {})
    out = dict(groups)
    for name, cost in measured.items():
        if name in out:
            out[name] = replace(
                out[name],
                cost_s=float(cost.get("cost_s", out[name].cost_s)),
                replay_passes=int(cost.get("replay_passes", out[name].replay_passes)),
            )
    return out


GROUPS: dict[str, MetricGroup] = _with_measured_costs(_builtin_groups())


def get_group(name: str) -> MetricGroup:
    """The catalogue group called ``name`` (raises ``UnknownGroupError`` naming close ones)."""
    try:
        return GROUPS[name]
    except KeyError:
        close = difflib.get_close_matches(name, list(GROUPS), n=3, cutoff=0.5)
        hint = f"; did you mean {', '.join(close)}?" if close else f"; known: {', '.join(GROUPS)}"
        raise UnknownGroupError(f"unknown metric group {name!r}{hint}") from None


def expand(names: Iterable[str]) -> list[MetricGroup]:
    """The groups named, with each composite's members appended (each group once)."""
    seen: dict[str, MetricGroup] = {}
    for name in names:
        group = get_group(name)
        seen.setdefault(group.name, group)
        for member in group.composite_of:
            seen.setdefault(member, get_group(member))
    return list(seen.values())


@cache
def section_metrics() -> dict[str, frozenset[str]]:
    """``{section or "set.<name>" or "_always": metric names}`` recorded on a real GPU."""
    return {k: frozenset(v) for k, v in _load_json(SECTION_METRICS_FILE).items()}


def _section_yields(section: str, metric: str) -> bool:
    known = section_metrics().get(section)
    if known is not None:
        return metric in known
    return metric.startswith(_SECTION_PREFIXES.get(section, ("\0",)))


def metrics_key(group: MetricGroup) -> str:
    """The key of ``group``'s recorded list in ``ncu_section_metrics.json``: its name without
    ``ncu.`` (the section identifier for single-section groups, ``set.full`` for a set)."""
    return group.name.removeprefix("ncu.")


def _ncu_yields(group: MetricGroup, metric: str) -> bool:
    if metric in section_metrics().get(ALWAYS_KEY, ()) or metric in group.metrics:
        return True
    known = section_metrics().get(metrics_key(group))
    if known is not None:
        return metric in known
    return any(_section_yields(section, metric) for section in group.sections)


def group_yields(group: MetricGroup, metric: str) -> bool:
    """True when collecting ``group`` can yield ``metric``.

    A set is judged by its own recorded list (or its sections), not by its member groups, whose
    sections can be wider than the set's (``ncu.set.detailed`` has only one roofline chart).
    """
    if group.profiler == "ncu":
        return not metric.startswith(("static.", "torch.")) and _ncu_yields(group, metric)
    return metric in group.metrics


def metric_available(metric: str, groups: Iterable[str]) -> bool:
    """True when collecting the groups named can yield ``metric``."""
    return any(group_yields(get_group(name), metric) for name in groups)


def cupti_cost_s(group: MetricGroup) -> float:
    """Typical seconds of ``group`` in a CUPTI step (its share of the replay), as measured
    (``cupti_groups`` of ``catalogue_costs.json``); the ncu cost where never measured."""
    measured = _load_json(COSTS_FILE).get("cupti_groups", {}).get(group.name, {})
    return float(measured.get("cost_s", group.cost_s))


def startup_s(profiler: str) -> float:
    """Typical start-up seconds of one invocation of ``profiler`` (measured when recorded)."""
    measured = _load_json(COSTS_FILE).get("startup_s", {})
    return float(measured.get(profiler, STARTUP_S.get(profiler, 0.0)))
