"""StaticProfiler: FLOPs, bytes, op mix and the roofline bound, on the meta device."""

from __future__ import annotations

import pytest

from autoprofiler.profile.base import ProfilerError
from autoprofiler.profile.catalogue import GROUPS, STATIC_METRICS
from autoprofiler.profile.devices import get_device
from autoprofiler.profile.static import CATEGORIES, StaticProfiler
from tests.profile.conftest import make_problem

STATIC = [GROUPS["static"]]


def test_gemm_flops_bytes_and_bound(gemm) -> None:
    profile = StaticProfiler("H200").collect(gemm, STATIC)
    m, n, k = 64, 32, 128
    assert profile.value("static.flops") == 2 * m * n * k
    assert profile.value("static.bytes") == 4 * (m * k + k * n + m * n)
    assert profile.value("static.arithmetic_intensity") == pytest.approx(
        2 * m * n * k / (4 * (m * k + k * n + m * n))
    )
    assert profile.value("static.frac_matmul") == 1.0 and profile.value("static.op_count") == 1
    assert profile.value("static.dtype_bytes") == 4
    assert profile.value("static.bound") == 0.0  # tiny: memory sets the bound
    assert profile.metrics["static.flops"].unit == "FLOP"
    assert profile.groups == ["static"] and profile.cost_s > 0
    assert set(profile.metrics) == set(STATIC_METRICS)


def test_op_mix_of_conv_and_relu(conv_relu) -> None:
    profile = StaticProfiler().collect(conv_relu, STATIC)
    assert profile.value("static.frac_conv") == 0.5
    assert profile.value("static.frac_elementwise") == 0.5
    assert profile.value("static.param_bytes") == 4 * (8 * 3 * 3 * 3 + 8)
    fracs = [profile.value(f"static.frac_{c}") for c in CATEGORIES]
    assert sum(fracs) == pytest.approx(1.0)


def test_norm_and_reduction_are_told_apart() -> None:
    problem = make_problem(
        "ln_softmax",
        """
        class Model(nn.Module):
            def __init__(self):
                super().__init__()
                self.norm = nn.LayerNorm(16)

            def forward(self, x):
                return torch.softmax(self.norm(x), dim=-1).sum(dim=0)

        def get_inputs():
            return [torch.randn(8, 16)]
        """,
    )
    profile = StaticProfiler().collect(problem, STATIC)
    assert profile.value("static.frac_norm") == pytest.approx(1 / 3)
    assert profile.value("static.frac_reduction") == pytest.approx(2 / 3)


def test_large_compute_bound_gemm_roofline() -> None:
    problem = make_problem(
        "big_gemm",
        """
        class Model(nn.Module):
            def forward(self, a, b):
                return a @ b

        def get_inputs():
            return [torch.randn(4096, 4096, dtype=torch.bfloat16),
                    torch.randn(4096, 4096, dtype=torch.bfloat16)]
        """,
    )
    profile = StaticProfiler("H200").collect(problem, STATIC)
    flops = 2 * 4096**3
    assert profile.value("static.bound") == 1.0
    peak_tflops = get_device("H200").tflops["bf16_tflops"]
    assert profile.value("static.roofline_time_ms") == pytest.approx(flops / peak_tflops / 1e9)
    assert profile.value("static.dtype_bytes") == 2


def test_data_dependent_tiny_problem_falls_back_to_the_cpu() -> None:
    problem = make_problem(
        "data_dependent",
        """
        class Model(nn.Module):
            def forward(self, x):
                return x * float(x.abs().max().item())

        def get_inputs():
            return [torch.randn(4, 4)]
        """,
    )
    assert StaticProfiler().collect(problem, STATIC).value("static.op_count") >= 2


def test_a_problem_that_does_not_build_is_a_one_line_error(failing) -> None:
    broken = make_problem("broken", "def get_inputs():\n    return []\nclass Model: pass\n")
    with pytest.raises(ProfilerError, match="broken") as info:
        StaticProfiler().collect(broken, STATIC)
    assert "\n" not in str(info.value)


def test_other_groups_are_ignored(gemm) -> None:
    assert StaticProfiler().collect(gemm, [GROUPS["ncu.SpeedOfLight"]]).metrics == {}
