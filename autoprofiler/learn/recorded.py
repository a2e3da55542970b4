"""What the recordings of the training problems offer a proposer: groups, costs, metric values.

Only groups recorded for at least one training problem are offered (any other group would
collect nothing when replayed). A metric is offered for a split when it is one the catalogue
names (static, torch, curated ncu metrics) or an ncu ``.avg.pct_of_peak_sustained_*`` ratio,
and its recorded values differ across the training problems; thresholds are their quantiles.
"""

from __future__ import annotations

import re
import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType

from autoprofiler.problem import Problem
from autoprofiler.profile.catalogue import (
    CURATED24_METRICS,
    GROUPS,
    STATIC_METRICS,
    TORCH_KERNEL_METRICS,
    TORCH_OP_METRICS,
)
from autoprofiler.profile.recorded import RecordedProfiler

SPLIT_QUANTILES = (0.25, 0.5, 0.75)
_NAMED_METRICS = frozenset(
    (*STATIC_METRICS, *TORCH_KERNEL_METRICS, *TORCH_OP_METRICS, *CURATED24_METRICS)
)
_RATIO_METRIC = re.compile(r"\.avg\.pct_of_peak_sustained_(elapsed|active)$")


def splittable(metric: str) -> bool:
    """Whether ``metric`` is one a proposer may split on (see the module docstring)."""
    return metric in _NAMED_METRICS or bool(_RATIO_METRIC.search(metric))


def metric_rank(metric: str) -> tuple[bool, str]:
    """Sort key that puts the metrics the catalogue names before the other ncu ratios."""
    return (metric not in _NAMED_METRICS, metric)


@dataclass(frozen=True)
class GroupStats:
    """A group as recorded for the training problems: how many have it, and its median
    marginal cost (start-up excluded) in seconds."""

    name: str
    profiler: str
    description: str
    problems: int
    median_cost_s: float


@dataclass(frozen=True)
class RecordedSummary:
    """The groups recorded for ``problems`` training problems, the start-up each profiler kind
    charges per invocation, and the recorded values of the metrics a split may test.

    ``groups`` are in catalogue order; ``values[metric]`` is sorted; ``yielded_by[metric]``
    names the groups whose recordings hold it.
    """

    problems: int
    groups: Mapping[str, GroupStats]
    startup_s: Mapping[str, float]
    values: Mapping[str, tuple[float, ...]] = field(default_factory=dict)
    yielded_by: Mapping[str, tuple[str, ...]] = field(default_factory=dict)

    @classmethod
    def of(cls, profiler: RecordedProfiler, problems: Sequence[Problem]) -> RecordedSummary:
        """Summarise the recordings ``profiler`` replays for ``problems``."""
        costs: dict[str, list[float]] = {}
        values: dict[str, dict[str, float]] = {}
        yielded_by: dict[str, dict[str, None]] = {}
        for problem in problems:
            records = profiler.records(problem.content_hash)
            for name in records:
                group = GROUPS.get(name)
                if group is None:
                    continue
                cost = profiler.estimate_cost_s(problem, [group]) - profiler.startup_s(
                    group.profiler
                )
                costs.setdefault(name, []).append(max(cost, 0.0))
                for metric in records[name].metrics:
                    value = records[name].value(metric)
                    if value is None or not splittable(metric):
                        continue
                    yielded_by.setdefault(metric, {})[name] = None
                    values.setdefault(metric, {}).setdefault(problem.content_hash, value)
        groups = {
            name: GroupStats(
                name=name,
                profiler=group.profiler,
                description=group.description,
                problems=len(costs[name]),
                median_cost_s=statistics.median(costs[name]),
            )
            for name, group in GROUPS.items()
            if name in costs
        }
        kinds = sorted({g.profiler for g in groups.values()})
        varying = {m: tuple(sorted(v.values())) for m, v in sorted(values.items())}
        varying = {m: v for m, v in varying.items() if len(set(v)) > 1}
        return cls(
            problems=len(problems),
            groups=MappingProxyType(groups),
            startup_s=MappingProxyType({k: profiler.startup_s(k) for k in kinds}),
            values=MappingProxyType(varying),
            yielded_by=MappingProxyType({m: tuple(yielded_by[m]) for m in varying}),
        )

    def split_metrics(self, groups: Sequence[str]) -> tuple[str, ...]:
        """The metrics a split may test after ``groups`` were collected, sorted."""
        have = set(groups)
        return tuple(m for m, by in self.yielded_by.items() if have.intersection(by))

    def thresholds(
        self, metric: str, quantiles: Sequence[float] = SPLIT_QUANTILES
    ) -> tuple[float, ...]:
        """Distinct thresholds for ``metric``: quantiles of its recorded values (4 significant
        digits), in increasing order; empty when the metric has no recorded spread."""
        values = self.values.get(metric, ())
        if len(values) < 2:
            return ()
        cuts = statistics.quantiles(values, n=100, method="inclusive")
        chosen = (float(f"{cuts[round(q * 100) - 1]:.4g}") for q in quantiles)
        return tuple(sorted(set(chosen)))
