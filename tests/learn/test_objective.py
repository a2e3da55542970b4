"""The objective and the acceptance rule, on outcomes written by hand (no evaluation)."""

from __future__ import annotations

import math

import pytest

from autoprofiler.evaluate.result import EvalResult, Finding, TimingStats
from autoprofiler.learn import Objective, ProblemOutcome, TreeScore, judge, noise_margin
from autoprofiler.profile.base import Profile
from autoprofiler.rewrite.base import Candidate


def outcome(
    name: str,
    speedup: float | None,
    *,
    candidate: str = "",
    cost_s: float = 1.0,
    spread: float = 1.0,
    flagged: tuple[str, ...] = (),
) -> ProblemOutcome:
    """A correct outcome timed at ``speedup`` (a failure when None), with ``flagged`` findings."""
    timed = speedup is not None
    return ProblemOutcome(
        problem=name,
        problem_hash=f"h-{name}",
        profile_hash="p",
        groups=("static",),
        skipped=(),
        cost_s=cost_s,
        candidate_hash=candidate or f"c-{name}-{speedup}",
        correct=timed,
        speedup=speedup,
        failure="" if timed else "wrong_values: mismatch",
        reference_spread=spread if timed else None,
        candidate_spread=spread if timed else None,
        flagged=flagged,
    )


def test_failures_count_as_the_reference_left_in_place() -> None:
    score = Objective().score([outcome("a", 4.0), outcome("b", None)])
    assert score.value == pytest.approx(2.0)  # sqrt(4 * 1)
    assert (score.fast_1, score.correct_rate) == (0.5, 0.5)


def test_a_correct_but_slower_candidate_counts_its_real_speedup() -> None:
    score = Objective().score([outcome("a", 0.25), outcome("b", 1.0)])
    assert score.geomean_speedup == pytest.approx(0.5)
    assert score.fast_1 == 0.0


def test_the_objective_is_configurable() -> None:
    outcomes = [outcome("a", 2.0), outcome("b", 0.5), outcome("c", None)]
    assert Objective("fast_1").score(outcomes).value == pytest.approx(1 / 3)
    assert Objective("correct_rate").score(outcomes).value == pytest.approx(2 / 3)
    assert Objective(failure_speedup=0.5).score(outcomes).value == pytest.approx(0.5 ** (1 / 3))
    with pytest.raises(ValueError, match="unknown objective"):
        Objective("fastest")


def test_scores_round_trip_through_json() -> None:
    score = Objective().score([outcome("a", 1.5), outcome("b", None)])
    again = TreeScore.from_dict(score.to_dict())
    assert again == score
    assert again.outcomes[1].failure == "wrong_values: mismatch"


def test_the_margin_is_the_floor_when_no_candidate_changed() -> None:
    old = Objective().score([outcome("a", 2.0, spread=1.5)])
    assert noise_margin(old, old, 0.01) == 0.01


def test_the_margin_grows_with_the_timing_spread_of_changed_problems() -> None:
    old = Objective().score([outcome("a", 1.0, spread=1.2), outcome("b", 1.0, spread=1.2)])
    new = Objective().score([outcome("a", 1.1, spread=1.2), outcome("b", 1.0, spread=1.2)])
    width = math.hypot(math.log(1.2), math.log(1.2))
    expected = math.expm1(width * math.sqrt(2) / 2)  # two timed evaluations changed, 2 problems
    assert noise_margin(new, old, 0.01) == pytest.approx(expected)
    assert noise_margin(new, old, 0.5) == 0.5


def test_one_wild_timing_does_not_blow_up_the_margin() -> None:
    steady = [outcome(n, 1.0, spread=1.02) for n in "abcde"]
    old = Objective().score([*steady, outcome("f", 1.0, spread=400.0)])
    new = Objective().score([outcome("a", 1.2, spread=1.02), *steady[1:], old.outcomes[-1]])
    assert noise_margin(new, old, 0.0) < 0.02


def test_judge_accepts_better_rejects_worse_and_breaks_ties_by_cost() -> None:
    objective = Objective(noise_floor=0.05)
    base = objective.score([outcome("a", 1.0, cost_s=2.0)])
    better = objective.score([outcome("a", 1.2, cost_s=3.0)])
    noise = objective.score([outcome("a", 1.03, cost_s=3.0)])
    cheaper_tie = objective.score([outcome("a", 0.98, cost_s=1.0)])
    worse = objective.score([outcome("a", 0.5, cost_s=0.1)])
    assert judge(better, base, objective).accepted
    verdict = judge(noise, base, objective)
    assert not verdict.accepted and "no better within noise" in verdict.reason
    verdict = judge(cheaper_tie, base, objective)
    assert verdict.accepted and "cheaper" in verdict.reason
    verdict = judge(worse, base, objective)
    assert not verdict.accepted and verdict.reason.startswith("worse")


def test_a_wide_margin_is_a_ratio_so_a_far_worse_tree_is_never_a_cheaper_tie() -> None:
    objective = Objective()
    base = objective.score([outcome("a", 1.0, cost_s=2.0, spread=3.0)])
    worse = objective.score([outcome("a", 1 / 12, cost_s=0.0, spread=3.0)])
    within = objective.score([outcome("a", 0.6, cost_s=0.0, spread=3.0)])
    verdict = judge(worse, base, objective)
    assert verdict.margin > 1.0  # a linear band of this width would hold every lower score
    assert not verdict.accepted and verdict.reason.startswith("worse")
    verdict = judge(within, base, objective)
    assert verdict.accepted and "cheaper" in verdict.reason
    higher = objective.score([outcome("a", 1.0 * (1 + verdict.margin) * 1.01, spread=3.0)])
    assert judge(higher, base, objective).reason.startswith("better")


