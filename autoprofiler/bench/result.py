"""What a bench measured, as plain data that round-trips to JSON.

Every configuration (a fixed one, or the tree learned for a budget) is scored on the test
problems through the same rewriter and evaluator; ``ConfigScore`` keeps each problem's outcome.
A table row (``summarize``) reports the correctness rate, ``fast_1`` and ``fast_1.5`` (the share
of problems correct and more than 1x / 1.5x faster than eager), the geometric-mean speedup over
eager and over ``torch.compile`` (a failure counts as the eager reference kept in place: 1.0x
over eager, and eager's own speed against ``torch.compile``), the number of flagged candidates
(correct, with a flag finding: they count as failures in every speedup figure unless the
objective's ``count_flagged`` is set), and the mean profiling seconds and metrics collected per
problem. A fixed configuration runs without a budget; when its most expensive problem costs
more than a budget it is marked as not fitting that budget.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Mapping
from dataclasses import asdict, dataclass, field
from typing import Any

from autoprofiler.evaluate.result import FailureKind
from autoprofiler.learn.objective import Objective, TreeScore, fast_p, geomean_speedup

LEARNED = "learned"
_SLACK_S = 1e-9
_NOT_RECORDED = FailureKind.NOT_RECORDED.value


def budget_label(budget_s: float | None, cost_weight: float = 0.0) -> str:
    """``"20 s"``, or ``"unlimited"`` for None; ``"20 s, cost weight 0.01"`` with a weight."""
    label = "unlimited" if budget_s is None else f"{budget_s:g} s"
    return f"{label}, cost weight {cost_weight:g}" if cost_weight else label


@dataclass(frozen=True)
class ConfigScore:
    """One configuration's outcomes on the test problems.

    ``name`` is a fixed configuration's name or ``"learned"``; ``tree`` its JSON document;
    ``budget_s`` the budget it ran under (None: unlimited); ``metric_counts`` the number of
    metrics its profile held for each problem, in the order of ``score.outcomes``.
    """

    name: str
    tree: dict[str, Any]
    budget_s: float | None
    score: TreeScore
    metric_counts: tuple[int, ...]

    def fits(self, budget_s: float | None) -> bool:
        """Whether every problem's profile cost at most ``budget_s`` (None: unlimited)."""
        return budget_s is None or self.score.max_cost_s <= budget_s + _SLACK_S

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "tree": self.tree,
            "budget_s": self.budget_s,
            "score": self.score.to_dict(),
            "metric_counts": list(self.metric_counts),
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> ConfigScore:
        return cls(
            name=data["name"],
            tree=data["tree"],
            budget_s=data["budget_s"],
            score=TreeScore.from_dict(data["score"]),
            metric_counts=tuple(data["metric_counts"]),
        )


@dataclass(frozen=True)
class CompileBaseline:
    """``torch.compile`` of one test problem's reference against eager: correct or not, and
    its speedup over eager (None unless correct and timed)."""

    correct: bool
    speedup: float | None
    failure: str = ""

    @property
    def program_speedup(self) -> float:
        """What torch.compile gives a user: its speedup when it works, else eager's 1.0x."""
        return self.speedup if self.correct and self.speedup else 1.0


@dataclass(frozen=True)
class Summary:
    """The numbers of one table row (see the module docstring); ``vs_compile`` is None when a
    test problem has no torch.compile baseline. ``flagged`` counts flagged candidates,
    ``incomplete`` problems for which a group of an unlimited configuration was not recorded,
    ``not_recorded`` problems whose evaluation was not among the replayed ones."""

    correct_rate: float
    flagged: int
    fast_1: float
    fast_1_5: float
    geomean_speedup: float
    vs_compile: float | None
    mean_cost_s: float
    max_cost_s: float
    mean_metrics: float
    incomplete: int
    not_recorded: int


def summarize(
    config: ConfigScore,
    compile_baselines: Mapping[str, CompileBaseline],
    objective: Objective | None = None,
) -> Summary:
    """The table row of ``config`` (failures, and flagged candidates unless
    ``objective.count_flagged``, count as ``objective.failure_speedup``)."""
    objective = objective or Objective()
    score = config.score
    speedups = [objective.speedup(o) for o in score.outcomes]
    baselines = [compile_baselines.get(o.problem_hash) for o in score.outcomes]
    vs_compile = None
    if all(b is not None for b in baselines):
        ratios = [s / b.program_speedup for s, b in zip(speedups, baselines) if b is not None]
        vs_compile = math.exp(statistics.fmean(math.log(r) for r in ratios))
    unlimited = config.budget_s is None
    return Summary(
        correct_rate=score.correct_rate,
        flagged=score.flagged,
        fast_1=fast_p(score.outcomes, 1.0, objective),
        fast_1_5=fast_p(score.outcomes, 1.5, objective),
        geomean_speedup=geomean_speedup(objective, score.outcomes),
        vs_compile=vs_compile,
        mean_cost_s=score.mean_cost_s,
        max_cost_s=score.max_cost_s,
        mean_metrics=statistics.fmean(config.metric_counts) if config.metric_counts else 0.0,
        incomplete=sum(bool(o.skipped) for o in score.outcomes) if unlimited else 0,
        not_recorded=sum(o.failure.startswith(_NOT_RECORDED) for o in score.outcomes),
    )


