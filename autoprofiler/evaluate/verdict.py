"""The verdict, computed by trusted code from what the candidate's process handed over.

Nothing here runs in a process that imported candidate code: outputs are compared in the
trusted reference process (:mod:`~autoprofiler.evaluate.compare`,
:mod:`~autoprofiler.evaluate.reference`), the rest in the caller (:class:`Verdict`, used by
:mod:`~autoprofiler.evaluate.runner`). The candidate's process hands over raw outputs (files)
and raw per-trial times; medians, spreads and speedups are made here.

Timing check (the launch-overhead model, ``check_timing``): the caller measures the wall time
``W`` of the candidate's whole timing phase, from handing over the timing seed to the report
that the trials are done. What the candidate's trials and the loop's own work account for is

    E = sum(host times) + pool(T) + (PROBE + 2) x median + warm-up + T x per-trial overhead

where ``pool(T)`` and the per-trial overhead (L2 flush, output copy, Python) are scaled from the
reference's own loop in the trusted process. A report with ``W > 1.5 E + 0.1 s`` on a GPU
(``2.5 E + 0.5 s`` on the CPU, whose wall clock a loaded machine stretches: work done outside the
reported trials), or ``W < 0.9 sum(host times) - 0.02 s`` (trials longer than the phase), or a
trial whose timer interval exceeds its host interval, is refused (``timing_contradicted``,
reject; on the CPU the first of these only flags, since a loaded machine can stretch its wall
clock past any tolerance, and a flagged speedup is not counted unless asked).

The wall clock checks the host times; the timer's own intervals are checked against them
(``check_timer_gap``). On the CPU the honest loop reports the host interval as the timer's, so
any gap is a timer shrunk in the candidate's process: refused. On a GPU an honest trial's timer
runs inside its host interval by the synchronisation's wake-up; a median gap over ``2 x`` the
reference's own median gap ``+ 0.02 ms + 5 %`` of the median host time is flagged. It is only
flagged because the gap's spread under load has not been measured on a GPU yet. Below that
bound a shrunk timer passes, which for calls under about 0.1 ms is more than the call itself.
"""

from __future__ import annotations

import logging
import math
import statistics
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import torch

from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.inputs import TrialSeeds
from autoprofiler.evaluate.output_files import output_path
from autoprofiler.evaluate.reference import ProblemReference, ReferenceError
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding, TimingStats
from autoprofiler.evaluate.timing import PROBE_CALLS, LoopRecord, summarize

if TYPE_CHECKING:
    from autoprofiler.problem import Problem

log = logging.getLogger(__name__)

# (factor, slack s) of the wall-clock check, by timer: strict on a GPU (measured on the H200
# with no false refusal), loose on the CPU, whose wall clock a loaded machine stretches (two
# workers on two cores doubled the untimed part of the loop).
WALL_TOLERANCE = {"cuda_events": (1.5, 0.1), "perf_counter": (2.5, 0.5)}
SHORT_FACTOR = 0.9
SHORT_SLACK_S = 0.02
EVENT_SLACK_MS = 0.05
# How far inside its host interval a trial's timer may run, by timer: (factor on the reference's
# median gap, slack ms, share of the median host time). The CPU loop reports one value for both.
TIMER_GAP = {"cuda_events": (2.0, 0.02, 0.05), "perf_counter": (0.0, 1e-9, 0.0)}
# A timed call's output off by at most this many tolerances is wrong values, not a cheat: on
# the H200, Triton replies for L2/18 were off by 1.5-1.8e-4 at a 1e-4 tolerance on one of
# their timed inputs after passing five correctness trials.
TOLERANCE_EDGE = 10.0
# A timing whose interquartile range exceeds this share of its median is unstable.
UNSTABLE_IQR = 0.2


def trial_stats(record: LoopRecord) -> TimingStats:
    """The trials' statistics, made here from the raw times."""
    return summarize(record.trial_ms, record.timer)


def is_unstable(stats: TimingStats) -> bool:
    """Whether the trials spread so widely that the median is not a figure to report bare."""
    return stats.median_ms > 0 and (stats.p75_ms - stats.p25_ms) / stats.median_ms > UNSTABLE_IQR


def _valid(times: list[float]) -> bool:
    return bool(times) and all(
        isinstance(t, (int, float)) and math.isfinite(t) and t >= 0 for t in times
    )


