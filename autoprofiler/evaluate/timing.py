"""The timing loop, run the same way for the reference (in the trusted reference process) and the
candidate (in its own process), and the statistics the trusted side makes of its trials.

:func:`run_timing_loop`: a probe and a warm-up on an input of their own, then one timed call on
each input of a pool made before timing, every input distinct (the pool is as large as the
trials, within a memory budget). On CUDA each trial is the L2 flush, a synchronisation of the
whole device (so that no stream's work can begin before the start event), the start event, the
call and the end event on the current stream; then the whole device is synchronised again and a
third event recorded. Work that ran past the end event on another stream shows as a longer gap
between the end and the third event than the loop's own synchronisation latency (measured before
the trials, with nothing running), and that excess is added to the trial: work on any stream is
timed, and a single-stream call is not charged the host's wake-up from the synchronisation. On
the CPU ``time.perf_counter`` is around the call. Each trial's host time (around the events,
synchronisation included) is recorded too, and the loop's own setup and wall seconds: the
trusted side checks the reported trials against the wall time it saw
(:mod:`~autoprofiler.evaluate.verdict`). The outputs of the timed calls are kept (copied once
the trial is over) so that trusted code can check them.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass, field
from typing import Any

import torch

from autoprofiler.evaluate.inputs import flatten, nbytes
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


PROBE_CALLS = 5
CPU_POOL_BYTES = 2 * 2**30
CUDA_POOL_SHARE = 0.4  # of the device memory free when the pool is made (cached blocks too)


@dataclass
class LoopSettings:
    """How long to warm up and time, in milliseconds, and the trial bounds."""

    warmup_ms: float = 25.0
    budget_ms: float = 200.0
    min_trials: int = 10
    max_trials: int = 200
    flush_l2: bool = True


@dataclass
class LoopRecord:
    """What one timing loop measured, raw: per-trial times and the loop's own seconds.

    ``trial_ms`` are the timer's (CUDA events, or ``perf_counter`` on the CPU); ``host_ms``
    the host wall time around each trial; ``setup_s`` the probe, warm-up and pool before the
    first trial; ``loop_s`` the wall time of all trials, flushes and output copies included;
    ``input_bytes``/``output_bytes`` one call's; ``memory_limited`` when the pool budget, not
    the timing budget, set the number of trials; ``sync_latency_ms`` the synchronisation
    latency the CUDA trials were corrected by (:func:`trial_time`); ``tail_ms`` each CUDA
    trial's end event to the event after the device-wide synchronisation (what the
    correction reads); ``device_allocs`` the device allocations (``cudaMalloc``) the caching
    allocator made during the trials, which a steady loop does not need.
    """

    trial_ms: list[float]
    host_ms: list[float]
    timer: str
    setup_s: float
    pool_s: float
    loop_s: float
    input_bytes: int
    output_bytes: int
    memory_limited: bool = False
    sync_latency_ms: float = 0.0
    tail_ms: list[float] = field(default_factory=list)
    device_allocs: int = 0

    @property
    def trials(self) -> int:
        return len(self.trial_ms)

    def to_dict(self) -> dict:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict) -> LoopRecord:
        return cls(**{k: data[k] for k in cls.__dataclass_fields__ if k in data})


def _trial_count(estimate_ms: float, budget_ms: float, low: int, high: int) -> int:
    if estimate_ms <= 0:
        return high
    return max(low, min(high, int(budget_ms / estimate_ms)))


def pool_budget_bytes(device: torch.device) -> int:
    """Bytes the pool of timed inputs and their kept outputs may take on ``device``: a share
    of the device's free memory and of the blocks this process's allocator holds unused."""
    if device.type == "cuda":
        free, _ = torch.cuda.mem_get_info(device)
        cached = torch.cuda.memory_reserved(device) - torch.cuda.memory_allocated(device)
        return int((free + cached) * CUDA_POOL_SHARE)
    return CPU_POOL_BYTES


def _copy_outputs(value: Any) -> list[Any]:
    return [v.detach().clone() if torch.is_tensor(v) else v for v in flatten(value)]


LATENCY_PROBES = 7


def trial_time(main_ms: float, tail_ms: float, latency_ms: float) -> float:
    """One CUDA trial's time: start to end event on the current stream, plus whatever the
    device-wide synchronisation waited for beyond its own latency (work on other streams)."""
    return main_ms + max(0.0, tail_ms - latency_ms)


class _Clock:
    """One trial's timer: CUDA events around the call and a device-wide synchronisation, or
    ``perf_counter``; and the host wall time around either."""

    def __init__(self, device: torch.device, flush_l2: bool) -> None:
        self.device = device
        self.cuda = device.type == "cuda"
        self.flush = flush_l2 and self.cuda
        self.name = "cuda_events" if self.cuda else "perf_counter"
        self.latency_ms = 0.0

    def calibrate(self) -> float:
        """The synchronisation's own latency with nothing running: the median gap between an
        event and one recorded after a device-wide synchronisation (0 on the CPU)."""
        if not self.cuda:
            return 0.0
        gaps = []
        for _ in range(LATENCY_PROBES):
            before = torch.cuda.Event(enable_timing=True)
            after = torch.cuda.Event(enable_timing=True)
            torch.cuda.synchronize(self.device)
            before.record()
            torch.cuda.synchronize(self.device)
            after.record()
            after.synchronize()
            gaps.append(before.elapsed_time(after))
        self.latency_ms = statistics.median(gaps)
        return self.latency_ms

    def trial(self, fn: Callable[..., Any], args: Sequence[Any]) -> tuple[float, float, float, Any]:
        """(timer ms, host ms, tail ms, output) of one call; the tail (end event to the event
        after the device-wide synchronisation) is 0 on the CPU."""
        if not self.cuda:
            began = time.perf_counter()
            out = fn(*args)
            elapsed = (time.perf_counter() - began) * 1e3
            return elapsed, elapsed, 0.0, out
        start = torch.cuda.Event(enable_timing=True)
        end = torch.cuda.Event(enable_timing=True)
        settled = torch.cuda.Event(enable_timing=True)
        if self.flush:
            _flush_l2(self.device)
        # A quiet device at the start event: no stream's work can begin before it.
        torch.cuda.synchronize(self.device)
        began = time.perf_counter()
        start.record()
        out = fn(*args)
        end.record()
        torch.cuda.synchronize(self.device)  # every stream's work is inside the trial
        settled.record()
        settled.synchronize()
        host = (time.perf_counter() - began) * 1e3
        tail_ms = end.elapsed_time(settled)
        return trial_time(start.elapsed_time(end), tail_ms, self.latency_ms), host, tail_ms, out


def _reserve_output_block(device: torch.device, output_bytes: int) -> None:
    """Leave a free block of one output's size in the caching allocator, so that the first
    timed call does not pay a ``cudaMalloc`` the later ones do not (the pool may have taken
    the warm-up's freed output)."""
    if device.type != "cuda" or output_bytes <= 0:
        return
    try:
        spare = torch.empty(output_bytes, dtype=torch.uint8, device=device)
    except torch.cuda.OutOfMemoryError:
        return
    del spare


def _device_allocs(device: torch.device) -> int:
    """The caching allocator's device allocations so far on ``device`` (0 off a GPU)."""
    if device.type != "cuda":
        return 0
    return int(torch.cuda.memory_stats(device).get("segment.all.allocated", 0))


def run_timing_loop(
    fn: Callable[..., Any],
    make_input: Callable[[int], list[Any]],
    device: torch.device,
    settings: LoopSettings,
    pool_bytes: int,
    keep_outputs: bool = False,
) -> tuple[LoopRecord, list[list[Any]]]:
    """Time ``fn`` on distinct inputs; return the raw record and (with ``keep_outputs``) a
    copy of each timed call's output, in trial order.

    ``make_input(j)`` makes the ``j``-th input of the pool; ``make_input(-1)`` the probe's and
    warm-up's own. The number of trials comes from the probe's estimate and the budget, and
    is cut to what fits in ``pool_bytes`` (each trial's input and kept output).
    """
    clock = _Clock(device, settings.flush_l2)
    began = time.perf_counter()
    latency_ms = clock.calibrate()
    warm = make_input(-1)
    probe_out = fn(*warm)
    output_bytes = nbytes(flatten(probe_out))
    del probe_out
    estimate_ms = statistics.median(clock.trial(fn, warm)[0] for _ in range(PROBE_CALLS))
    for _ in range(_trial_count(estimate_ms, settings.warmup_ms, 1, settings.max_trials)):
        fn(*warm)
    input_bytes = nbytes(warm)
    del warm
    wanted = _trial_count(estimate_ms, settings.budget_ms, settings.min_trials, settings.max_trials)
    per_trial = input_bytes + (output_bytes if keep_outputs else 0)
    fits = max(1, pool_bytes // per_trial) if per_trial else wanted
    trials = min(wanted, fits)
    pool_began = time.perf_counter()
    pool: list[list[Any] | None] = [make_input(j) for j in range(trials)]
    _reserve_output_block(device, output_bytes)
    allocs_before = _device_allocs(device)
    loop_began = time.perf_counter()
    trial_ms, host_ms, tail_ms, outputs = [], [], [], []
    for j in range(trials):
        elapsed, host, tail, out = clock.trial(fn, pool[j])
        pool[j] = None  # the trusted side makes this input again from its seed
        trial_ms.append(elapsed)
        host_ms.append(host)
        if clock.cuda:
            tail_ms.append(tail)
        if keep_outputs:
            outputs.append(_copy_outputs(out))
        del out
    ended = time.perf_counter()
    record = LoopRecord(
        trial_ms=trial_ms,
        host_ms=host_ms,
        timer=clock.name,
        setup_s=loop_began - began,
        pool_s=loop_began - pool_began,
        loop_s=ended - loop_began,
        input_bytes=input_bytes,
        output_bytes=output_bytes,
        memory_limited=fits < wanted,
        sync_latency_ms=latency_ms,
        tail_ms=tail_ms,
        device_allocs=_device_allocs(device) - allocs_before,
    )
    return record, outputs
