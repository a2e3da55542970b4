"""The profiling tree: immutable nodes that collect metric groups and branch on what was seen.

A node collects a tuple of metric groups. A leaf stops there; a condition node then tests one
metric of the profile collected so far against a constant and continues with ``on_true`` or
``on_false``. When the metric is missing (not collected, skipped for budget, or not a number)
it continues with ``on_missing``, or with ``on_false`` when no ``on_missing`` branch is given.

What the rewriter is shown is the tree's ``show``: with ``"path"`` (the default) everything
collected on the way; with ``"leaf"`` only the groups the leaf that ends the walk lists, as if
they alone had been collected, so the groups of condition nodes only route (a tree can then
branch on cheap metrics and hand the rewriter one fixed configuration per kernel).

Structure is checked when a node is built (``TreeError``); what needs the group catalogue
(known groups, metrics that the path to a condition can provide) is checked by
``ProfilingTree.validate``.
"""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import operator
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from functools import cached_property
from typing import TYPE_CHECKING, Any

from autoprofiler.profile.catalogue import UnknownGroupError, get_group, metric_available

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profile, Profiler

_COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<": operator.lt,
    "<=": operator.le,
    ">": operator.gt,
    ">=": operator.ge,
    "==": operator.eq,
}
OPERATORS = (*_COMPARISONS, "in")
BRANCHES = ("on_true", "on_false", "on_missing")
SHOW_MODES = ("path", "leaf")
_ID_PATTERN = re.compile(r"[A-Za-z0-9_.:-]+")
_FRESH_ID = re.compile(r"n(\d+)")


class TreeError(ValueError):
    """An invalid tree, edit or tree file; the message is one line naming the fault."""


@dataclass(frozen=True)
class Condition:
    """``metric op threshold``: a comparison of one collected value with a constant.

    ``in`` tests membership in a tuple of numbers (``static.op_count in (1, 2)``); every
    other operator compares with one number. Thresholds are stored as floats.
    """

    metric: str
    op: str
    threshold: float | tuple[float, ...]

    def __post_init__(self) -> None:
        if not isinstance(self.metric, str) or not self.metric:
            raise TreeError("a condition needs a metric name")
        if self.op not in OPERATORS:
            raise TreeError(f"bad operator {self.op!r} (expected one of {', '.join(OPERATORS)})")
        if self.op == "in":
            values = self.threshold if isinstance(self.threshold, (tuple, list)) else None
            if not values:
                raise TreeError(f"'in' needs a non-empty list of numbers for {self.metric}")
            object.__setattr__(self, "threshold", tuple(_number(v, self.metric) for v in values))
        else:
            object.__setattr__(self, "threshold", _number(self.threshold, self.metric))

    def test(self, value: float) -> bool:
        """Whether ``value`` satisfies the condition."""
        if isinstance(self.threshold, tuple):
            return value in self.threshold
        return _COMPARISONS[self.op](value, self.threshold)

    def to_dict(self) -> dict[str, Any]:
        threshold = list(self.threshold) if isinstance(self.threshold, tuple) else self.threshold
        return {"metric": self.metric, "op": self.op, "threshold": threshold}

    def __str__(self) -> str:
        if isinstance(self.threshold, tuple):
            shown = "(" + ", ".join(f"{v:g}" for v in self.threshold) + ")"
        else:
            shown = f"{self.threshold:g}"
        return f"{self.metric} {self.op} {shown}"


