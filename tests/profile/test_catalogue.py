"""The metric-group catalogue: names, composites, lookups and metric availability."""

from __future__ import annotations

import pytest

from autoprofiler.profile.catalogue import (
    CURATED24_METRICS,
    GROUPS,
    UnknownGroupError,
    expand,
    get_group,
    metric_available,
)

NAMES = [
    "static", "torch.kernels", "torch.ops", "ncu.SpeedOfLight", "ncu.LaunchStats",
    "ncu.Occupancy", "ncu.MemoryWorkloadAnalysis", "ncu.ComputeWorkloadAnalysis",
    "ncu.WarpStateStats", "ncu.SchedulerStats", "ncu.InstructionStats", "ncu.SourceCounters",
    "ncu.WorkloadDistribution", "ncu.Roofline", "ncu.set.basic", "ncu.set.detailed",
    "ncu.set.full", "ncu.curated24",
]  # fmt: skip


def test_group_names_and_fields() -> None:
    assert sorted(GROUPS) == sorted(NAMES)
    for group in GROUPS.values():
        assert group.description and "\n" not in group.description
        assert group.cost_s > 0
        assert group.profiler in ("static", "torch", "ncu")
    assert len(GROUPS["ncu.Roofline"].sections) == 5
    assert len(GROUPS["ncu.MemoryWorkloadAnalysis"].sections) == 3


def test_sets_are_composites_of_their_member_groups() -> None:
    assert GROUPS["ncu.set.basic"].composite_of == (
        "ncu.SpeedOfLight", "ncu.LaunchStats", "ncu.Occupancy", "ncu.WorkloadDistribution",
    )  # fmt: skip
    assert len(GROUPS["ncu.set.full"].sections) == 21
    names = [g.name for g in expand(["ncu.set.basic", "ncu.Occupancy"])]
    assert names[0] == "ncu.set.basic" and names.count("ncu.Occupancy") == 1


def test_unknown_group_names_close_ones() -> None:
    with pytest.raises(UnknownGroupError, match=r"did you mean ncu\.SpeedOfLight") as info:
        get_group("ncu.SpeedOfLite")
    assert isinstance(info.value, ValueError) and "\n" not in str(info.value)


def test_curated24_is_24_real_metrics() -> None:
    assert len(set(CURATED24_METRICS)) == 24
    assert all(metric_available(m, ["ncu.set.full"]) for m in CURATED24_METRICS)  # seen on H200


@pytest.mark.parametrize(
    ("metric", "groups", "expected"),
    [
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", ["ncu.SpeedOfLight"], True),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", ["ncu.Occupancy"], False),
        ("launch__registers_per_thread", ["ncu.Occupancy"], True),  # every ncu run has it
        ("sm__warps_active.avg.pct_of_peak_sustained_active", ["ncu.Occupancy"], True),  # prefix
        ("smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio",
         ["ncu.WarpStateStats"], True),
        ("static.flops", ["static"], True),
        ("static.flops", ["ncu.set.full"], False),
        ("torch.gpu_idle_frac", ["torch.kernels"], True),
        ("torch.gpu_idle_frac", ["torch.ops"], False),
        ("l1tex__t_sector_hit_rate.pct", ["ncu.curated24"], True),
    ],
)  # fmt: skip
def test_metric_available(metric: str, groups: list[str], expected: bool) -> None:
    assert metric_available(metric, groups) is expected
