"""What a profiling tree is worth: per-problem outcomes, the score over them, and the verdict.

The default objective is the geometric-mean speedup over eager PyTorch across the training
problems, with every failure (no candidate, a candidate that does not compile, is wrong, or
crashes) counted as 1.0x: a failed rewrite leaves the reference in place, so the user's program
is exactly as fast as before, no slower and no faster. A correct but slower candidate counts
its real speedup (below 1.0x): the learner must see that a profile led the rewriter astray.
``fast_1`` (the share of problems correct and faster than eager) and the correctness rate are
reported beside it and may be chosen as the objective instead.

A flagged candidate (correct, but with a ``flag`` finding of the evaluator: work on a side
stream, a fallback to the reference's ops, ...) is a suspected reward hack: it counts as a
failure in the geomean, ``fast_1`` and ``fast_p`` (still correct in the correctness rate)
unless ``Objective.count_flagged`` is set. ``Objective.counted_speedup`` is that one rule. A
builtin rewriter's candidates (the rule rewriter's: torch.compile builds the reference ``Model``
by design) are autoprofiler's own code, not a model's, and carry no flags here.

Quality against profiling time: with ``cost_weight`` w (per second), the objective is
multiplied by ``exp(-w * s)``, s being the tree's mean profiling seconds per problem. A tree
that profiles 10 s longer must then be ``exp(10 w)`` times better (w = 0.01: about 10 % more
geomean speedup) to win; learning at several weights traces the quality-cost Pareto front.

Acceptance (``judge``): a tree replaces the incumbent when its objective is higher by more than
a relative noise margin; within the margin (a tie) the cheaper tree wins (lower mean profiling
cost per problem). The margin is the larger of a floor (1 % by default) and the timing noise
measured in the evaluations themselves (see ``noise_margin``).
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field, replace
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

from autoprofiler.evaluate.result import counted_speedup, flag_names

if TYPE_CHECKING:
    from autoprofiler.evaluate.result import EvalResult
    from autoprofiler.profile.base import Profile
    from autoprofiler.rewrite.base import Candidate

# Equal means within this absolute slack (float round-off, not noise).
_EPSILON = 1e-12
_FAILURE_CHARS = 300


@dataclass(frozen=True)
class ProblemOutcome:
    """What one tree gave one problem: the profile's cost, the candidate and its verdict.

    ``speedup`` is over eager PyTorch (None unless correct and timed). ``reference_spread`` and
    ``candidate_spread`` are the timings' interquartile ratios (p75/p25; None when untimed).
    ``flagged`` names the evaluator's ``flag`` findings on the candidate.
    """

    problem: str
    problem_hash: str
    profile_hash: str
    groups: tuple[str, ...]
    skipped: tuple[str, ...]
    cost_s: float
    candidate_hash: str = ""
    correct: bool = False
    speedup: float | None = None
    speedup_vs_compile: float | None = None
    failure: str = ""
    reference_spread: float | None = None
    candidate_spread: float | None = None
    flagged: tuple[str, ...] = ()

    @classmethod
    def of(
        cls,
        problem: str,
        profile: Profile,
        candidate: Candidate,
        result: EvalResult | None,
        profile_hash: str | None = None,
        builtin: bool = False,
    ) -> ProblemOutcome:
        """The outcome of ``candidate`` (evaluated as ``result``; None when it was unusable);
        ``profile_hash``: the profile's ``content_hash`` when the caller has it already;
        ``builtin``: a builtin rewriter wrote it, and the evaluator's flags are not kept (they
        suspect code a model wrote, see ``Rewriter.builtin``)."""
        base = cls(
            problem=problem,
            problem_hash=profile.problem_hash,
            profile_hash=profile.content_hash if profile_hash is None else profile_hash,
            groups=tuple(profile.groups),
            skipped=tuple(s.group for s in profile.skipped),
            cost_s=profile.cost_s,
        )
        if result is None:
            failure = f"rewriter: {candidate.failure or 'no candidate'}"
            return replace(base, failure=failure[:_FAILURE_CHARS])
        failure = ""
        if not result.correct:
            kind = result.failure_kind.value if result.failure_kind else "failed"
            failure = f"{kind}: {result.failure_message}".strip().rstrip(":")[:_FAILURE_CHARS]
        return replace(
            base,
            candidate_hash=candidate.content_hash,
            correct=result.correct,
            speedup=result.speedup,
            speedup_vs_compile=result.speedup_vs_compile,
            failure=failure,
            reference_spread=result.reference.spread if result.reference else None,
            candidate_spread=result.candidate.spread if result.candidate else None,
            flagged=() if builtin else flag_names(result.findings),
        )

    @property
    def is_flagged(self) -> bool:
        """A flagged candidate: correct, with at least one flag finding."""
        return self.correct and bool(self.flagged)

    @property
    def timing_noise(self) -> float | None:
        """Relative width of this outcome's speedup, in log space, from both timings' spreads.

        ``sqrt(log(ref spread)^2 + log(candidate spread)^2)``; None when it was not timed.
        """
        spreads = [s for s in (self.reference_spread, self.candidate_spread) if s is not None]
        if self.speedup is None or len(spreads) < 2:
            return None
        if not all(math.isfinite(s) and s >= 1 for s in spreads):
            return None
        return math.hypot(*(math.log(s) for s in spreads))

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["groups"] = list(self.groups)
        data["skipped"] = list(self.skipped)
        data["flagged"] = list(self.flagged)
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ProblemOutcome:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["groups"] = tuple(known.get("groups", ()))
        known["skipped"] = tuple(known.get("skipped", ()))
        known["flagged"] = tuple(known.get("flagged", ()))
        return cls(**known)


def geomean_speedup(objective: Objective, outcomes: Sequence[ProblemOutcome]) -> float:
    """Geometric mean of the speedups each outcome counts for (``Objective.speedup``)."""
    return math.exp(statistics.fmean(math.log(objective.speedup(o)) for o in outcomes))


def fast_p(
    outcomes: Sequence[ProblemOutcome], threshold: float, objective: Objective | None = None
) -> float:
    """KernelBench ``fast_p``: the share of problems whose counted speedup
    (``Objective.counted_speedup``) is more than ``threshold`` times eager."""
    objective = objective or Objective()
    return statistics.fmean(
        (s := objective.counted_speedup(o)) is not None and s > threshold for o in outcomes
    )


def fast_1(objective: Objective, outcomes: Sequence[ProblemOutcome]) -> float:
    """Share of problems whose candidate counts as faster than eager (KernelBench fast_1)."""
    return fast_p(outcomes, 1.0, objective)


def correct_rate(objective: Objective, outcomes: Sequence[ProblemOutcome]) -> float:
    """Share of problems whose candidate is correct (flagged ones included)."""
    return statistics.fmean(o.correct for o in outcomes)


def flagged_count(outcomes: Iterable[ProblemOutcome]) -> int:
    """How many outcomes are flagged candidates: correct, with at least one flag finding."""
    return sum(o.is_flagged for o in outcomes)


ObjectiveFunction = Callable[["Objective", Sequence[ProblemOutcome]], float]
OBJECTIVES: Mapping[str, ObjectiveFunction] = MappingProxyType(
    {"geomean_speedup": geomean_speedup, "fast_1": fast_1, "correct_rate": correct_rate}
)


@dataclass(frozen=True)
class TreeScore:
    """A tree's score on a set of problems: the objective, the reported metrics, the outcomes.

    ``profiles`` (the replayed profile per problem hash) are kept in memory for feedback to a
    proposer; they are not part of the JSON record.
    """

    objective: str
    value: float
    geomean_speedup: float
    fast_1: float
    correct_rate: float
    mean_cost_s: float
    max_cost_s: float
    outcomes: tuple[ProblemOutcome, ...]
    profiles: Mapping[str, Profile] = field(
        default_factory=dict, compare=False, repr=False, hash=False
    )

    @property
    def problems(self) -> int:
        return len(self.outcomes)

    @property
    def flagged(self) -> int:
        """How many outcomes are flagged (see ``flagged_count``)."""
        return flagged_count(self.outcomes)

    def to_dict(self) -> dict[str, Any]:
        """The fields (``profiles`` left out) and, for readers, the ``flagged`` count."""
        data = {k: getattr(self, k) for k in self.__dataclass_fields__ if k != "profiles"}
        data["outcomes"] = [o.to_dict() for o in self.outcomes]
        data["flagged"] = self.flagged
        return data

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TreeScore:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["outcomes"] = tuple(ProblemOutcome.from_dict(o) for o in known.get("outcomes", ()))
        return cls(**known)

    def summary(self) -> str:
        """One line: the objective and the reported metrics (flagged candidates when any)."""
        flagged = f", {self.flagged} flagged" if self.flagged else ""
        return (
            f"{self.objective} {self.value:.4g} (geomean {self.geomean_speedup:.3f}x, "
            f"fast_1 {self.fast_1:.0%}, correct {self.correct_rate:.0%}, "
            f"cost {self.mean_cost_s:.3g} s/problem, {self.problems} problems{flagged})"
        )


@dataclass(frozen=True)
class Verdict:
    """Whether a tree replaces the incumbent, why, and the relative margin that was applied."""

    accepted: bool
    reason: str
    margin: float


@dataclass(frozen=True)
class Objective:
    """How trees are scored and compared.

    ``name`` picks the objective from ``OBJECTIVES``; ``failure_speedup`` is what a failed
    problem counts as (1.0: the reference stays in place); ``noise_floor`` is the smallest
    relative margin an improvement must beat; ``cost_weight`` discounts the objective by
    ``exp(-cost_weight * mean profiling seconds per problem)`` (0: profiling time only breaks
    ties); ``count_flagged`` counts a flagged candidate at its speedup instead of as a failure.
    """

    name: str = "geomean_speedup"
    failure_speedup: float = 1.0
    noise_floor: float = 0.01
    cost_weight: float = 0.0
    count_flagged: bool = False

    def __post_init__(self) -> None:
        if self.name not in OBJECTIVES:
            raise ValueError(f"unknown objective {self.name!r} (known: {', '.join(OBJECTIVES)})")
        if self.failure_speedup <= 0 or self.noise_floor < 0:
            raise ValueError("failure_speedup must be > 0 and noise_floor >= 0")
        if not 0 <= self.cost_weight < math.inf:
            raise ValueError(f"cost weight must be >= 0 per second, got {self.cost_weight}")

    @property
    def label(self) -> str:
        """The objective's name, with its cost discount when there is one."""
        if not self.cost_weight:
            return self.name
        return f"{self.name} x exp(-{self.cost_weight:g}/s)"

    def to_dict(self) -> dict[str, Any]:
        """The settings; ``cost_weight`` and ``count_flagged`` only when set, so that settings
        stored before they existed still match."""
        data = asdict(self)
        for name in ("cost_weight", "count_flagged"):
            if not data[name]:
                del data[name]
        return data

    def counted_speedup(self, outcome: ProblemOutcome) -> float | None:
        """``outcome``'s own speedup when it counts as one (see ``counted_speedup``), else
        None."""
        return counted_speedup(
            outcome.correct, outcome.speedup, outcome.flagged, self.count_flagged
        )

    def speedup(self, outcome: ProblemOutcome) -> float:
        """The speedup ``outcome`` counts for: its own when it counts as one, else the failure
        speedup."""
        counted = self.counted_speedup(outcome)
        return self.failure_speedup if counted is None else counted

    def score(
        self, outcomes: Sequence[ProblemOutcome], profiles: Mapping[str, Profile] | None = None
    ) -> TreeScore:
        """The score of a tree from its outcomes (at least one)."""
        if not outcomes:
            raise ValueError("a score needs at least one problem")
        costs = [o.cost_s for o in outcomes]
        discount = math.exp(-self.cost_weight * statistics.fmean(costs))
        return TreeScore(
            objective=self.label,
            value=OBJECTIVES[self.name](self, outcomes) * discount,
            geomean_speedup=geomean_speedup(self, outcomes),
            fast_1=fast_1(self, outcomes),
            correct_rate=correct_rate(self, outcomes),
            mean_cost_s=statistics.fmean(costs),
            max_cost_s=max(costs),
            outcomes=tuple(outcomes),
            profiles=dict(profiles or {}),
        )


