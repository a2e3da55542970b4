"""Judging candidates: isolated workers, KernelBench-style correctness, careful timing."""

from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.recorded import (
    EvaluationsFileError,
    ImportedEvaluations,
    evaluated_devices,
    export_evaluations,
    import_evaluations,
    recorded_evaluation,
    replay_evaluation,
)
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding, TimingStats
from autoprofiler.evaluate.runner import (
    NoGPUError,
    evaluate,
    evaluate_compiled_reference,
    evaluation_device,
)
from autoprofiler.evaluate.sandbox import SandboxError

__all__ = [
    "EvalConfig",
    "EvalResult",
    "EvaluationsFileError",
    "FailureKind",
    "Finding",
    "ImportedEvaluations",
    "NoGPUError",
    "SandboxError",
    "TimingStats",
    "evaluate",
    "evaluate_compiled_reference",
    "evaluated_devices",
    "evaluation_device",
    "export_evaluations",
    "import_evaluations",
    "recorded_evaluation",
    "replay_evaluation",
]
