"""render_profile: concise text with units, top kernels and capped groups."""

from __future__ import annotations

from autoprofiler.profile.base import Profile, SkippedGroup
from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.profile.ncu_report import aggregate, parse_raw_csv, summarize_kernels
from autoprofiler.profile.render import format_value, render_profile
from autoprofiler.profile.static import StaticProfiler
from tests.profile.conftest import ncu_text


def _sol_profile() -> Profile:
    table = parse_raw_csv(ncu_text("sol_41_Gemm_BatchNorm_GELU_ReLU.csv"))
    return Profile(
        problem_hash="p",
        device="H200",
        metrics=aggregate(table.kernels, table.units, lambda name: "ncu.SpeedOfLight"),
        kernels=summarize_kernels(table.kernels, table.units),
        groups=["ncu.SpeedOfLight"],
        cost_s=8.5,
        startup_s=5.8,
        replay_passes=50,
    )


def test_format_value_units() -> None:
    assert format_value(10_781_536, "ns") == "10.8 ms"
    assert format_value(84.834, "%") == "84.8%"
    assert format_value(5_749_238_272, "byte") == "5.75 GB"
    assert format_value(0.25, "fraction") == "0.25"


def test_ncu_profile_text(gemm) -> None:
    profile = _sol_profile().merge(StaticProfiler().collect(gemm, [GROUPS["static"]]))
    profile.skipped.append(SkippedGroup("ncu.set.full", "not recorded on H200"))
    text = render_profile(profile, GROUPS, max_lines=6)
    lines = text.splitlines()
    assert profile.cost_s >= 8.5  # plus the static analysis' real time
    header = f"Profile on H200: cost {profile.cost_s:.1f} s (start-up 5.8 s), 50 ncu replay"
    assert lines[0].startswith(header)
    assert "1. sm80_xmma_gemm_f32f32" in text and "10.8 ms" in text and "255 regs" in text
    assert f"[ncu.SpeedOfLight] {GROUPS['ncu.SpeedOfLight'].description}" in text
    assert "[static]" in text and "static.flops = 524 kFLOP" in text
    assert "more metrics)" in text and ".min" not in text and "profiler__" not in text
    sol_block = text.split("[ncu.SpeedOfLight]")[1].split("[static]")[0]
    assert len([ln for ln in sol_block.splitlines() if " = " in ln]) == 6
    assert lines[-1] == "Not collected: ncu.set.full (not recorded on H200)"
    assert len(lines) < 40


def test_empty_profile_says_so() -> None:
    text = render_profile(Profile(problem_hash="p"), GROUPS)
    assert "Nothing was collected for this problem." in text


def test_a_set_reads_as_its_sections() -> None:
    """``set full`` is not capped as one group: each member section gets its own block."""
    table = parse_raw_csv(ncu_text("sol_41_Gemm_BatchNorm_GELU_ReLU.csv"))
    metrics = aggregate(table.kernels, table.units, lambda name: "ncu.set.full")
    profile = Profile(problem_hash="p", device="H200", metrics=metrics, groups=["ncu.set.full"])
    text = render_profile(profile, GROUPS, max_lines=3)
    assert text.count("[ncu.set.full]") == 1
    sol_block = text.split("[ncu.SpeedOfLight]")[1].split("\n[")[0]
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in sol_block
    assert "gpu__time_duration.sum" in text.split("[ncu.SpeedOfLight]")[0]  # every run's: the set's
    shown = [ln for ln in text.splitlines() if " = " in ln]
    assert len(shown) > 3  # more than one group's cap
    single = render_profile(_sol_profile(), GROUPS, max_lines=3)
    assert len([ln for ln in single.splitlines() if " = " in ln]) == 3
