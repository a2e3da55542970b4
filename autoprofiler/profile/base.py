"""The profiling plug-in point: metric groups, the profiles they fill, the Profiler interface."""

from __future__ import annotations

import functools
import json
import math
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from autoprofiler.problem import Problem

PROFILE_SCHEMA_VERSION = 1


@dataclass(frozen=True)
class MetricGroup:
    """A named set of metrics that one profiler collects together, with its typical cost.

    ``sections`` are Nsight Compute section identifiers, ``metrics`` explicit metric names;
    ``cost_s`` and ``replay_passes`` are the catalogue's typical marginal cost per problem
    (start-up excluded), measured on the device named in the catalogue.
    """

    name: str
    profiler: str
    description: str
    sections: tuple[str, ...] = ()
    metrics: tuple[str, ...] = ()
    cost_s: float = 0.0
    replay_passes: int = 0
    composite_of: tuple[str, ...] = ()


@functools.cache
def _field_names(kind: type) -> tuple[str, ...]:
    return tuple(f.name for f in fields(kind))


def _fields(item: Any) -> dict[str, Any]:
    """A flat dataclass's fields by name (what ``asdict`` gives, without its deep copies)."""
    return {name: getattr(item, name) for name in _field_names(type(item))}


@dataclass
class MetricValue:
    """One number with its unit and the group it came from."""

    value: float
    unit: str = ""
    group: str = ""


@dataclass
class KernelSummary:
    """One GPU kernel seen while profiling: its name, duration and a few metrics of its own."""

    name: str
    duration_ns: float
    count: int = 1
    metrics: dict[str, float] = field(default_factory=dict)


@dataclass
class GroupCost:
    """What collecting one group cost for one problem, and the tool that collected it
    (``cupti`` or ``ncu`` for hardware counters; empty where the group's profiler says it) and,
    for CUPTI, how it replayed the passes (``kernel`` or ``user``)."""

    seconds: float
    replay_passes: int = 0
    tool: str = ""
    replay: str = ""


@dataclass
class SkippedGroup:
    group: str
    reason: str


