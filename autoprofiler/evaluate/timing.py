"""Timing of a callable the same way for reference and candidate.

On CUDA: events created up front, warm-up, the L2 cache flushed before every trial, one
synchronisation at the end, the median of many trials. On the CPU: ``time.perf_counter`` around
each call (no cache flush), labelled ``perf_counter`` in the result.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any

import torch

from autoprofiler.evaluate.result import TimingStats

L2_FLUSH_BYTES = 256 * 1024 * 1024  # larger than any current GPU's L2 (H200: 60 MB)

_flush_buffer: torch.Tensor | None = None


def _flush_l2(device: torch.device) -> None:
    global _flush_buffer
    if _flush_buffer is None or _flush_buffer.device != device:
        _flush_buffer = torch.empty(L2_FLUSH_BYTES, dtype=torch.int8, device=device)
    _flush_buffer.zero_()


def _quantile(sorted_values: Sequence[float], q: float) -> float:
    position = q * (len(sorted_values) - 1)
    low = int(position)
    high = min(low + 1, len(sorted_values) - 1)
    return sorted_values[low] + (sorted_values[high] - sorted_values[low]) * (position - low)


def summarize(times_ms: Sequence[float], timer: str) -> TimingStats:
    """Median, mean, extremes and quartiles of a list of trial times."""
    ordered = sorted(times_ms)
    return TimingStats(
        median_ms=statistics.median(ordered),
        mean_ms=statistics.fmean(ordered),
        min_ms=ordered[0],
        max_ms=ordered[-1],
        p25_ms=_quantile(ordered, 0.25),
        p75_ms=_quantile(ordered, 0.75),
        trials=len(ordered),
        timer=timer,
    )


def _trial_count(estimate_ms: float, budget_ms: float, low: int, high: int) -> int:
    if estimate_ms <= 0:
        return high
    return max(low, min(high, int(budget_ms / estimate_ms)))


def time_callable(
    fn: Callable[..., Any],
    args: Sequence[Any],
    device: torch.device,
    *,
    warmup_ms: float = 25.0,
    budget_ms: float = 200.0,
    min_trials: int = 10,
    max_trials: int = 200,
    flush_l2: bool = True,
) -> TimingStats:
    """Time ``fn(*args)``; the number of trials is derived from a quick estimate."""
    if device.type == "cuda":
        return _time_cuda(fn, args, device, warmup_ms, budget_ms, min_trials, max_trials, flush_l2)
    return _time_cpu(fn, args, warmup_ms, budget_ms, min_trials, max_trials)


def _time_cuda(fn, args, device, warmup_ms, budget_ms, min_trials, max_trials, flush_l2):
    # Estimate one call (L2 flushed as in the real trials) from a few events.
    fn(*args)
    torch.cuda.synchronize(device)
    probe_start = torch.cuda.Event(enable_timing=True)
    probe_end = torch.cuda.Event(enable_timing=True)
    probe_start.record()
    for _ in range(5):
        if flush_l2:
            _flush_l2(device)
        fn(*args)
    probe_end.record()
    torch.cuda.synchronize(device)
    estimate_ms = probe_start.elapsed_time(probe_end) / 5
    for _ in range(_trial_count(estimate_ms, warmup_ms, 1, max_trials)):
        fn(*args)
    trials = _trial_count(estimate_ms, budget_ms, min_trials, max_trials)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    for start, end in zip(starts, ends):
        if flush_l2:
            _flush_l2(device)
        start.record()
        fn(*args)
        end.record()
    torch.cuda.synchronize(device)
    return summarize([s.elapsed_time(e) for s, e in zip(starts, ends)], "cuda_events")


def _time_cpu(fn, args, warmup_ms, budget_ms, min_trials, max_trials):
    begin = time.perf_counter()
    fn(*args)
    estimate_ms = (time.perf_counter() - begin) * 1e3
    for _ in range(_trial_count(estimate_ms, warmup_ms, 1, max_trials)):
        fn(*args)
    times = []
    for _ in range(_trial_count(estimate_ms, budget_ms, min_trials, max_trials)):
        begin = time.perf_counter()
        fn(*args)
        times.append((time.perf_counter() - begin) * 1e3)
    return summarize(times, "perf_counter")