@dataclass(frozen=True)
class TrialPoint:
    """One trial of a learning study: its objective value (None when not scored), the
    incumbent's it was compared with, and whether it was accepted."""

    number: int
    value: float | None
    incumbent: float | None
    accepted: bool


@dataclass(frozen=True)
class BudgetResult:
    """What was learned under one budget (and cost weight, see ``Objective.cost_weight``): the
    study, the learned tree's test outcomes, its training score, the start tree's, and the
    learning curve."""

    budget_s: float | None
    study: str
    learned: ConfigScore
    train_score: TreeScore
    start_train_score: TreeScore
    trials: tuple[TrialPoint, ...]
    stop_reason: str
    cost_weight: float = 0.0

    @property
    def label(self) -> str:
        """The budget, and the cost weight when there is one."""
        return budget_label(self.budget_s, self.cost_weight)

    def to_dict(self) -> dict[str, Any]:
        return {
            "budget_s": self.budget_s,
            "cost_weight": self.cost_weight,
            "study": self.study,
            "learned": self.learned.to_dict(),
            "train_score": self.train_score.to_dict(),
            "start_train_score": self.start_train_score.to_dict(),
            "trials": [asdict(t) for t in self.trials],
            "stop_reason": self.stop_reason,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BudgetResult:
        return cls(
            budget_s=data["budget_s"],
            study=data["study"],
            learned=ConfigScore.from_dict(data["learned"]),
            train_score=TreeScore.from_dict(data["train_score"]),
            start_train_score=TreeScore.from_dict(data["start_train_score"]),
            trials=tuple(TrialPoint(**t) for t in data["trials"]),
            stop_reason=data["stop_reason"],
            cost_weight=data.get("cost_weight", 0.0),
        )


@dataclass(frozen=True)
class TableRow:
    """One row of a budget's table: a configuration, whether it fits the budget, its numbers."""

    config: ConfigScore
    fits: bool
    summary: Summary

    @property
    def name(self) -> str:
        return self.config.name


@dataclass(frozen=True)
class BenchResult:
    """A whole bench: its settings (``spec``), the problems (``names``: key by content hash),
    the split, the torch.compile baselines of the test problems, the fixed configurations'
    test outcomes, and one ``BudgetResult`` per budget. ``stats`` counts the work of the run
    that produced it (rewrites and evaluations asked for and really run)."""

    name: str
    spec: dict[str, Any]
    names: dict[str, str]
    train: tuple[str, ...]
    test: tuple[str, ...]
    compile_baselines: dict[str, CompileBaseline]
    fixed: tuple[ConfigScore, ...]
    budgets: tuple[BudgetResult, ...]
    stats: dict[str, float] = field(default_factory=dict)

    def objective(self) -> Objective:
        return Objective(**self.spec.get("objective", {}))

    def table(self, budget: BudgetResult) -> list[TableRow]:
        """The rows of ``budget``'s table: every fixed configuration, then the learned tree."""
        objective = self.objective()
        baselines = self.compile_baselines
        return [
            TableRow(c, c.fits(budget.budget_s), summarize(c, baselines, objective))
            for c in (*self.fixed, budget.learned)
        ]

    def pareto_front(self) -> list[BudgetResult]:
        """The learned trees that no other learned tree beats on both test quality (geomean
        speedup over eager) and mean profiling seconds per problem, cheapest first; of trees
        learned alike, the first."""
        objective = self.objective()
        points: dict[str, tuple[BudgetResult, float, float]] = {}
        for budget in self.budgets:
            summary = summarize(budget.learned, self.compile_baselines, objective)
            key = repr(budget.learned.tree.get("root"))
            points.setdefault(key, (budget, summary.mean_cost_s, summary.geomean_speedup))

        def beaten(cost: float, quality: float) -> bool:
            return any(
                c <= cost and q >= quality and (c < cost or q > quality)
                for _, c, q in points.values()
            )

        front = [p for p in points.values() if not beaten(p[1], p[2])]
        return [budget for budget, *_ in sorted(front, key=lambda p: (p[1], -p[2]))]

    def to_dict(self) -> dict[str, Any]:
        """The fields, and the flagged rule of the objective (``count_flagged``, for readers:
        it is read back from ``spec``, where results written before it have none: False)."""
        return {
            "name": self.name,
            "spec": self.spec,
            "count_flagged": self.objective().count_flagged,
            "names": self.names,
            "train": list(self.train),
            "test": list(self.test),
            "compile_baselines": {k: asdict(v) for k, v in self.compile_baselines.items()},
            "fixed": [c.to_dict() for c in self.fixed],
            "budgets": [b.to_dict() for b in self.budgets],
            "stats": self.stats,
        }

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> BenchResult:
        return cls(
            name=data["name"],
            spec=data["spec"],
            names=dict(data["names"]),
            train=tuple(data["train"]),
            test=tuple(data["test"]),
            compile_baselines={
                k: CompileBaseline(**v) for k, v in data["compile_baselines"].items()
            },
            fixed=tuple(ConfigScore.from_dict(c) for c in data["fixed"]),
            budgets=tuple(BudgetResult.from_dict(b) for b in data["budgets"]),
            stats=dict(data.get("stats", {})),
        )