@dataclass
class Profile:
    """Metric values collected so far for one problem, where each came from, and what it cost.

    ``metrics`` maps a metric name (an ncu metric, or ``static.*`` / ``torch.*`` features) to its
    duration-weighted aggregate over the profiled kernels; ``notes`` say how a profiler limited
    what it saw (e.g. sampled launches). ``cost_s`` is the total profiler wall
    time charged, start-up included; ``startup_s`` is the part of it that was start-up.
    ``shown``, when set, is the part of it the rewriter is shown (a tree whose leaves choose
    what to show: ``ProfilingTree.show``); ``seen`` is what the rewriter reads either way.
    ``cut`` names the groups whose collection was stopped at its time limit (charged what it
    had spent, their metrics absent).
    """

    problem_hash: str
    device: str = ""
    metrics: dict[str, MetricValue] = field(default_factory=dict)
    kernels: list[KernelSummary] = field(default_factory=list)
    groups: list[str] = field(default_factory=list)
    group_costs: dict[str, GroupCost] = field(default_factory=dict)
    skipped: list[SkippedGroup] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    path: list[str] = field(default_factory=list)
    startup_s: float = 0.0
    cost_s: float = 0.0
    replay_passes: int = 0
    shown: Profile | None = None
    cut: list[str] = field(default_factory=list)

    @property
    def seen(self) -> Profile:
        """What a rewriter is given: ``shown`` when a tree chose it, else this profile."""
        return self if self.shown is None else self.shown

    def value(self, name: str) -> float | None:
        """The value of ``name`` or None when it was not collected (or is not a number)."""
        entry = self.metrics.get(name)
        if entry is None or not isinstance(entry.value, (int, float)) or math.isnan(entry.value):
            return None
        return float(entry.value)

    @property
    def content_hash(self) -> str:
        """Hash of the information the rewriter is given (metrics and kernels; those of
        ``shown`` when set), not of its cost or path.

        Two trees that give a problem the same information produce the same hash, so a
        rewrite of that profile is cached once.
        """
        import hashlib

        if self.shown is not None:
            return self.shown.content_hash
        metrics = {name: _fields(value) for name, value in self.metrics.items()}
        kernels = [_fields(kernel) for kernel in self.kernels]
        text = json.dumps([metrics, kernels], sort_keys=True, default=str)
        return hashlib.sha256(text.encode("utf-8")).hexdigest()[:16]

    def merge(self, other: Profile) -> Profile:
        """A new profile holding both profiles' metrics and costs (``other`` wins on clashes)."""
        merged = Profile.from_dict(self.to_dict())
        merged.device = other.device or self.device
        merged.metrics.update(other.metrics)
        known = {k.name for k in merged.kernels}
        merged.kernels.extend(k for k in other.kernels if k.name not in known)
        merged.groups.extend(g for g in other.groups if g not in merged.groups)
        merged.group_costs.update(other.group_costs)
        merged.skipped.extend(other.skipped)
        merged.notes.extend(n for n in other.notes if n not in merged.notes)
        merged.startup_s += other.startup_s
        merged.cost_s += other.cost_s
        merged.replay_passes += other.replay_passes
        merged.cut.extend(g for g in other.cut if g not in merged.cut)
        merged.shown = None  # what was shown of one part says nothing of the merged whole
        return merged

    def restricted(self, groups: Sequence[MetricGroup], startup_s: float = 0.0) -> Profile:
        """The part of this profile that ``groups`` gave, as if collected alone with one
        start-up of ``startup_s``: their metrics (by the group each metric was collected
        with, a set's members included), the kernels seen and their costs."""
        if not groups:
            return Profile(problem_hash=self.problem_hash)
        names = {part for group in groups for part in (group.name, *group.composite_of)}
        costs = {name: cost for name, cost in self.group_costs.items() if name in names}
        return Profile(
            problem_hash=self.problem_hash,
            device=self.device,
            metrics={k: replace(v) for k, v in self.metrics.items() if v.group in names},
            kernels=[replace(k, metrics=dict(k.metrics)) for k in self.kernels],
            groups=[g for g in self.groups if g in names],
            cut=[g for g in self.cut if g in names],
            group_costs={k: replace(v) for k, v in costs.items()},
            notes=list(self.notes),
            startup_s=startup_s,
            cost_s=startup_s + sum(cost.seconds for cost in costs.values()),
            replay_passes=sum(cost.replay_passes for cost in costs.values()),
        )

    def to_dict(self) -> dict[str, Any]:
        data = asdict(self)
        data["schema_version"] = PROFILE_SCHEMA_VERSION
        for cost in data["group_costs"].values():
            for optional in ("tool", "replay"):
                if not cost[optional]:
                    del cost[optional]
        if not self.cut:
            del data["cut"]
        if self.shown is None:
            del data["shown"]
        else:
            data["shown"] = self.shown.to_dict()
        return data

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), sort_keys=True)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> Profile:
        version = data.get("schema_version", PROFILE_SCHEMA_VERSION)
        if version != PROFILE_SCHEMA_VERSION:
            raise ValueError(f"profile schema version {version} is not {PROFILE_SCHEMA_VERSION}")
        return cls(
            problem_hash=data["problem_hash"],
            device=data.get("device", ""),
            metrics={k: MetricValue(**v) for k, v in data.get("metrics", {}).items()},
            kernels=[KernelSummary(**k) for k in data.get("kernels", [])],
            groups=list(data.get("groups", [])),
            group_costs={k: GroupCost(**v) for k, v in data.get("group_costs", {}).items()},
            skipped=[SkippedGroup(**s) for s in data.get("skipped", [])],
            notes=list(data.get("notes", [])),
            path=list(data.get("path", [])),
            startup_s=data.get("startup_s", 0.0),
            cost_s=data.get("cost_s", 0.0),
            replay_passes=data.get("replay_passes", 0),
            shown=None if data.get("shown") is None else cls.from_dict(data["shown"]),
            cut=list(data.get("cut", [])),
        )

    @classmethod
    def from_json(cls, text: str) -> Profile:
        return cls.from_dict(json.loads(text))


def shares(total: float, weights: Sequence[float]) -> list[float]:
    """``total`` split in proportion to ``weights`` (negative ones count 0; equal shares when
    none is positive): how one run's seconds or passes are charged to the groups it served."""
    kept = [max(w, 0.0) for w in weights]
    if sum(kept) <= 0:
        kept = [1.0] * len(kept)
    return [total * w / sum(kept) for w in kept]


