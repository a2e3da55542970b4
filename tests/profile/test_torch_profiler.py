"""TorchProfiler on the CPU: op counts and CPU times; GPU fields absent."""

from __future__ import annotations

import pytest

from autoprofiler.profile.base import ProfilerError
from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.profile.torch_profiler import TorchProfiler

TORCH = [GROUPS["torch.kernels"], GROUPS["torch.ops"]]


def test_cpu_op_times(conv_relu) -> None:
    profile = TorchProfiler(steps=2, warmup=1, device="cpu").collect(conv_relu, TORCH)
    assert profile.device == "cpu"
    assert profile.value("torch.op_count") == 2  # conv2d, relu per forward
    assert profile.value("torch.cpu_time_ms") > 0
    assert 0 < profile.value("torch.top_op_frac") <= 1
    assert profile.value("torch.kernel_count") is None  # no GPU here
    assert {k.name for k in profile.kernels} == {"aten::conv2d", "aten::relu"}
    assert profile.metrics["torch.cpu_time_ms"].group == "torch.ops"
    assert set(profile.group_costs) == {"torch.kernels", "torch.ops"}
    assert profile.cost_s >= profile.startup_s > 0


def test_failure_is_a_one_line_error(failing) -> None:
    with pytest.raises(ProfilerError, match="always fails") as info:
        TorchProfiler(steps=1, warmup=0, device="cpu").collect(failing, TORCH)
    assert "\n" not in str(info.value)


@pytest.mark.gpu
def test_gpu_kernels(gemm) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    profile = TorchProfiler(steps=2, warmup=1).collect(gemm, TORCH)
    assert profile.value("torch.kernel_count") >= 1
    assert 0 <= profile.value("torch.gpu_idle_frac") <= 1
