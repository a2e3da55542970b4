"""CompositeProfiler: dispatch by MetricGroup.profiler, merge, skip what has no profiler."""

from __future__ import annotations

from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.profile.composite import CompositeProfiler, default_profiler
from autoprofiler.profile.static import StaticProfiler
from autoprofiler.profile.torch_profiler import TorchProfiler


def test_dispatch_merge_and_skip(gemm) -> None:
    profiler = CompositeProfiler(
        {"static": StaticProfiler(), "torch": TorchProfiler(steps=1, warmup=0, device="cpu")}
    )
    groups = [GROUPS["static"], GROUPS["torch.ops"], GROUPS["ncu.SpeedOfLight"]]
    profile = profiler.collect(gemm, groups)
    assert profile.value("static.flops") and profile.value("torch.op_count") == 1
    assert profile.groups == ["static", "torch.ops"]
    assert [(s.group, s.reason) for s in profile.skipped] == [
        ("ncu.SpeedOfLight", "no ncu profiler here")
    ]
    result = profiler.collect_many([gemm], [GROUPS["static"]])
    assert result.profiles[gemm.content_hash].value("static.flops") == 2 * 64 * 32 * 128


def test_default_profiler_has_static_and_torch() -> None:
    profiler = default_profiler("H200")
    assert {"static", "torch"} <= set(profiler.profilers)
