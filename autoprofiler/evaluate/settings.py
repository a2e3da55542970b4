"""The process-wide settings a timing depends on, read so that a change shows.

The reference is timed in a process of its own, so nothing a candidate sets can reach it. The
candidate is timed under the settings recorded here before its code loads; what it changed by
the end shows as a finding. Precision settings change *what* is computed (a rejecting
``changes_precision``, raised by :mod:`~autoprofiler.evaluate.guard`); the others (threads,
cuDNN, deterministic algorithms, Inductor, the allocator) change only how fast, and are reported
as ``changes_settings`` (a flag: such a candidate is not counted as a speedup unless asked).
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from typing import Any

import torch

from autoprofiler.evaluate.result import Finding

# Settings that change what the reference computes (float32 matmuls in TF32 or bfloat16, ...).
PRECISION_SETTINGS = (
    "get_float32_matmul_precision()",
    "backends.cuda.matmul.allow_tf32",
    "backends.cuda.matmul.allow_fp16_reduced_precision_reduction",
    "backends.cuda.matmul.allow_bf16_reduced_precision_reduction",
    "backends.cudnn.allow_tf32",
    "backends.fp32_precision",
    "backends.cuda.matmul.fp32_precision",
    "backends.cudnn.conv.fp32_precision",
    "backends.mkldnn.matmul.fp32_precision",
)
# Settings that change only how fast things run.
SPEED_SETTINGS: dict[str, Callable[[], Any]] = {
    "num_threads": torch.get_num_threads,
    "num_interop_threads": torch.get_num_interop_threads,
    "cudnn.enabled": lambda: torch.backends.cudnn.enabled,
    "cudnn.benchmark": lambda: torch.backends.cudnn.benchmark,
    "cudnn.deterministic": lambda: torch.backends.cudnn.deterministic,
    "deterministic_algorithms": torch.are_deterministic_algorithms_enabled,
    "PYTORCH_CUDA_ALLOC_CONF": lambda: os.environ.get("PYTORCH_CUDA_ALLOC_CONF"),
    "PYTORCH_ALLOC_CONF": lambda: os.environ.get("PYTORCH_ALLOC_CONF"),
}
INDUCTOR_SETTINGS = (
    "max_autotune",
    "max_autotune_gemm",
    "max_autotune_pointwise",
    "coordinate_descent_tuning",
    "freezing",
    "epilogue_fusion",
    "triton.cudagraphs",
    "fallback_random",
    "compile_threads",
)
MAX_SHOWN = 4


def _read(path: str) -> Any:
    value: Any = torch
    for part in path.removesuffix("()").split("."):
        value = getattr(value, part, None)
    if path.endswith("()") and value is not None:
        value = value()
    return value


def precision_settings() -> dict[str, Any]:
    """The settings in ``PRECISION_SETTINGS`` ("none" read as the default, "ieee")."""
    settings: dict[str, Any] = {"default_dtype": torch.get_default_dtype()}
    for path in PRECISION_SETTINGS:
        try:
            value = _read(path)
        except RuntimeError:  # torch refuses to read a mix of its legacy and new settings
            value = "mixed settings"
        if value is not None:
            settings[path] = "ieee" if value == "none" else value
    return settings


def _inductor_settings(load: bool) -> dict[str, Any]:
    """Inductor's settings; when ``load`` is false, only if something already imported it
    (its import costs about a second)."""
    config = sys.modules.get("torch._inductor.config")
    if config is None and load:
        try:
            import torch._inductor.config as config
        except ImportError:  # a torch without Inductor
            config = None
    if config is None:
        return {}
    values = {}
    for name in INDUCTOR_SETTINGS:
        value: Any = config
        for part in name.split("."):
            value = getattr(value, part, None)
        values[f"inductor.{name}"] = value
    return values


def speed_settings(load_inductor: bool = False) -> dict[str, str]:
    """Threads, cuDNN, determinism, allocator and Inductor settings, by name, as text."""
    values = {name: read() for name, read in SPEED_SETTINGS.items()}
    values.update(_inductor_settings(load_inductor))
    return {name: repr(value) for name, value in values.items()}


def settings_changes(recorded: dict[str, str], now: dict[str, str]) -> list[Finding]:
    """A ``changes_settings`` flag naming each speed setting of ``now`` that differs from
    ``recorded`` (the settings the reference was timed under); empty when none did."""
    moved = [
        f"{name} {recorded[name]} -> {now[name]}"
        for name in recorded
        if name in now and now[name] != recorded[name]
    ]
    if not moved:
        return []
    shown = ", ".join(moved[:MAX_SHOWN]) + (
        f" and {len(moved) - MAX_SHOWN} more" if len(moved) > MAX_SHOWN else ""
    )
    return [Finding("changes_settings", f"changed process settings: {shown}", "flag")]
