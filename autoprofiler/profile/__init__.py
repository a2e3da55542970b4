"""Metric groups and the profilers that collect them.

The two profilers that run the model, StaticProfiler and TorchProfiler, import torch; they are
loaded on first use, so that loading the CLI (``--help``) does not import torch.
"""

import importlib
from typing import Any

from autoprofiler.profile.base import (
    BatchResult,
    GroupCost,
    KernelSummary,
    MetricGroup,
    MetricValue,
    Profile,
    Profiler,
    ProfilerError,
    SkippedGroup,
)
from autoprofiler.profile.catalogue import (
    GROUPS,
    UnknownGroupError,
    expand,
    get_group,
    group_yields,
    metric_available,
)
from autoprofiler.profile.composite import CompositeProfiler, default_profiler
from autoprofiler.profile.devices import DevicePeaks, device_key, get_device
from autoprofiler.profile.ncu import NcuOptions, NcuProfiler
from autoprofiler.profile.recorded import RecordedProfiler
from autoprofiler.profile.recording import (
    RecordingReport,
    export_recordings,
    import_recordings,
    record_profiles,
)
from autoprofiler.profile.render import render_profile

__all__ = [
    "GROUPS",
    "BatchResult",
    "CompositeProfiler",
    "DevicePeaks",
    "GroupCost",
    "KernelSummary",
    "MetricGroup",
    "MetricValue",
    "NcuOptions",
    "NcuProfiler",
    "Profile",
    "Profiler",
    "ProfilerError",
    "RecordedProfiler",
    "RecordingReport",
    "SkippedGroup",
    "StaticProfiler",
    "TorchProfiler",
    "UnknownGroupError",
    "default_profiler",
    "device_key",
    "expand",
    "export_recordings",
    "get_device",
    "get_group",
    "group_yields",
    "import_recordings",
    "metric_available",
    "record_profiles",
    "render_profile",
]

_LOADED_ON_USE = {
    "StaticProfiler": "autoprofiler.profile.static",
    "TorchProfiler": "autoprofiler.profile.torch_profiler",
}


def __getattr__(name: str) -> Any:
    module = _LOADED_ON_USE.get(name)
    if module is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    return getattr(importlib.import_module(module), name)