def noise_margin(new: TreeScore, old: TreeScore, floor: float) -> float:
    """The relative margin by which ``new`` must beat ``old`` to count as better.

    Only problems whose candidate changed can move the score. Each timed evaluation carries a
    relative width ``w`` (its ``timing_noise``: the interquartile ratios of the reference and
    candidate timings, combined in log space); the typical width ``w~`` is their median over
    both scores (robust to one wild outlier). Independent errors on the ``m`` timed evaluations
    of changed problems move the mean log speedup of ``n`` problems by about
    ``w~ * sqrt(m) / n``, so the margin is ``max(floor, exp(w~ * sqrt(m) / n) - 1)``. The
    interquartile ratio is wider than the error of a median of many trials: the margin is
    deliberately conservative, since it must also cover drift between separate evaluations.
    """
    old_by_problem = {o.problem_hash: o for o in old.outcomes}
    timed_changed = 0
    for outcome in new.outcomes:
        before = old_by_problem.get(outcome.problem_hash)
        if before is None or before.candidate_hash != outcome.candidate_hash:
            pair = (outcome, before) if before is not None else (outcome,)
            timed_changed += sum(o.timing_noise is not None for o in pair)
    widths = [w for o in (*new.outcomes, *old.outcomes) if (w := o.timing_noise) is not None]
    if not timed_changed or not widths:
        return floor
    problems = max(new.problems, old.problems, 1)
    measured = math.expm1(statistics.median(widths) * math.sqrt(timed_changed) / problems)
    return max(floor, measured)


