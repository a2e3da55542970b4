"""RecordedProfiler: replays real profiles recorded in the store (``recording.record_profiles``).

``collect(problem, groups)`` merges the recorded profile of each group. Its cost is what the real
profiler would have charged: the recorded start-up once per profiler kind involved (ncu, torch,
static: each would be its own invocation) plus each group's recorded cost. A group with no
record for the problem is listed in ``Profile.skipped`` with the reason (never recorded, or
the recorded failure) and costs nothing.
"""

from __future__ import annotations

from collections.abc import Sequence

from autoprofiler.problem import Problem
from autoprofiler.profile.base import MetricGroup, Profile, Profiler, SkippedGroup
from autoprofiler.profile.catalogue import startup_s
from autoprofiler.profile.recording import recorded_failure, recorded_startup_s
from autoprofiler.store import Store


class RecordedProfiler(Profiler):
    """Serves profiles of ``device`` from ``store``; parsed records are cached per problem."""

    name = "recorded"

    def __init__(self, store: Store, device: str) -> None:
        self.store = store
        self.device = device
        self._records: dict[str, dict[str, Profile]] = {}

    def records(self, problem_hash: str) -> dict[str, Profile]:
        """``{group: Profile}`` recorded for a problem on this device."""
        if problem_hash not in self._records:
            raw = self.store.get_profile_records(problem_hash, self.device)
            self._records[problem_hash] = {g: Profile.from_dict(p) for g, p in raw.items()}
        return self._records[problem_hash]

    def startup_s(self, profiler: str) -> float:
        """Recorded start-up of ``profiler`` on this device (the catalogue's when unrecorded)."""
        recorded = recorded_startup_s(self.store, self.device, profiler)
        return startup_s(profiler) if recorded is None else recorded

    def estimated_startup_s(self) -> float:
        return self.startup_s("ncu")

    def _startup_for(self, records: dict[str, Profile], groups: Sequence[MetricGroup]) -> float:
        """One start-up of each tool that recorded ``groups`` (``GroupCost.tool``: ``cupti``
        for a CUPTI recording; the group's profiler where the recording does not say)."""
        tools = dict.fromkeys(_tool(records[g.name], g) for g in groups)
        return sum(self.startup_s(tool) for tool in tools)

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        key = problem.content_hash
        records = self.records(key)
        profile = Profile(problem_hash=key, device=self.device)
        served = []
        for group in groups:
            record = records.get(group.name)
            if record is None:
                why = recorded_failure(self.store, self.device, group.name, key)
                reason = f"failed when recorded: {why}" if why else "not recorded"
                profile.skipped.append(SkippedGroup(group.name, f"{reason} on {self.device}"))
                continue
            profile = profile.merge(record)
            served.append(group)
        profile.device = self.device
        profile.startup_s = self._startup_for(records, served)
        profile.cost_s = profile.startup_s + sum(
            self._group_cost(records[g.name], g) for g in served
        )
        return profile

    def shown(self, problem: Problem, groups: Sequence[MetricGroup], collected: Profile) -> Profile:
        """Exactly what a tree that collects ``groups`` alone gets from the recordings (an
        empty profile for none), whatever else ``collected`` holds."""
        if not groups:
            return Profile(problem_hash=problem.content_hash)
        return Profile(problem_hash=problem.content_hash).merge(self.collect(problem, groups))

    @staticmethod
    def _group_cost(record: Profile, group: MetricGroup) -> float:
        cost = record.group_costs.get(group.name)
        return cost.seconds if cost is not None else record.cost_s

    def estimate_cost_s(self, problem: Problem, groups: Sequence[MetricGroup]) -> float:
        """What ``collect`` would charge: recorded costs; unrecorded groups cost nothing."""
        records = self.records(problem.content_hash)
        served = [g for g in groups if g.name in records]
        if not served:
            return 0.0
        startup = self._startup_for(records, served)
        return startup + sum(self._group_cost(records[g.name], g) for g in served)


def _tool(record: Profile, group: MetricGroup) -> str:
    cost = record.group_costs.get(group.name)
    return cost.tool if cost is not None and cost.tool else group.profiler