def cut_profile(
    problem: Problem, groups: Sequence[MetricGroup], spent_s: float, tool: str
) -> Profile:
    """What a collection stopped at its time limit gives: no metrics, the groups in ``cut``,
    the seconds spent charged (shared between them)."""
    share = spent_s / max(len(groups), 1)
    return Profile(
        problem_hash=problem.content_hash,
        cut=[g.name for g in groups],
        group_costs={g.name: GroupCost(seconds=share, tool=tool) for g in groups},
        notes=[f"{tool} stopped at the time limit after {spent_s:.3g} s"],
        cost_s=spent_s,
    )


class ProfilerError(RuntimeError):
    """A profiler could not run; the message is one line saying why and what to do."""


@dataclass
class BatchResult:
    """What collecting the same groups for several problems gave, keyed by problem hash.

    Each profile's ``cost_s`` excludes start-up (``startup_s`` is 0); ``startup_s`` here is the
    start-up one ``collect`` of one problem would pay. ``failures`` hold a one-line reason per
    problem that failed; ``not_run`` are problems never reached (retry them).
    """

    profiles: dict[str, Profile] = field(default_factory=dict)
    failures: dict[str, str] = field(default_factory=dict)
    not_run: list[str] = field(default_factory=list)
    wall_s: float = 0.0
    startup_s: float = 0.0
    device: str = ""


class Profiler(ABC):
    """Collects metric groups for a problem.

    Contract: ``collect`` runs every group it is given in as few profiler invocations as it can
    (one where possible), charges start-up once per invocation, and returns a ``Profile`` whose
    ``cost_s`` is the wall time really spent. Given ``limit_s``, a profiler that runs the
    collection in another process stops it when it would take longer: the groups it stopped
    are in ``Profile.cut`` and ``cost_s`` is what it spent (at most ``limit_s`` and the time to
    stop a process); profilers that run in this process (static, torch) or replay take their
    time and say so here. It raises ``ProfilerError`` with a one-line message when the
    profiler cannot run at all. ``release`` frees what it holds between problems.
    """

    name: str = "profiler"

    @abstractmethod
    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        """Collect ``groups`` for ``problem`` (within ``limit_s`` seconds where it can stop)."""

    def release(self) -> None:  # noqa: B027 (an optional hook: most profilers hold nothing)
        """Free what is held for the last problem (a worker process); the default holds none."""

    def estimate_cost_s(self, problem: Problem, groups: Sequence[MetricGroup]) -> float:
        """Expected seconds for one ``collect(problem, groups)`` call, start-up included.

        The default charges the start-up once plus each group's catalogue cost; profilers that
        know the measured cost for this problem (a recording) override it.
        """
        if not groups:
            return 0.0
        return self.estimated_startup_s() + sum(g.cost_s for g in groups)

    def estimated_startup_s(self) -> float:
        """Typical start-up cost of one invocation, charged before any group."""
        return 0.0

    def shown(self, problem: Problem, groups: Sequence[MetricGroup], collected: Profile) -> Profile:
        """What the rewriter is shown of ``collected`` when a tree's leaf shows only
        ``groups``: the profile collecting them alone would have given. The default cuts
        ``collected`` down to them (``Profile.restricted``) with one estimated start-up when
        any needs this profiler; a profiler that can say exactly (a recording) overrides it."""
        needs_startup = any(group.profiler == self.name for group in groups)
        return collected.restricted(groups, self.estimated_startup_s() if needs_startup else 0.0)

    def collect_many(
        self, problems: Sequence[Problem], groups: Sequence[MetricGroup]
    ) -> BatchResult:
        """Collect ``groups`` for each problem; a problem's ``ProfilerError`` becomes a failure.

        The default calls ``collect`` per problem; profilers that can serve several problems
        in one invocation (ncu: one process, one NVTX range per problem) override it.
        """
        result = BatchResult()
        startups = []
        for problem in problems:
            try:
                profile = self.collect(problem, groups)
            except ProfilerError as exc:
                result.failures[problem.content_hash] = str(exc)
                continue
            result.wall_s += profile.cost_s
            startups.append(profile.startup_s)
            profile.cost_s = max(profile.cost_s - profile.startup_s, 0.0)
            profile.startup_s = 0.0
            result.device = result.device or profile.device
            result.profiles[problem.content_hash] = profile
        result.startup_s = sorted(startups)[len(startups) // 2] if startups else 0.0
        return result
