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
# How far past its limit a live step may end: the time to stop the process collecting it.
STOP_GRACE_S = 0.5
_OVER_BUDGET = "over budget"


def run_tree(
    tree: ProfilingTree, problem: Problem, profiler: Profiler, budget_s: float | None = None
) -> Profile:
    """Walk ``tree`` from the root for ``problem`` and return the profile it collected.

    At each node the groups not collected yet (nor covered by a collected composite group)
    are considered in order; a group is kept when ``profiler.estimate_cost_s`` for the kept
    groups plus it (one invocation, start-up included) fits in what is left of the budget,
    otherwise it is recorded in ``Profile.skipped``. The kept groups are collected in one
    ``profiler.collect`` call, limited to what is left of the budget (a profiler that collects
    in another process stops a step that would overrun: its groups are then in
    ``Profile.cut``, and it is charged what it spent), and the budget is charged the
    ``cost_s`` that call reports. So a live tree spends at most its budget plus
    ``STOP_GRACE_S``.
    Then the node's condition is evaluated on the profile so far; a missing value takes the
    missing branch (the false branch when the node has none). ``Profile.path`` lists the node
    ids visited. ``budget_s`` of None or ``math.inf`` means unlimited; a step that costs
    exactly the budget left is allowed.

    With ``tree.show`` of ``"leaf"`` the last node's groups are a configuration, taken whole
    or not at all: when they do not fit together in what is left, none is collected (each
    recorded as skipped) and the rewriter is shown nothing; otherwise ``Profile.shown`` is
    what those groups alone give (``profiler.shown``), whatever routed the walk there.
    When the walk ends, ``profiler.release()`` frees what it held for the problem.
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
        shows = tree.shown_groups(node) if node.is_leaf else None
        left_s = limit - profile.cost_s
        if shows is not None and not _fits(problem, profiler, wanted, left_s, profile):
            chosen = []
        else:
            chosen = _affordable(problem, profiler, wanted, left_s, profile)
        if chosen:
            limit_s = None if math.isinf(limit) else max(left_s, 0.0)
            profile = profile.merge(profiler.collect(problem, chosen, limit_s=limit_s))
            done.update(part for g in chosen for part in g.composite_of)
            log.debug(
                "node %s: collected %s, %.3f s spent",
                node.id,
                ", ".join(g.name for g in chosen),
                profile.cost_s,
            )
        if shows is not None:
            whole = not any(
                s.group in shows and s.reason.startswith(_OVER_BUDGET) for s in profile.skipped
            )
            groups = [get_group(name) for name in shows] if whole else []
            profile.shown = profiler.shown(problem, groups, profile)
        node = _next_node(node, profile)
    profiler.release()
    if profile.cost_s > limit + STOP_GRACE_S:
        log.warning("%s: %.3g s spent on a %.3g s budget", problem.name, profile.cost_s, limit)
    return profile


def _fits(
    problem: Problem,
    profiler: Profiler,
    groups: list[MetricGroup],
    left_s: float,
    profile: Profile,
) -> bool:
    """Whether ``groups`` fit in ``left_s`` together; if not, each is recorded as skipped."""
    estimate_s = profiler.estimate_cost_s(problem, groups) if groups else 0.0
    if estimate_s <= left_s + _BUDGET_SLACK_S:
        return True
    reason = (
        f"{_OVER_BUDGET}: the leaf's groups would cost ~{estimate_s:.3g} s together, "
        f"{max(left_s, 0):.3g} s left"
    )
    profile.skipped.extend(SkippedGroup(group.name, reason) for group in groups)
    log.debug("leaf skipped %s: %s", ", ".join(g.name for g in groups), reason)
    return False


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
                f"{_OVER_BUDGET}: step would cost ~{estimate_s:.3g} s, {max(left_s, 0):.3g} s left"
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
