"""Running a profiling tree for one problem within a budget."""

from __future__ import annotations

import logging
import math
from typing import TYPE_CHECKING

from autoprofiler.profile.base import MetricGroup, Profile, SkippedGroup
from autoprofiler.profile.catalogue import get_group

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profiler
    from autoprofiler.tree.model import Node, ProfilingTree

log = logging.getLogger(__name__)

# Slack for float round-off when a step costs exactly what is left of the budget.
_BUDGET_SLACK_S = 1e-9


def run_tree(
    tree: ProfilingTree, problem: Problem, profiler: Profiler, budget_s: float | None = None
) -> Profile:
    """Walk ``tree`` from the root for ``problem`` and return the profile it collected.

    At each node the groups not collected yet (nor covered by a collected composite group)
    are considered in order; a group is kept when ``profiler.estimate_cost_s`` for the kept
    groups plus it (one invocation, start-up included) fits in what is left of the budget,
    otherwise it is recorded in ``Profile.skipped``. The kept groups are collected in one
    ``profiler.collect`` call, and the budget is charged the ``cost_s`` that call reports.
    Then the node's condition is evaluated on the profile so far; a missing value takes the
    missing branch (the false branch when the node has none). ``Profile.path`` lists the node
    ids visited. ``budget_s`` of None or ``math.inf`` means unlimited; a step that costs
    exactly the budget left is allowed.
    """
    limit = math.inf if budget_s is None else float(budget_s)
    if math.isnan(limit) or limit < 0:
        raise ValueError(f"budget_s must be None or a number >= 0, not {budget_s!r}")
    profile = Profile(problem_hash=problem.content_hash)
    done: set[str] = set()
    node: Node | None = tree.root
    while node is not None:
        profile.path.append(node.id)
        wanted = [get_group(name) for name in node.collect if name not in done]
        done.update(g.name for g in wanted)
        chosen = _affordable(problem, profiler, wanted, limit - profile.cost_s, profile)
        if chosen:
            profile = profile.merge(profiler.collect(problem, chosen))
            done.update(part for g in chosen for part in g.composite_of)
            log.debug(
                "node %s: collected %s, %.3f s spent",
                node.id,
                ", ".join(g.name for g in chosen),
                profile.cost_s,
            )
        node = _next_node(node, profile)
    return profile


def _affordable(
    problem: Problem,
    profiler: Profiler,
    groups: list[MetricGroup],
    left_s: float,
    profile: Profile,
) -> list[MetricGroup]:
    """The groups, in order, that fit in ``left_s`` together; the others recorded as skipped."""
    chosen: list[MetricGroup] = []
    for group in groups:
        estimate_s = profiler.estimate_cost_s(problem, [*chosen, group])
        if estimate_s <= left_s + _BUDGET_SLACK_S:
            chosen.append(group)
        else:
            reason = (
                f"over budget: step would cost ~{estimate_s:.3g} s, {max(left_s, 0):.3g} s left"
            )
            profile.skipped.append(SkippedGroup(group.name, reason))
            log.debug("skipped %s: %s", group.name, reason)
    return chosen


def _next_node(node: Node, profile: Profile) -> Node | None:
    if node.condition is None:
        return None
    value = profile.value(node.condition.metric)
    if value is None:
        return node.on_false if node.on_missing is None else node.on_missing
    return node.on_true if node.condition.test(value) else node.on_false
