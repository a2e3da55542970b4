"""Metric groups and the profilers that collect them."""

from autoprofiler.profile.base import (
    GroupCost,
    KernelSummary,
    MetricGroup,
    MetricValue,
    Profile,
    Profiler,
    ProfilerError,
    SkippedGroup,
)

__all__ = [
    "GroupCost",
    "KernelSummary",
    "MetricGroup",
    "MetricValue",
    "Profile",
    "Profiler",
    "ProfilerError",
    "SkippedGroup",
]
