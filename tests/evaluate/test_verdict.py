"""The trusted side's rules, on real records and real processes: the wall-clock check of
reported timings, the hand-over of outputs, the settings record, the seeds."""

from __future__ import annotations

import textwrap
from dataclasses import replace

import pytest
import torch

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.evaluate.inputs import TrialSeeds
from autoprofiler.evaluate.runner import CHECK_ALL_TIMED_BYTES, TIMED_SAMPLE, _timed_sample
from autoprofiler.evaluate.settings import settings_changes, speed_settings
from autoprofiler.evaluate.timing import LoopRecord
from autoprofiler.evaluate.verdict import (
    at_tolerance_edge,
    check_timing,
    expected_phase_s,
    least_trials,
)
from autoprofiler.problem import Problem
from tests.adversarial.cases import HONEST

CONFIG = EvalConfig(device="cpu", min_timing_trials=5)


def record(
    trials: int = 20, trial_ms: float = 10.0, timer: str = "cuda_events", **kw
) -> LoopRecord:
    fields = dict(
        trial_ms=[trial_ms] * trials,
        # an honest loop's shapes: the CPU timer is the host interval, CUDA events run inside
        host_ms=[trial_ms + (0.02 if timer == "cuda_events" else 0.0)] * trials,
        timer=timer,
        setup_s=0.05,
        pool_s=0.02,
        loop_s=trials * (trial_ms + 0.5) / 1e3,
        input_bytes=1 << 20,
        output_bytes=1 << 20,
    )
    fields.update(kw)
    return LoopRecord(**fields)


def test_on_the_cpu_a_wall_clock_contradiction_flags_on_a_gpu_it_rejects() -> None:
    cheat = record(trial_ms=1.0)
    gpu = check_timing(cheat, 2.0, record(), CONFIG)
    on_cpu = record(trial_ms=1.0, timer="perf_counter")
    cpu = check_timing(on_cpu, 5.0, record(timer="perf_counter"), CONFIG)
    assert (gpu.severity, cpu.severity) == ("reject", "flag")


def test_honest_timings_hold() -> None:
    candidate, reference = record(trial_ms=5.0), record()
    wall = expected_phase_s(candidate, reference, CONFIG.warmup_ms) * 1.1
    assert check_timing(candidate, wall, reference, CONFIG) is None


@pytest.mark.parametrize(
    ("candidate", "wall_s", "words"),
    [
        (record(trial_ms=1.0), 2.0, "by the evaluator's clock"),  # work hidden outside trials
        (record(trial_ms=100.0), 0.5, "reported trials in a"),  # trials longer than the phase
        (record(trial_ms=5.0, host_ms=[1.0] * 20), 0.2, "timed inside"),  # event > host time
        (record(trials=2), 0.1, "timed trials where at least"),  # too few trials
        (record(timer="perf_counter"), 0.3, "the reference with"),  # another timer claimed
        (record(trial_ms=float("nan")), 0.3, "malformed"),
    ],
)
def test_contradicted_timings_are_refused(candidate: LoopRecord, wall_s: float, words: str):
    finding = check_timing(candidate, wall_s, record(), CONFIG)
    assert finding is not None and finding.severity == "reject", finding
    assert words in finding.detail


def test_an_output_slab_that_squeezes_the_pool_lowers_the_trials_due() -> None:
    """KernelBench L1/84 on the H200: the reference's pool held 6 trials of 4 GiB outputs;
    the 39 GiB slab left the candidate 71 % of the memory, and its pool held 5."""
    reference, config = record(trials=6), EvalConfig(device="cuda", min_timing_trials=10)
    assert least_trials(reference, config) == 6  # no slab: as many as the reference had
    assert least_trials(reference, config, room=0.71) == 3
    assert least_trials(reference, config, room=0.1) == 1
    assert least_trials(record(trials=200), config, room=0.71) == 10  # time-bound: unchanged
    candidate = record(trials=5)
    wall = expected_phase_s(candidate, reference, config.warmup_ms)
    assert check_timing(candidate, wall, reference, config, room=0.71) is None
    refused = check_timing(candidate, wall, reference, config)
    assert refused is not None and "at least 6 were due" in refused.detail


def test_the_cpu_tolerance_is_the_reference_timers_not_the_candidates() -> None:
    """A candidate cannot claim the CPU's looser tolerance: the reference's timer decides."""
    reference = record(timer="cuda_events")
    candidate = record(trial_ms=1.0)
    wall = 3 * expected_phase_s(candidate, reference, CONFIG.warmup_ms)
    assert check_timing(candidate, wall, reference, CONFIG) is not None
    cpu = record(timer="perf_counter")
    on_cpu = record(trial_ms=1.0, timer="perf_counter")
    assert check_timing(on_cpu, wall, cpu, CONFIG) is None


