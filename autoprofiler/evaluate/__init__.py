"""Judging candidates: isolated workers, KernelBench-style correctness, careful timing."""

from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding, TimingStats
from autoprofiler.evaluate.runner import evaluate
from autoprofiler.evaluate.sandbox import SandboxError

__all__ = [
    "EvalConfig",
    "EvalResult",
    "FailureKind",
    "Finding",
    "SandboxError",
    "TimingStats",
    "evaluate",
]