def _number(value: Any, metric: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise TreeError(f"threshold {value!r} for {metric} is not a finite number")
    return float(value)


@dataclass(frozen=True)
class Node:
    """One step of the tree: collect ``collect``, then (unless a leaf) branch on ``condition``.

    ``on_missing`` is optional: without it a missing metric follows ``on_false``.
    """

    id: str
    collect: tuple[str, ...] = ()
    condition: Condition | None = None
    on_true: Node | None = None
    on_false: Node | None = None
    on_missing: Node | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not _ID_PATTERN.fullmatch(self.id):
            raise TreeError(f"bad node id {self.id!r} (letters, digits and _.:- only)")
        if isinstance(self.collect, str) or not all(isinstance(g, str) for g in self.collect):
            raise TreeError(f"node {self.id}: collect must be a list of group names")
        object.__setattr__(self, "collect", tuple(self.collect))
        repeated = sorted({g for g in self.collect if self.collect.count(g) > 1})
        if repeated:
            raise TreeError(f"node {self.id}: collects {repeated[0]!r} twice")
        if self.condition is None:
            if any(getattr(self, b) is not None for b in BRANCHES):
                raise TreeError(f"node {self.id}: has branches but no condition")
        else:
            for branch in ("on_true", "on_false"):
                if getattr(self, branch) is None:
                    raise TreeError(f"node {self.id}: condition node needs an {branch} branch")

    @property
    def is_leaf(self) -> bool:
        return self.condition is None

    def branches(self) -> tuple[tuple[str, Node], ...]:
        """The present children as ``(branch name, node)`` pairs, in a fixed order."""
        return tuple((b, n) for b in BRANCHES if (n := getattr(self, b)) is not None)

    def walk(self) -> Iterator[Node]:
        """This node and its descendants, depth first, true before false before missing."""
        yield self
        for _, child in self.branches():
            yield from child.walk()

    def to_dict(self) -> dict[str, Any]:
        """Plain nested data (the ``root`` of the JSON format)."""
        data: dict[str, Any] = {"id": self.id, "collect": list(self.collect)}
        if self.condition is not None:
            data["condition"] = self.condition.to_dict()
        for branch, child in self.branches():
            data[branch] = child.to_dict()
        return data


@dataclass(frozen=True)
class ProfilingTree:
    """A profiling tree. Equality and ``content_hash`` cover the nodes (ids included) and
    ``show`` (one of ``SHOW_MODES``: see the module docstring).

    ``description`` is free text for people; it is saved but not part of equality or the hash.
    """

    root: Node
    description: str = field(default="", compare=False)
    show: str = "path"

    def __post_init__(self) -> None:
        if self.show not in SHOW_MODES:
            raise TreeError(f"show must be one of {', '.join(SHOW_MODES)}, not {self.show!r}")

    @cached_property
    def content_hash(self) -> str:
        """SHA-256 of the canonical JSON of the nodes (with ``show`` when it is not the
        default), first 16 hex digits."""
        data: dict[str, Any] = self.root.to_dict()
        if self.show != "path":
            data = {"root": data, "show": self.show}
        canonical = json.dumps(data, sort_keys=True, separators=(",", ":"))
        return hashlib.sha256(canonical.encode("utf-8")).hexdigest()[:16]

    def shown_groups(self, leaf: Node) -> tuple[str, ...] | None:
        """The groups the rewriter is shown when the walk ends at ``leaf``: its own list when
        ``show`` is ``"leaf"``, None (everything collected) otherwise."""
        return leaf.collect if self.show == "leaf" else None

    def nodes(self) -> tuple[Node, ...]:
        """Every node, depth first from the root."""
        return tuple(self.root.walk())

    def node(self, node_id: str) -> Node:
        """The node with ``node_id`` (``TreeError`` when there is none)."""
        return self.path_to(node_id)[-1]

    def path_to(self, node_id: str) -> tuple[Node, ...]:
        """The nodes from the root down to ``node_id``, both included."""

        def search(node: Node) -> tuple[Node, ...] | None:
            if node.id == node_id:
                return (node,)
            for _, child in node.branches():
                found = search(child)
                if found:
                    return (node, *found)
            return None

        found = search(self.root)
        if found is None:
            raise TreeError(f"unknown node {node_id!r}")
        return found

    def groups_on_path(self, node_id: str) -> tuple[str, ...]:
        """Groups collected by ``node_id`` and its ancestors: what a condition there may use."""
        groups: list[str] = []
        for node in self.path_to(node_id):
            groups.extend(g for g in node.collect if g not in groups)
        return tuple(groups)

    def groups(self) -> tuple[str, ...]:
        """Every group the tree may collect, in first-seen order."""
        return tuple(dict.fromkeys(g for n in self.nodes() for g in n.collect))

    @property
    def size(self) -> int:
        return len(self.nodes())

    @property
    def depth(self) -> int:
        """Edges on the longest root-to-leaf path (0 for a single leaf)."""

        def depth(node: Node) -> int:
            return max((1 + depth(c) for _, c in node.branches()), default=0)

        return depth(self.root)

    def fresh_ids(self, count: int) -> tuple[str, ...]:
        """``count`` new ids of the form ``nK`` that no node of this tree uses."""
        numbers = [int(m.group(1)) for n in self.nodes() if (m := _FRESH_ID.fullmatch(n.id))]
        start = max(numbers, default=-1) + 1
        return tuple(f"n{start + i}" for i in range(count))

    def replace_node(self, node_id: str, new: Node) -> ProfilingTree:
        """A new tree with the node ``node_id`` replaced by ``new`` (same description)."""
        path = self.path_to(node_id)
        for parent, child in reversed(tuple(itertools.pairwise(path))):
            branch = next(b for b, c in parent.branches() if c is child)
            new = replace(parent, **{branch: new})
        return ProfilingTree(new, self.description, self.show)

    def validate(self) -> ProfilingTree:
        """Check ids, groups and metrics against the catalogue; return ``self`` or raise.

        Raises ``TreeError`` for a duplicate id, an unknown group, or a condition on a metric
        that the groups collected from the root to that node (its own included) cannot provide.
        """
        seen: set[str] = set()
        for node in self.nodes():
            if node.id in seen:
                raise TreeError(f"duplicate node id {node.id!r}")
            seen.add(node.id)
            for group in node.collect:
                try:
                    get_group(group)
                except UnknownGroupError:
                    raise TreeError(f"node {node.id}: unknown group {group!r}") from None
        for node in self.nodes():
            if node.condition is None:
                continue
            groups = self.groups_on_path(node.id)
            if not metric_available(node.condition.metric, groups):
                shown = ", ".join(groups) or "nothing"
                raise TreeError(
                    f"node {node.id}: condition on {node.condition.metric!r}, which the groups "
                    f"collected on the path to it ({shown}) cannot provide"
                )
        return self

    def run(self, problem: Problem, profiler: Profiler, budget_s: float | None = None) -> Profile:
        """Walk the tree for ``problem``; see ``autoprofiler.tree.run.run_tree``."""
        from autoprofiler.tree.run import run_tree

        return run_tree(self, problem, profiler, budget_s)

    def to_dict(self) -> dict[str, Any]:
        """The JSON document (schema, version, description, root)."""
        from autoprofiler.tree.serialize import tree_to_dict

        return tree_to_dict(self)
