"""Evaluation results as plain data: what happened to one candidate on one problem."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import asdict, dataclass, field
from enum import Enum
from typing import Any


class FailureKind(str, Enum):
    """Why a candidate did not produce a usable, correct result."""

    SYNTAX_ERROR = "syntax_error"
    MISSING_MODELNEW = "missing_modelnew"
    BUILD_ERROR = "build_error"
    RUNTIME_ERROR = "runtime_error"
    CUDA_ERROR = "cuda_error"
    TIMEOUT = "timeout"
    OUT_OF_MEMORY = "out_of_memory"
    KILLED_BY_SIGNAL = "killed_by_signal"
    WRONG_SHAPE = "wrong_shape"
    WRONG_VALUES = "wrong_values"
    CHEAT = "cheat"
    REFERENCE_ERROR = "reference_error"
    NOT_RECORDED = "not_recorded"  # replaying recorded evaluations, and this one is not there


@dataclass
class TimingStats:
    """Timings of repeated calls, in milliseconds."""

    median_ms: float
    mean_ms: float
    min_ms: float
    max_ms: float
    p25_ms: float
    p75_ms: float
    trials: int
    timer: str

    @property
    def spread(self) -> float:
        """Interquartile ratio p75/p25: 1.0 means perfectly repeatable."""
        return self.p75_ms / self.p25_ms if self.p25_ms > 0 else float("inf")


@dataclass
class Finding:
    """A named suspicion about a candidate (a possible reward hack), with its evidence."""

    name: str
    detail: str
    severity: str = "flag"  # "flag" reports it; "reject" makes the candidate fail


@dataclass
class EvalResult:
    """The verdict on one candidate for one problem on one device under one configuration."""

    problem_hash: str
    candidate_hash: str
    device: str = ""
    timer: str = ""
    torch_version: str = ""
    compiled: bool = False
    correct: bool = False
    failure_kind: FailureKind | None = None
    failure_message: str = ""
    max_abs_diff: float | None = None
    mean_abs_diff: float | None = None
    atol: float | None = None
    rtol: float | None = None
    correctness_trials: int = 0
    reference: TimingStats | None = None
    candidate: TimingStats | None = None
    compiled_reference: TimingStats | None = None
    findings: list[Finding] = field(default_factory=list)
    wall_s: float = 0.0
    timed_s: float = 0.0
    from_cache: bool = False
    evaluator_version: str = ""
    unstable: list[str] = field(default_factory=list)  # "reference", "candidate", "compile"
    timed_outputs_checked: int = 0
    timing_phase_s: float | None = None  # the candidate's timing phase, by the trusted clock
    settings: dict[str, str] = field(default_factory=dict)  # what the candidate was timed under
    # Where the wall time went, by the trusted clock: the reference's timings (or their lookup),
    # "slab_offer" (the output slab set up), each stage of the candidate's run
    # (runner.STAGE_FROM_MARK), then, once it is gone,
    # "comparison" (the reference process judging its outputs), "slab_free" and "verdict"
    # (the rest; before session 35 "verdict" held all three).
    stages_s: dict[str, float] = field(default_factory=dict)
    # What the candidate's process said Triton compiled there ("kernels", "cache_hits",
    # "seconds"): a diagnostic of its first call that it could forge, never part of a verdict.
    triton_compiles: dict[str, float] = field(default_factory=dict)

    def add_finding(self, finding: Finding) -> None:
        """Record ``finding``; a second one of the same name only raises the severity."""
        for index, known in enumerate(self.findings):
            if known.name == finding.name:
                if finding.severity == "reject" and known.severity != "reject":
                    self.findings[index] = finding
                return
        self.findings.append(finding)

    def apply_rejections(self) -> None:
        """A correct result with a rejecting finding becomes a ``CHEAT`` failure."""
        rejected = next((f for f in self.findings if f.severity == "reject"), None)
        if self.correct and rejected is not None:
            self.correct = False
            self.failure_kind = FailureKind.CHEAT
            self.failure_message = f"{rejected.name}: {rejected.detail}"

    @property
    def speedup(self) -> float | None:
        """Eager reference median over candidate median, when both were timed and correct."""
        if not self.correct or self.reference is None or self.candidate is None:
            return None
        return self.reference.median_ms / self.candidate.median_ms

    @property
    def speedup_vs_compile(self) -> float | None:
        if not self.correct or self.compiled_reference is None or self.candidate is None:
            return None
        return self.compiled_reference.median_ms / self.candidate.median_ms

    @property
    def flagged(self) -> list[str]:
        """Names of the findings that flag (do not reject) this result."""
        return [f.name for f in self.findings if f.severity == "flag"]

    @property
    def harness_overhead_s(self) -> float:
        """Wall time of the evaluation outside the timed trials."""
        return self.wall_s - self.timed_s

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["failure_kind"] = self.failure_kind.value if self.failure_kind else None
        data["speedup"] = self.speedup
        data["speedup_vs_compile"] = self.speedup_vs_compile
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> EvalResult:
        fields = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        kind = fields.get("failure_kind")
        fields["failure_kind"] = FailureKind(kind) if kind else None
        for name in ("reference", "candidate", "compiled_reference"):
            if fields.get(name) is not None:
                fields[name] = TimingStats(**fields[name])
        fields["findings"] = [Finding(**f) for f in fields.get("findings", [])]
        return cls(**fields)


def flag_names(findings: Iterable[Finding]) -> tuple[str, ...]:
    """The names of the findings that flag a candidate (severity ``flag``), each once."""
    return tuple(dict.fromkeys(f.name for f in findings if f.severity == "flag"))


def counted_speedup(
    correct: bool, speedup: float | None, flagged: Sequence[str], count_flagged: bool = False
) -> float | None:
    """The speedup a verdict counts at in every score, or None when it counts as a failure:
    not correct, not timed, or flagged (unless ``count_flagged``)."""
    if not correct or speedup is None or speedup <= 0:
        return None
    return speedup if count_flagged or not flagged else None