def expected_phase_s(record: LoopRecord, reference: LoopRecord, warmup_ms: float) -> float:
    """What the reported trials and the loop's own work account for, in seconds (above)."""
    trials = record.trials
    ref_trials = max(1, reference.trials)
    per_trial_s = max(0.0, reference.loop_s - sum(reference.host_ms) / 1e3) / ref_trials
    median_s = summarize(record.host_ms, record.timer).median_ms / 1e3
    return (
        sum(record.host_ms) / 1e3
        + reference.pool_s * trials / ref_trials
        + (PROBE_CALLS + 2) * median_s
        + warmup_ms / 1e3
        + (trials + PROBE_CALLS) * per_trial_s
    )


def least_trials(reference: LoopRecord, config: EvalConfig, room: float = 1.0) -> int:
    """The fewest timed trials a candidate must report: the configured minimum, or as many as
    the reference's own pool held when memory bounded it, scaled by ``room`` (the share of
    free GPU memory the output slab left the candidate's pool), one spared for the
    candidate's own allocations."""
    held = reference.trials if room >= 1.0 else math.floor(reference.trials * room) - 1
    return max(1, min(config.min_timing_trials, reference.trials, held))


def _median_gap(record: LoopRecord) -> float:
    return statistics.median(h - t for h, t in zip(record.host_ms, record.trial_ms))


def check_timer_gap(record: LoopRecord, reference: LoopRecord) -> Finding | None:
    """A ``timing_contradicted`` finding when the trials' timer intervals run further inside
    their host intervals than the reference's do (rejecting on the CPU, flagging on a GPU; the
    module's docstring gives the bound); None when they hold."""
    factor, slack_ms, share = TIMER_GAP.get(record.timer, TIMER_GAP["perf_counter"])
    gap = _median_gap(record)
    reference_gap = max(0.0, _median_gap(reference)) if reference.trials else 0.0
    allowed = factor * reference_gap + slack_ms + share * statistics.median(record.host_ms)
    if gap <= allowed:
        return None
    detail = (
        f"the timed intervals run a median {gap:.4g} ms inside the host's around them, the "
        f"reference's {reference_gap:.4g} ms (at most {allowed:.4g} ms allowed)"
    )
    severity = "reject" if record.timer == "perf_counter" else "flag"
    return Finding("timing_contradicted", detail, severity)


def check_timing(
    record: LoopRecord,
    wall_s: float,
    reference: LoopRecord,
    config: EvalConfig,
    room: float = 1.0,
) -> Finding | None:
    """A ``timing_contradicted`` finding when the reported trials cannot be what the caller's
    clock saw, or are too few (``least_trials``) or malformed, or their timer runs inside their
    host times (``check_timer_gap``); None when they hold."""
    if not (_valid(record.trial_ms) and _valid(record.host_ms)) or len(record.trial_ms) != len(
        record.host_ms
    ):
        return Finding("timing_contradicted", "malformed trial times", "reject")
    if record.timer != reference.timer:
        detail = f"timed with {record.timer!r}, the reference with {reference.timer!r}"
        return Finding("timing_contradicted", detail, "reject")
    least = least_trials(reference, config, room)
    if record.trials < least:
        detail = f"{record.trials} timed trials where at least {least} were due"
        return Finding("timing_contradicted", detail, "reject")
    for index, (timer_ms, host_ms) in enumerate(zip(record.trial_ms, record.host_ms)):
        if timer_ms > host_ms * 1.05 + EVENT_SLACK_MS:
            detail = f"trial {index}: {timer_ms:.4g} ms timed inside {host_ms:.4g} ms of wall time"
            return Finding("timing_contradicted", detail, "reject")
    found = [
        finding
        for finding in (
            _wall_clock_contradiction(record, wall_s, reference, config),
            check_timer_gap(record, reference),
        )
        if finding is not None
    ]
    rejecting = [finding for finding in found if finding.severity == "reject"]
    return (rejecting or found or [None])[0]