def judge(new: TreeScore, old: TreeScore, objective: Objective) -> Verdict:
    """Accept ``new`` over ``old`` (both scored under the same budget) or say why not.

    Better by more than the margin: accepted. Within the margin: accepted only when cheaper
    (lower mean profiling cost per problem). Otherwise rejected. The margin is a ratio (scores
    are non-negative): within it means between ``old / (1 + margin)`` and
    ``old * (1 + margin)``, so however wide the noise, a tree far enough below is still worse.
    """
    margin = noise_margin(new, old, objective.noise_floor)
    upper = old.value * (1 + margin) + _EPSILON
    lower = old.value / (1 + margin) - _EPSILON
    shown = f"{new.value:.4g} vs {old.value:.4g}, margin {margin:.1%}"
    if new.value > upper:
        return Verdict(True, f"better: {shown}", margin)
    if new.value >= lower:
        if new.mean_cost_s < old.mean_cost_s - _EPSILON:
            cost = f"{new.mean_cost_s:.3g} s vs {old.mean_cost_s:.3g} s per problem"
            return Verdict(True, f"tie within noise ({shown}), cheaper: {cost}", margin)
        return Verdict(False, f"no better within noise ({shown}) and not cheaper", margin)
    return Verdict(False, f"worse: {shown}", margin)