@pytest.mark.parametrize(
    ("timer", "severity"), [("perf_counter", "reject"), ("cuda_events", "flag")]
)
def test_a_timer_shrunk_inside_honest_host_times_is_refused_on_the_cpu_flagged_on_a_gpu(
    timer: str, severity: str
) -> None:
    reference, honest = record(timer=timer), record(trial_ms=5.0, timer=timer)
    wall = expected_phase_s(honest, reference, CONFIG.warmup_ms) * 1.1
    assert check_timing(honest, wall, reference, CONFIG) is None
    shrunk = replace(honest, trial_ms=[0.1] * honest.trials)  # host times left honest
    finding = check_timing(shrunk, wall, reference, CONFIG)
    assert (finding.name, finding.severity) == ("timing_contradicted", severity)
    assert "inside the host's" in finding.detail
    # a flag never hides a rejection: with the wall clock contradicted too, it is refused
    assert check_timing(shrunk, wall * 10, reference, CONFIG).severity == "reject"
    # on a GPU a gap within the bound is the synchronisation's wake-up, not a forgery
    woken = replace(honest, trial_ms=[5.0 - 0.2] * honest.trials)
    assert (check_timing(woken, wall, reference, CONFIG) is None) is (timer == "cuda_events")


def test_every_timed_output_is_checked_while_small_else_a_sample() -> None:
    assert _timed_sample(50, 1024) == list(range(50))
    sample = _timed_sample(50, CHECK_ALL_TIMED_BYTES)
    assert len(sample) == TIMED_SAMPLE and set(sample) <= set(range(50))
    assert _timed_sample(0, 1) == []


def test_pool_seeds_are_distinct_and_differ_from_the_base() -> None:
    seeds = TrialSeeds((1, 2), 12345, 7)
    pool = [seeds.pool_seed(j) for j in range(-1, 500)]
    assert len(set(pool)) == len(pool)


def test_a_settings_change_is_named_and_flagged() -> None:
    recorded = speed_settings()
    before = torch.get_num_threads()
    torch.set_num_threads(max(1, before - 1) if before > 1 else 2)
    try:
        (finding,) = settings_changes(recorded, speed_settings())
    finally:
        torch.set_num_threads(before)
    assert finding.name == "changes_settings" and finding.severity == "flag"
    assert "num_threads" in finding.detail
    assert settings_changes(recorded, speed_settings()) == []


FORGES_ITS_TIMES = (
    textwrap.dedent(
        """
        import importlib

        _timing = importlib.import_module("auto" + "profiler.evaluate.timing")
        _trial = _timing._Clock.trial


        def _forged(self, fn, args):  # a fiftieth of each trial's time is reported
            elapsed, host, *rest = _trial(self, fn, args)
            return (elapsed / 50, host / 50, *rest)


        _timing._Clock.trial = _forged
        """
    )
    + HONEST
)


MATMUL = textwrap.dedent(
    """
    import torch
    import torch.nn as nn

    batch_size = 256
    FEATURES = 8192


    class Model(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

        def forward(self, x):
            return (x @ self.weight).clamp_min(0) * 2


    def get_inputs():
        return [torch.randn(batch_size, FEATURES)]


    def get_init_inputs():
        return [FEATURES]
    """
)


@pytest.mark.slow
def test_times_forged_in_the_candidates_process_are_refused_by_the_wall_clock(tmp_path):
    """The candidate rewrites its own process's clock; the caller's clock disagrees. (A problem
    whose calls take about 0.1 s on small inputs, so that the trials, not the making of the
    inputs or the loop's own work, fill the timing phase: on the CPU the tolerance is 2.5x +
    0.5 s, and a phase of 40 such trials is several times what a fiftieth of them allows.)"""
    problem = Problem(name="matmul", source=MATMUL, origin="<test>")
    config = EvalConfig(
        device="cpu", timing_budget_ms=6000, max_timing_trials=40, other_shape=False
    )
    result = evaluate(problem, FORGES_ITS_TIMES, config, work_root=tmp_path)
    found = {f.name: f.severity for f in result.findings}
    assert found.get("timing_contradicted") == "flag", result.failure_message  # (a GPU: reject)
    assert "timing_contradicted" in result.flagged  # so its speedup is not counted


@pytest.mark.parametrize(
    ("answer", "edge"),
    [
        ({"kind": "wrong_values", "max_abs_diff": 1.64e-4}, True),  # L2/18 on the H200
        ({"kind": "wrong_values", "max_abs_diff": 0.3}, False),  # a stale output
        ({"kind": "wrong_values", "max_abs_diff": float("nan")}, False),  # an empty one
        ({"kind": "wrong_shape", "max_abs_diff": 0.0}, False),
        ({"kind": "missing"}, False),
    ],
)
def test_a_timed_output_at_the_tolerance_edge_is_wrong_values_not_a_cheat(answer, edge):
    assert at_tolerance_edge(answer, 1e-4, 1e-4) is edge
