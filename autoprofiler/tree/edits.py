"""Edits of a profiling tree: small immutable changes a proposer makes, each validated.

``edit.apply(tree)`` returns a new, validated tree and leaves ``tree`` untouched; an edit
that does not make sense for the tree raises ``TreeError`` with a one-line message.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, replace
from typing import Any, ClassVar

from autoprofiler.tree.model import Condition, Node, ProfilingTree, TreeError


class Edit(ABC):
    """One change to a tree."""

    kind: ClassVar[str]

    def apply(self, tree: ProfilingTree) -> ProfilingTree:
        """The edited tree, validated against the catalogue (``TreeError`` when invalid)."""
        return self._edit(tree).validate()

    @abstractmethod
    def _edit(self, tree: ProfilingTree) -> ProfilingTree:
        """The edited tree before catalogue validation."""

    @abstractmethod
    def to_dict(self) -> dict[str, Any]:
        """Plain data with a ``kind`` field; ``edit_from_dict`` reads it back."""


def _groups(value: Any, what: str) -> tuple[str, ...]:
    if isinstance(value, str) or not isinstance(value, (tuple, list)):
        raise TreeError(f"{what} must be a list of group names, not {value!r}")
    return tuple(value)


@dataclass(frozen=True)
class Rewrite(Edit):
    """Replace a node's collected groups and/or (on a condition node) its condition."""

    kind: ClassVar[str] = "rewrite"
    node_id: str
    collect: tuple[str, ...] | None = None
    condition: Condition | None = None

    def __post_init__(self) -> None:
        if self.collect is None and self.condition is None:
            raise TreeError(f"rewrite of {self.node_id} changes nothing")
        if self.collect is not None:
            object.__setattr__(self, "collect", _groups(self.collect, "rewrite collect"))

    def _edit(self, tree: ProfilingTree) -> ProfilingTree:
        node = tree.node(self.node_id)
        if self.condition is not None and node.is_leaf:
            raise TreeError(f"node {node.id} is a leaf: add a condition with a split")
        changes: dict[str, Any] = {}
        if self.collect is not None:
            changes["collect"] = self.collect
        if self.condition is not None:
            changes["condition"] = self.condition
        return tree.replace_node(node.id, replace(node, **changes))

    def to_dict(self) -> dict[str, Any]:
        return {
            "kind": self.kind,
            "node_id": self.node_id,
            "collect": None if self.collect is None else list(self.collect),
            "condition": None if self.condition is None else self.condition.to_dict(),
        }

    def __str__(self) -> str:
        parts = [f"rewrite {self.node_id}:"]
        if self.collect is not None:
            parts.append("collect " + (", ".join(self.collect) or "nothing"))
        if self.condition is not None:
            parts.append(f"if {self.condition}")
        return " ".join(parts)


@dataclass(frozen=True)
class Split(Edit):
    """Turn a leaf into a condition node whose true/false children are new leaves.

    The leaf keeps its id and its groups (or, given ``collect``, collects those instead: what
    the condition routes on); the new leaves collect ``left_collect`` (condition true) and
    ``right_collect`` (condition false, or metric missing) and get fresh ids.
    """

    kind: ClassVar[str] = "split"
    leaf_id: str
    condition: Condition
    left_collect: tuple[str, ...]
    right_collect: tuple[str, ...]
    collect: tuple[str, ...] | None = None

    def __post_init__(self) -> None:
        object.__setattr__(self, "left_collect", _groups(self.left_collect, "left_collect"))
        object.__setattr__(self, "right_collect", _groups(self.right_collect, "right_collect"))
        if self.collect is not None:
            object.__setattr__(self, "collect", _groups(self.collect, "split collect"))
        if not self.left_collect and not self.right_collect:
            raise TreeError(f"split of {self.leaf_id} needs a branch that collects something")

    def _edit(self, tree: ProfilingTree) -> ProfilingTree:
        leaf = tree.node(self.leaf_id)
        if not leaf.is_leaf:
            raise TreeError(f"cannot split {leaf.id}: it is not a leaf")
        true_id, false_id = tree.fresh_ids(2)
        new = replace(
            leaf,
            collect=leaf.collect if self.collect is None else self.collect,
            condition=self.condition,
            on_true=Node(true_id, self.left_collect),
            on_false=Node(false_id, self.right_collect),
        )
        return tree.replace_node(leaf.id, new)

    def to_dict(self) -> dict[str, Any]:
        data = {
            "kind": self.kind,
            "leaf_id": self.leaf_id,
            "condition": self.condition.to_dict(),
            "left_collect": list(self.left_collect),
            "right_collect": list(self.right_collect),
        }
        if self.collect is not None:
            data["collect"] = list(self.collect)
        return data

    def __str__(self) -> str:
        left = ", ".join(self.left_collect) or "nothing"
        right = ", ".join(self.right_collect) or "nothing"
        routing = None if self.collect is None else ", ".join(self.collect) or "nothing"
        routed = "" if routing is None else f" (collect {routing})"
        return f"split {self.leaf_id}{routed}: if {self.condition} collect {left}, else {right}"


@dataclass(frozen=True)
class Prune(Edit):
    """Turn a condition node back into a leaf that keeps its own groups."""

    kind: ClassVar[str] = "prune"
    node_id: str

    def _edit(self, tree: ProfilingTree) -> ProfilingTree:
        node = tree.node(self.node_id)
        if node.is_leaf:
            raise TreeError(f"cannot prune {node.id}: it is already a leaf")
        return tree.replace_node(node.id, Node(node.id, node.collect))

    def to_dict(self) -> dict[str, Any]:
        return {"kind": self.kind, "node_id": self.node_id}

    def __str__(self) -> str:
        return f"prune {self.node_id}"


EDIT_KINDS: dict[str, type[Edit]] = {cls.kind: cls for cls in (Rewrite, Split, Prune)}


def edit_from_dict(data: Any) -> Edit:
    """Read an edit written by ``Edit.to_dict`` (or proposed as JSON); ``TreeError`` if bad."""
    from autoprofiler.tree.serialize import condition_from_data

    if not isinstance(data, dict) or data.get("kind") not in EDIT_KINDS:
        raise TreeError(f"an edit needs a kind, one of {', '.join(EDIT_KINDS)}")
    fields = {k: v for k, v in data.items() if k != "kind"}
    if fields.get("condition") is not None:
        fields["condition"] = condition_from_data(fields["condition"], "edit")
    try:
        return EDIT_KINDS[data["kind"]](**fields)
    except TypeError:
        raise TreeError(f"bad fields for a {data['kind']} edit: {', '.join(fields)}") from None