def _wall_clock_contradiction(
    record: LoopRecord, wall_s: float, reference: LoopRecord, config: EvalConfig
) -> Finding | None:
    """The wall-clock check of the module's docstring: the phase longer than the trials and
    the loop's work account for (rejecting on a GPU, flagging on the CPU), or shorter than
    the trials (rejecting)."""
    expected = expected_phase_s(record, reference, config.warmup_ms)
    factor, slack = WALL_TOLERANCE.get(reference.timer, WALL_TOLERANCE["perf_counter"])
    allowed = factor * expected + slack
    reported = sum(record.host_ms) / 1e3
    if wall_s < SHORT_FACTOR * reported - SHORT_SLACK_S:
        detail = f"{reported:.3f} s of reported trials in a {wall_s:.3f} s timing phase"
        return Finding("timing_contradicted", detail, "reject")
    if wall_s > allowed:
        detail = (
            f"the timing phase took {wall_s:.3f} s by the evaluator's clock; the reported "
            f"trials and the loop's overheads account for {expected:.3f} s "
            f"(tolerance {factor:g}x + {slack:g} s)"
        )
        # On the CPU a loaded machine can stretch the wall clock past any fixed tolerance:
        # there the contradiction flags (the speedup is not counted) rather than rejects.
        severity = "reject" if reference.timer == "cuda_events" else "flag"
        return Finding("timing_contradicted", detail, severity)
    return None


def _findings(report: dict) -> list[Finding]:
    """The findings the candidate's process reported, those well formed."""
    findings = []
    for item in report.get("findings") or []:
        if (
            isinstance(item, dict)
            and isinstance(item.get("name"), str)
            and isinstance(item.get("detail"), str)
            and item.get("severity") in ("flag", "reject")
        ):
            findings.append(Finding(item["name"], item["detail"][:600], item["severity"]))
    return findings


def _compile_counts(value: Any) -> dict[str, float]:
    """The Triton compile counts of a report (untrusted): known keys with numbers only."""
    if not isinstance(value, dict):
        return {}
    return {
        key: float(value[key])
        for key in ("kernels", "cache_hits", "seconds")
        if type(value.get(key)) in (int, float) and math.isfinite(value[key])
    }


def _failure_kind(value: Any) -> FailureKind:
    try:
        return FailureKind(value)
    except ValueError:
        return FailureKind.RUNTIME_ERROR


def _record(report: dict) -> LoopRecord | None:
    try:
        record = LoopRecord.from_dict(report["timing"])
        record.trial_ms = [float(t) for t in record.trial_ms]
        record.host_ms = [float(t) for t in record.host_ms]
        record.timer = str(record.timer)
        record.pool_s, record.setup_s, record.loop_s = (
            float(record.pool_s),
            float(record.setup_s),
            float(record.loop_s),
        )
    except (KeyError, TypeError, ValueError):
        return None
    return record


def baseline_result(
    problem: Problem, candidate_hash: str, config: EvalConfig, device: str, timings: dict[str, dict]
) -> EvalResult:
    """A result not yet judged, holding the reference's timings (and torch.compile's)."""
    result = EvalResult(
        problem_hash=problem.content_hash,
        candidate_hash=candidate_hash,
        device=device,
        torch_version=torch.__version__,
    )
    result.atol, result.rtol = config.tolerance_for("float32")
    eager = timings["eager"]
    result.reference = TimingStats(**eager["stats"])
    result.timer = result.reference.timer
    if eager.get("unstable"):
        result.unstable.append("reference")
    if "compile" in timings:
        result.compiled_reference = TimingStats(**timings["compile"]["stats"])
        if timings["compile"].get("unstable"):
            result.unstable.append("compile")
    return result


def compiled_reference_verdict(
    problem: Problem, candidate_hash: str, config: EvalConfig, device: str, timings: dict[str, dict]
) -> EvalResult:
    """The verdict on torch.compile of the reference (a candidate autoprofiler wrote itself)
    from the trusted process alone: correct when its outputs matched the reference's on every
    seed of its ``check``, timed by the compile baseline's trials."""
    result = baseline_result(problem, candidate_hash, config, device, timings)
    compiled = timings["compile"]
    check = compiled.get("check") or {}
    result.compiled = True
    result.max_abs_diff = check.get("max_abs_diff")
    result.mean_abs_diff = check.get("mean_abs_diff")
    if check.get("kind") is not None or not check.get("seeds"):
        result.failure_kind = _failure_kind(str(check.get("kind") or "wrong_values"))
        seed = f" (seed {check['seed']})" if "seed" in check else ""
        result.failure_message = f"torch.compile of the reference{seed}: " + str(
            check.get("message") or "its outputs were not compared"
        )
        return result
    result.correctness_trials = int(check["seeds"])
    result.candidate = result.compiled_reference
    result.timed_s = sum(LoopRecord.from_dict(compiled["record"]).trial_ms) / 1e3
    if "compile" in result.unstable:
        result.unstable.append("candidate")
    result.correct = True
    return result


