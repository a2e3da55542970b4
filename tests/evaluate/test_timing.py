"""The timing loop: the CUDA trial's arithmetic, the record it writes, and (on a GPU) that work
on another stream is timed while a single-stream call is not charged the synchronisation."""

from __future__ import annotations

import pytest
import torch

from autoprofiler.evaluate.timing import (
    LoopRecord,
    LoopSettings,
    pool_budget_bytes,
    run_timing_loop,
    trial_time,
)

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


@pytest.mark.parametrize(
    ("main_ms", "tail_ms", "latency_ms", "expected"),
    [
        (2.0, 0.015, 0.02, 2.0),  # the synchronisation's own latency is not the call's time
        (2.0, 0.02, 0.02, 2.0),
        (0.01, 3.02, 0.02, 3.01),  # work left on another stream after the end event counts
        (1.0, 0.5, 0.0, 1.5),  # uncalibrated: the whole gap counts
    ],
)
def test_a_trial_is_its_stream_time_plus_what_the_synchronisation_waited_for(
    main_ms: float, tail_ms: float, latency_ms: float, expected: float
) -> None:
    assert trial_time(main_ms, tail_ms, latency_ms) == pytest.approx(expected)


def test_on_the_cpu_the_loop_times_every_distinct_input_and_records_no_latency() -> None:
    seen: list[int] = []

    def fn(x: torch.Tensor) -> torch.Tensor:
        seen.append(int(x[0]))
        return x * 2

    settings = LoopSettings(warmup_ms=1.0, budget_ms=5.0, min_trials=4, max_trials=6)
    record, outputs = run_timing_loop(
        fn,
        lambda j: [torch.full((8,), float(j))],
        torch.device("cpu"),
        settings,
        pool_bytes=10**6,
        keep_outputs=True,
    )
    timed = seen[-record.trials :]
    assert timed == list(range(record.trials))
    assert [float(o[0][0]) for o in outputs] == [2.0 * j for j in range(record.trials)]
    assert record.sync_latency_ms == 0.0
    assert record.tail_ms == [] and record.device_allocs == 0  # no CUDA trials
    again = LoopRecord.from_dict(record.to_dict())
    assert again == record
    newer = ("sync_latency_ms", "tail_ms", "device_allocs")
    older = LoopRecord.from_dict({k: v for k, v in record.to_dict().items() if k not in newer})
    assert (older.sync_latency_ms, older.tail_ms, older.device_allocs) == (0.0, [], 0)


SPIN_CYCLES = 4_000_000  # about 2 ms on an H200-class GPU
SHORT_SPIN_CYCLES = 200_000  # about 0.1 ms: the synchronisation's latency is a large share


def _side_stream_spin(x: torch.Tensor) -> torch.Tensor:
    stream = torch.cuda.Stream()
    with torch.cuda.stream(stream):
        torch.cuda._sleep(SPIN_CYCLES)
    return x  # the current stream has nothing to do


def _current_stream_spin(x: torch.Tensor) -> torch.Tensor:
    torch.cuda._sleep(SPIN_CYCLES)
    return x


def _short_spin(x: torch.Tensor) -> torch.Tensor:
    torch.cuda._sleep(SHORT_SPIN_CYCLES)
    return x


def _loop(fn) -> LoopRecord:
    device = torch.device("cuda")
    settings = LoopSettings(warmup_ms=5.0, budget_ms=40.0, min_trials=10, max_trials=20)
    record, _ = run_timing_loop(
        fn, lambda j: [torch.zeros(4, device=device)], device, settings, pool_bytes=10**8
    )
    return record


@needs_gpu
def test_work_left_on_another_stream_is_timed_as_work_on_the_current_one() -> None:
    side = _loop(_side_stream_spin)
    current = _loop(_current_stream_spin)
    side_ms = sorted(side.trial_ms)[side.trials // 2]
    current_ms = sorted(current.trial_ms)[current.trials // 2]
    assert side.sync_latency_ms > 0
    assert side_ms == pytest.approx(current_ms, rel=0.1)


def _spins_timed(count: int = 10, synchronised_end: bool = False) -> float:
    """The median of ``count`` short spins timed by events around each: back to back with no
    synchronisation (do_bench's way), or each on a quiet device with the device synchronised
    before the end event (evaluator v4's way)."""
    times = []
    for _ in range(count):
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        if synchronised_end:
            torch.cuda.synchronize()
        start.record()
        torch.cuda._sleep(SHORT_SPIN_CYCLES)
        if synchronised_end:
            torch.cuda.synchronize()
        end.record()
        times.append((start, end))
    torch.cuda.synchronize()
    return sorted(s.elapsed_time(e) for s, e in times)[count // 2]


@needs_gpu
def test_a_single_stream_call_is_not_charged_the_synchronisation_latency() -> None:
    record = _loop(_short_spin)
    direct_ms = _spins_timed()
    v4_ms = _spins_timed(synchronised_end=True)
    loop_ms = sorted(record.trial_ms)[record.trials // 2]
    seen = (loop_ms, direct_ms, v4_ms, record.sync_latency_ms)
    assert all(host >= timed for host, timed in zip(record.host_ms, record.trial_ms))
    assert loop_ms < v4_ms, seen  # v4 timed the wake-up from the synchronisation too
    assert loop_ms <= direct_ms * 1.02 + 0.010, seen  # the spin and its launch, no more


@needs_gpu
def test_the_pool_may_use_what_the_allocator_keeps_and_a_steady_loop_allocates_nothing() -> None:
    device = torch.device("cuda")
    torch.cuda.empty_cache()
    before = pool_budget_bytes(device)
    kept = torch.empty(2**30, dtype=torch.uint8, device=device)
    del kept  # a freed GiB stays in the allocator's cache, out of mem_get_info's free memory
    assert pool_budget_bytes(device) >= before - 2**20
    record = _loop(lambda x: x * 2)
    assert record.device_allocs == 0 and len(record.tail_ms) == record.trials
    torch.cuda.empty_cache()