def test_a_cost_weight_discounts_the_objective_by_the_profiling_seconds() -> None:
    cheap = [outcome("a", 2.0, cost_s=0.0), outcome("b", 2.0, cost_s=0.0)]
    dear = [outcome("a", 2.4, cost_s=20.0), outcome("b", 2.4, cost_s=20.0)]
    assert Objective().score(dear).value > Objective().score(cheap).value
    weighted = Objective(cost_weight=0.01)
    assert weighted.score(cheap).value == pytest.approx(2.0)
    assert weighted.score(dear).value == pytest.approx(2.4 * math.exp(-0.2))
    assert weighted.score(dear).value < weighted.score(cheap).value  # 20 s must buy > 22 %
    assert weighted.score(dear).geomean_speedup == pytest.approx(2.4)  # reported undiscounted
    assert weighted.score(dear).objective == "geomean_speedup x exp(-0.01/s)"
    assert "cost_weight" not in Objective().to_dict()  # settings stored before it still match
    assert Objective(**weighted.to_dict()) == weighted
    for bad in (-0.1, math.inf):
        with pytest.raises(ValueError, match="cost weight"):
            Objective(cost_weight=bad)


def _flagged_outcomes() -> list[ProblemOutcome]:
    """Speedups 2.0 and 5.0 (flagged: side_channel) and a failure."""
    return [
        outcome("a", 2.0),
        outcome("b", 5.0, flagged=("side_channel",)),
        outcome("c", None),
    ]


def test_a_flagged_candidate_counts_as_a_failure_unless_count_flagged() -> None:
    outcomes = _flagged_outcomes()
    flagged = outcomes[1]
    strict = Objective(failure_speedup=0.5)
    lenient = Objective(failure_speedup=0.5, count_flagged=True)
    assert strict.speedup(flagged) == 0.5 and strict.counted_speedup(flagged) is None
    assert lenient.speedup(flagged) == 5.0
    score = strict.score(outcomes)
    assert score.value == pytest.approx((2.0 * 0.5 * 0.5) ** (1 / 3))
    assert score.geomean_speedup == pytest.approx((2.0 * 0.5 * 0.5) ** (1 / 3))
    assert score.fast_1 == pytest.approx(1 / 3)
    assert score.correct_rate == pytest.approx(2 / 3)  # still correct
    assert score.flagged == 1 and "1 flagged" in score.summary()
    counted = lenient.score(outcomes)
    assert counted.value == pytest.approx((2.0 * 5.0 * 0.5) ** (1 / 3))
    assert counted.fast_1 == pytest.approx(2 / 3) and counted.correct_rate == pytest.approx(2 / 3)
    assert Objective("fast_1").score(outcomes).value == pytest.approx(1 / 3)
    assert Objective("fast_1", count_flagged=True).score(outcomes).value == pytest.approx(2 / 3)
    # A failure's flags do not make it a flagged candidate.
    assert Objective().score([outcome("d", None, flagged=("side_channel",))]).flagged == 0


def test_count_flagged_is_a_setting_stored_only_when_set() -> None:
    assert "count_flagged" not in Objective().to_dict()  # settings stored before it still match
    lenient = Objective(count_flagged=True)
    assert lenient.to_dict()["count_flagged"] is True
    assert Objective(**lenient.to_dict()) == lenient


def test_an_outcome_names_the_flag_findings_of_its_evaluation() -> None:
    timing = TimingStats(2.0, 2.0, 2.0, 2.0, 2.0, 2.0, 5, "perf_counter")
    result = EvalResult(
        problem_hash="h",
        candidate_hash="c",
        correct=True,
        reference=timing,
        candidate=TimingStats(1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 5, "perf_counter"),
        findings=[
            Finding("side_channel", "work on a side stream"),
            Finding("patched_timer", "replaced torch.cuda.Event", "reject"),
            Finding("fallback_path", "try/except to the reference's ops"),
        ],
    )
    profile = Profile(problem_hash="h", groups=["static"], cost_s=0.2)
    candidate = Candidate(source="class ModelNew: ...", producer="test")
    made = ProblemOutcome.of("p", profile, candidate, result)
    assert made.flagged == ("side_channel", "fallback_path")
    assert made.is_flagged and made.speedup == pytest.approx(2.0)
    assert Objective().speedup(made) == 1.0
    result.apply_rejections()  # the reject finding fails it: no longer a flagged candidate
    rejected = ProblemOutcome.of("p", profile, candidate, result)
    assert rejected.flagged == ("side_channel", "fallback_path") and not rejected.is_flagged
    assert ProblemOutcome.of("p", profile, candidate, None).flagged == ()


def test_flags_round_trip_and_outcomes_stored_before_them_load() -> None:
    flagged = outcome("b", 5.0, flagged=("side_channel",))
    data = flagged.to_dict()
    assert data["flagged"] == ["side_channel"]
    assert ProblemOutcome.from_dict(data) == flagged
    del data["flagged"]
    old = ProblemOutcome.from_dict(data)
    assert old.flagged == () and Objective().speedup(old) == 5.0
    score = Objective().score(_flagged_outcomes())
    assert TreeScore.from_dict(score.to_dict()) == score
    assert score.to_dict()["flagged"] == 1
