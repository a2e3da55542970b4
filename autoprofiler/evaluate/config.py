"""How a candidate is judged: tolerances, trials and time limits."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

from autoprofiler.store import content_key

# Part of every cache key: a verdict made by an older evaluator is not reused by a newer one.
EVALUATOR_VERSION = "9"
# KernelBench's current per-dtype tolerances (atol = rtol).
DEFAULT_TOLERANCES = {"float32": 1e-4, "float16": 1e-2, "bfloat16": 1e-2}


@dataclass(frozen=True)
class EvalConfig:
    """Evaluation settings. ``atol``/``rtol`` override the per-dtype defaults when set.

    ``device`` is ``"auto"`` (CUDA when available, else CPU), ``"cuda"`` or ``"cpu"``.
    ``timing_budget_ms`` is the time spent timing each callable; the number of trials is derived
    from a quick estimate and clamped to ``[min_timing_trials, max_timing_trials]``.
    ``other_shape`` adds a correctness trial at a second input shape where the problem allows
    one (``autoprofiler.evaluate.shapes``). ``memory_limit_gb`` caps the address space the
    worker may map beyond what it maps before the candidate runs (``RLIMIT_AS``) on CPU runs.
    ``sandbox`` is None or ``"bwrap"`` (docs/SECURITY.md).
    ``replay_device`` (a device label such as ``"cuda:NVIDIA H200"``) replays results recorded
    on that device instead of running anything (``autoprofiler.evaluate.recorded``).
    ``output_slab`` hands a GPU candidate's outputs over in device memory the reference process
    holds, where it fits; False: always as files on the host (slower for large outputs; the
    verdict is the same, so it is not part of ``config_hash``).
    """

    device: str = "auto"
    correctness_trials: int = 5
    seed: int = 42
    atol: float | None = None
    rtol: float | None = None
    tolerances: dict[str, float] = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    warmup_ms: float = 25.0
    timing_budget_ms: float = 200.0
    min_timing_trials: int = 10
    max_timing_trials: int = 200
    flush_l2: bool = True
    time_compile_baseline: bool = False
    compile_timeout_s: float = 300.0
    run_timeout_s: float = 300.0
    other_shape: bool = True
    memory_limit_gb: float | None = None
    sandbox: str | None = None
    replay_device: str | None = None
    output_slab: bool = True

    def tolerance_for(self, dtype_name: str) -> tuple[float, float]:
        """(atol, rtol) for an output dtype such as ``"float32"``."""
        default = self.tolerances.get(dtype_name, self.tolerances.get("float32", 1e-4))
        return (
            self.atol if self.atol is not None else default,
            self.rtol if self.rtol is not None else default,
        )

    def to_dict(self) -> dict:
        return asdict(self)

    def loop_settings(self) -> dict:
        """The timing loop's settings (``autoprofiler.evaluate.timing.LoopSettings``)."""
        return {
            "warmup_ms": self.warmup_ms,
            "budget_ms": self.timing_budget_ms,
            "min_trials": self.min_timing_trials,
            "max_trials": self.max_timing_trials,
            "flush_l2": self.flush_l2,
        }

    @classmethod
    def from_dict(cls, data: dict) -> EvalConfig:
        return cls(**{k: v for k, v in data.items() if k in cls.__dataclass_fields__})

    @property
    def config_hash(self) -> str:
        """Hash of the settings that change a verdict (limits, isolation, replay and whether
        torch.compile of the reference is timed beside it excluded)."""
        data = self.to_dict()
        for key in (
            "time_compile_baseline",
            "compile_timeout_s",
            "run_timeout_s",
            "memory_limit_gb",
            "sandbox",
            "replay_device",
            "output_slab",
        ):
            data.pop(key)
        return content_key(data)[:16]
