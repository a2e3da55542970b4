"""Local search: small random edits of the incumbent tree, offline and seeded.

Each round draws up to ``edits_per_round`` distinct valid edits. A draw picks a move uniformly
among those the tree allows, then its parameters uniformly:

- add a recorded group to a node, drop one, or swap one for another;
- split a leaf on a metric that the groups on its path yield, at a quartile of the metric's
  recorded values across the training problems, each new leaf collecting one group (or none);
- retune a condition's threshold to another quartile;
- prune a condition node back into a leaf.

Edits that do not apply, or that give a tree already scored in this study, are drawn again.
"""

from __future__ import annotations

from collections.abc import Callable
from random import Random

from autoprofiler.learn.proposers.base import Proposal, ProposalContext, Proposer
from autoprofiler.learn.recorded import RecordedSummary
from autoprofiler.tree.edits import Edit, Prune, Rewrite, Split
from autoprofiler.tree.model import Condition, Node, ProfilingTree, TreeError

Move = Callable[[Random], Edit | None]
SPLIT_OP = ">"


class LocalSearchProposer(Proposer):
    """Random local edits (see the module docstring).

    ``max_depth`` bounds the depth of a split leaf's children, ``max_groups`` the groups one
    node collects; ``draws_per_edit`` bounds the draws spent per edit before giving up.
    """

    name = "search"

    def __init__(
        self,
        edits_per_round: int = 6,
        max_depth: int = 3,
        max_groups: int = 3,
        draws_per_edit: int = 40,
    ) -> None:
        if edits_per_round < 1 or max_depth < 0 or max_groups < 1 or draws_per_edit < 1:
            raise ValueError("local search needs positive limits")
        self.edits_per_round = edits_per_round
        self.max_depth = max_depth
        self.max_groups = max_groups
        self.draws_per_edit = draws_per_edit

    @property
    def id(self) -> str:
        return (
            f"{self.name}:edits={self.edits_per_round},depth={self.max_depth},"
            f"groups={self.max_groups},draws={self.draws_per_edit}"
        )

    def propose(self, context: ProposalContext) -> list[Proposal]:
        rng = context.rng()
        moves = _Moves(context.tree, context.summary, self.max_depth, self.max_groups).available()
        seen = set(context.tried_trees())
        proposals: list[Proposal] = []
        for _ in range(self.draws_per_edit * self.edits_per_round):
            if len(proposals) == self.edits_per_round or not moves:
                break
            edit = rng.choice(moves)(rng)
            if edit is None:
                continue
            try:
                edited = edit.apply(context.tree)
            except TreeError:
                continue
            if edited.content_hash not in seen:
                seen.add(edited.content_hash)
                proposals.append(Proposal(edit))
        return proposals


class _Moves:
    """The moves one tree allows, each a function of the random generator."""

    def __init__(
        self, tree: ProfilingTree, summary: RecordedSummary, max_depth: int, max_groups: int
    ) -> None:
        self.tree = tree
        self.summary = summary
        self.groups = tuple(summary.groups)
        nodes = tree.nodes()
        self.roomy = [n for n in nodes if len(n.collect) < max_groups]
        self.collecting = [n for n in nodes if n.collect]
        self.leaves = [n for n in nodes if n.is_leaf and self._depth(n) < max_depth]
        self.conditions = [n for n in nodes if not n.is_leaf]

    def available(self) -> list[Move]:
        moves: list[Move] = []
        if self.roomy and self.groups:
            moves.append(self.add)
        if self.collecting:
            moves.append(self.drop)
            if self.groups:
                moves.append(self.swap)
        if self.leaves:
            moves.append(self.split)
        if self.conditions:
            moves.extend((self.retune, self.prune))
        return moves

    def _depth(self, node: Node) -> int:
        return len(self.tree.path_to(node.id)) - 1

    def _new_groups(self, node: Node) -> list[str]:
        """Recorded groups that neither ``node`` nor its ancestors collect."""
        have = set(self.tree.groups_on_path(node.id))
        return [g for g in self.groups if g not in have]

    def add(self, rng: Random) -> Edit | None:
        node = rng.choice(self.roomy)
        options = self._new_groups(node)
        return Rewrite(node.id, (*node.collect, rng.choice(options))) if options else None

    def drop(self, rng: Random) -> Edit:
        node = rng.choice(self.collecting)
        gone = rng.choice(node.collect)
        return Rewrite(node.id, tuple(g for g in node.collect if g != gone))

    def swap(self, rng: Random) -> Edit | None:
        node = rng.choice(self.collecting)
        options = self._new_groups(node)
        if not options:
            return None
        old, new = rng.choice(node.collect), rng.choice(options)
        return Rewrite(node.id, tuple(new if g == old else g for g in node.collect))

    def split(self, rng: Random) -> Edit | None:
        leaf = rng.choice(self.leaves)
        metrics = self.summary.split_metrics(self.tree.groups_on_path(leaf.id))
        if not metrics:
            return None
        metric = rng.choice(metrics)
        thresholds = self.summary.thresholds(metric)
        options = [(), *((g,) for g in self._new_groups(leaf))]
        left, right = rng.choice(options), rng.choice(options)
        if not thresholds or not (left or right):
            return None
        return Split(leaf.id, Condition(metric, SPLIT_OP, rng.choice(thresholds)), left, right)

    def retune(self, rng: Random) -> Edit | None:
        node = rng.choice(self.conditions)
        condition = node.condition
        if condition is None or condition.op == "in":
            return None
        options = [t for t in self.summary.thresholds(condition.metric) if t != condition.threshold]
        if not options:
            return None
        retuned = Condition(condition.metric, condition.op, rng.choice(options))
        return Rewrite(node.id, condition=retuned)

    def prune(self, rng: Random) -> Edit:
        return Prune(rng.choice(self.conditions).id)