class Verdict:
    """The trusted judgement of one candidate run from its report and the reference process."""

    def __init__(
        self,
        problem: Problem,
        candidate_hash: str,
        config: EvalConfig,
        reference: ProblemReference,
        timings: dict[str, dict],
        seeds: TrialSeeds,
        output_dir: Path,
        slab_id: str | None = None,
        room: float = 1.0,
    ) -> None:
        self.config = config
        self.reference = reference
        self.output_dir = output_dir  # where the run's outputs lie when not in a slab
        self.slab_id = slab_id  # the GPU slab the outputs were handed over in, if any
        self.room = room  # the share of free GPU memory that slab left the candidate
        self.timings = timings
        self.seeds = seeds
        self.result = baseline_result(problem, candidate_hash, config, reference.device, timings)
        self.comparing_s = 0.0  # spent in the reference process judging the outputs

    def _compare(self, items: list[dict], slab_id: str | None = None) -> dict:
        """The reference process's answers for ``items`` (its time added to ``comparing_s``)."""
        began = time.perf_counter()
        try:
            return self.reference.judge(items, self._judge_limit(), slab_id)
        finally:
            self.comparing_s += time.perf_counter() - began

    def _timed_failure(self, answer: dict) -> FailureKind:
        """A timed call's wrong output: a cheat (its outputs are not what it computes when
        checked), unless it is off by a few tolerances only, as its correctness trials could
        have been on other inputs: then wrong values."""
        atol, rtol = self.result.atol, self.result.rtol
        edge = at_tolerance_edge(answer, atol, rtol)
        return FailureKind.WRONG_VALUES if edge else FailureKind.CHEAT

    def fail(self, kind: FailureKind, message: str) -> EvalResult:
        self.result.correct = False
        self.result.failure_kind = kind
        self.result.failure_message = message[:600]
        self.result.apply_rejections()
        return self.result

    def judge(self, report: dict, timing_phase_s: float | None, asked: list[int]) -> EvalResult:
        """The verdict; the candidate's process is gone by now."""
        result = self.result
        result.compiled = bool(report.get("compiled"))
        result.settings = (
            {str(k): str(v) for k, v in (report.get("settings") or {}).items()}
            if isinstance(report.get("settings"), dict)
            else {}
        )
        for finding in _findings(report):
            result.add_finding(finding)
        result.triton_compiles = _compile_counts(report.get("triton_compiles"))
        outputs = report.get("outputs") if isinstance(report.get("outputs"), dict) else {}
        failed_at = report.get("stage") if report.get("failure_kind") else None
        if failed_at is not None:
            failure = (_failure_kind(report["failure_kind"]), str(report.get("failure_message")))
            if failed_at not in ("timing", "other_shape"):
                return self.fail(*failure)
        # The correctness trials were all handed over: judge them first, whatever came later.
        items = self._items(outputs, asked if failed_at is None else [], failed_at is None)
        try:
            answers = self._compare(items, self.slab_id)
        except ReferenceError as exc:
            return self.fail(FailureKind.REFERENCE_ERROR, str(exc))
        wrong = self._judge_correctness(answers)
        if wrong is not None:
            return wrong
        if failed_at == "timing":
            return self.fail(*failure)
        if failed_at == "other_shape":
            if self._other_shape_counts():
                return self._fail_at_other_shape(*failure)
            return self._judge_timing(answers, report, timing_phase_s, [])
        return self._judge_timing(answers, report, timing_phase_s, asked)

    def _judge_limit(self) -> float:
        return self.config.run_timeout_s

    def _items(self, outputs: dict, asked: list[int], include_other: bool) -> list[dict]:
        def where(name: str, slot: str) -> dict:
            """Where this item lies, whatever the candidate said about places: its own slot of
            the slab when the slab has one, else its file in the output folder; with what the
            candidate told it wrote there."""
            value = outputs.get(name)
            told = value.get("told") if isinstance(value, dict) else None
            place = {"path": str(output_path(self.output_dir, name)), "told": told}
            return {**place, "slot": slot} if self.slab_id is not None else place

        items = [
            {"name": f"correctness-{i}", "seed": seed, "correctness": True,
             **where(f"correctness-{i}", f"correctness-{i}")}
            for i, seed in enumerate(self.seeds.correctness)
        ]  # fmt: skip
        items += [
            {"name": f"timed-{j}", "seed": self.seeds.pool_seed(j),
             **where(f"timed-{j}", f"timed#{k}")}
            for k, j in enumerate(asked)
        ]  # fmt: skip
        if include_other:
            items.append(
                {
                    "name": "other_shape",
                    "seed": self.seeds.other_shape,
                    "other_shape": True,
                    **where("other_shape", "other_shape"),
                }
            )
        return items

    def _other_shape_counts(self) -> bool:
        item = {
            "name": "other_shape",
            "seed": self.seeds.other_shape,
            "path": "<not handed over>",
            "other_shape": True,
        }
        try:
            answer = self._compare([item])["items"]["other_shape"]
        except ReferenceError:
            return True
        return answer.get("kind") != "skipped"

    def _fail_at_other_shape(self, kind: FailureKind, message: str) -> EvalResult:
        self.result.add_finding(
            Finding(
                "shape_specialized", "correct at the problem's shapes, not at another", "reject"
            )
        )
        return self.fail(kind, f"at another input shape: {message}")

    def _judge_correctness(self, answers: dict) -> EvalResult | None:
        """The failed result when a correctness trial is wrong (None when all are right)."""
        result, items = self.result, answers["items"]
        if answers.get("constant_output"):
            result.add_finding(
                Finding("constant_output", "the same output for different inputs", "reject")
            )
        for i in range(len(self.seeds.correctness)):
            answer = items[f"correctness-{i}"]
            result.max_abs_diff = max(result.max_abs_diff or 0.0, answer.get("max_abs_diff", 0.0))
            result.mean_abs_diff = max(
                result.mean_abs_diff or 0.0, answer.get("mean_abs_diff", 0.0)
            )
            if answer["kind"] is not None:
                return self.fail(_answer_kind(answer), f"trial {i}: {answer.get('message', '')}")
            result.correctness_trials = i + 1
        return None

    def _judge_timing(
        self, answers: dict, report: dict, timing_phase_s: float | None, asked: list[int]
    ) -> EvalResult:
        result, items = self.result, answers["items"]
        record = _record(report)
        if record is None or timing_phase_s is None:
            return self.fail(FailureKind.CHEAT, "no timing was handed over")
        reference = LoopRecord.from_dict(self.timings["eager"]["record"])
        log.debug(
            "trials (ms): candidate %s, host %s, tail %s, %d allocations; "
            "reference %s, host %s, tail %s, %d allocations",
            _rounded(record.trial_ms), _rounded(record.host_ms), _rounded(record.tail_ms),
            record.device_allocs, _rounded(reference.trial_ms), _rounded(reference.host_ms),
            _rounded(reference.tail_ms), reference.device_allocs,
        )  # fmt: skip
        contradiction = check_timing(record, timing_phase_s, reference, self.config, self.room)
        result.timing_phase_s = timing_phase_s
        if contradiction is not None:
            result.add_finding(contradiction)
            if contradiction.severity == "reject":
                detail = f"{contradiction.name}: {contradiction.detail}"
                return self.fail(FailureKind.CHEAT, detail)
        for j in asked:
            answer = items[f"timed-{j}"]
            if answer["kind"] is not None:
                message = f"the output of timed call {j} is wrong: {answer.get('message', '')}"
                return self.fail(self._timed_failure(answer), message)
        result.timed_outputs_checked = len(asked)
        other = items.get("other_shape", {"kind": "skipped"})
        if other["kind"] not in (None, "skipped"):
            return self._fail_at_other_shape(_answer_kind(other), other.get("message", ""))
        result.candidate = trial_stats(record)
        result.timed_s = sum(record.trial_ms) / 1e3
        if is_unstable(result.candidate):
            result.unstable.append("candidate")
        result.correct = True
        result.apply_rejections()
        return result


def _rounded(times: list[float]) -> list[float]:
    return [round(t, 4) for t in times]


def at_tolerance_edge(answer: dict, atol: float, rtol: float) -> bool:
    """Whether a wrong output is off by no more than a few tolerances (finite values): the
    numerics of an honest kernel at the edge of the tolerance, not a stale or empty output."""
    diff = answer.get("max_abs_diff")
    return (
        answer.get("kind") == "wrong_values"
        and isinstance(diff, (int, float))
        and math.isfinite(diff)
        and diff <= TOLERANCE_EDGE * max(atol, rtol)
    )


def _answer_kind(answer: dict) -> FailureKind:
    if answer["kind"] == "missing":
        return FailureKind.RUNTIME_ERROR
    return _failure_kind(answer["kind"])
