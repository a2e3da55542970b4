"""The ncu report parser on real captures from an H200 (ncu 2025.3.1)."""

from __future__ import annotations

import pytest

from autoprofiler.profile.base import ProfilerError
from autoprofiler.profile.ncu_report import (
    DURATION,
    aggregate,
    check_output,
    kernel_passes,
    parse_number,
    parse_passes,
    parse_raw_csv,
    split_by_range,
    summarize_kernels,
)
from tests.profile.conftest import ncu_text

SOL = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


@pytest.fixture(scope="module")
def sol41():
    return parse_raw_csv(ncu_text("sol_41_Gemm_BatchNorm_GELU_ReLU.csv"))


def test_parse_number_handles_separators_and_strings() -> None:
    assert parse_number("10,781,536") == 10781536.0
    assert parse_number("no data") == "no data"
    assert parse_number("(128, 1, 1)") == "(128, 1, 1)"


def test_kernels_units_and_a_known_value(sol41) -> None:
    assert len(sol41.kernels) == 5
    first = sol41.kernels[0]
    assert first.name.startswith("sm80_xmma_gemm_f32f32")
    assert first.values[DURATION] == 10_781_536.0
    assert sol41.units[DURATION] == "ns"
    assert sol41.units[SOL] == "%"
    assert first.ranges == ("ap_forward_0",)
    assert not any(name.startswith("device__") for name in first.values)


def test_duration_weighted_aggregate_by_hand(sol41) -> None:
    aggregated = aggregate(sol41.kernels, sol41.units, lambda name: "ncu.SpeedOfLight")
    # (SM throughput %, duration ns) of the five kernels, read off the CSV
    pairs = [(86.87, 10_781_536), (0.04, 2_368), (25.45, 153_312)]
    pairs += [(47.16, 126_048), (21.48, 124_640)]
    expected = sum(v * w for v, w in pairs) / sum(w for _, w in pairs)
    assert aggregated[SOL].value == pytest.approx(expected)
    assert aggregated[SOL].unit == "%"
    assert aggregated[SOL].group == "ncu.SpeedOfLight"
    assert aggregated[DURATION].value == sum(w for _, w in pairs)  # .sum counts add up


def test_top_kernels_by_time(sol41) -> None:
    top = summarize_kernels(sol41.kernels, sol41.units, top=2)
    assert [k.duration_ns for k in top] == [10_781_536.0, 153_312.0]
    assert top[0].metrics["launch__registers_per_thread"] == 255.0


def test_passes_from_progress_lines_else_the_column(sol41) -> None:
    log = (
        '==PROF== Profiling "sm80_xmma_gemm_f32f32" - 0: 0%....50%....100% - 10 passes\n'
        '==PROF== Profiling "vectorized_elementwise_kernel" - 1: 0%....50%....100% - 9 passes\n'
    )
    assert parse_passes(log) == [
        ("sm80_xmma_gemm_f32f32", 10),
        ("vectorized_elementwise_kernel", 9),
    ]
    assert parse_passes("garbage ==PROF== Profiling") == []
    assert kernel_passes(sol41.kernels, "") == [10] * 5  # profiler__replayer_passes column


def test_several_ranges_in_one_process_are_split() -> None:
    table = parse_raw_csv(ncu_text("multi_23_Softmax.csv"))
    split = split_by_range(table, ["ap_forward_0", "ap_forward_1", "ap_forward_2", "missing"])
    assert [len(split[f"ap_forward_{i}"]) for i in range(3)] == [1, 1, 1]
    assert split["missing"] == []
    assert split["ap_forward_1"][0].values[DURATION] == 6_223_328.0


def test_full_set_parses() -> None:
    table = parse_raw_csv(ncu_text("full_41_Gemm_BatchNorm_GELU_ReLU.csv.gz"))
    assert len(table.kernels) == 5
    assert len(table.units) > 2000
    assert table.kernels[0].values["profiler__replayer_passes"] == 38.0


def test_nothing_captured_is_one_line_error() -> None:
    with pytest.raises(ProfilerError, match="no kernel") as info:
        parse_raw_csv(ncu_text("nokernel.csv"))
    assert "\n" not in str(info.value)


def test_counter_permission_is_one_line_error() -> None:
    text = "==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to access NVIDIA GPU"
    with pytest.raises(ProfilerError, match="ERR_NVGPUCTRPERM") as info:
        check_output(text)
    assert "\n" not in str(info.value)
