"""Local search: small random edits of the incumbent tree, offline and seeded.

Each round draws up to ``edits_per_round`` distinct valid edits. A draw picks a move uniformly
among those the tree allows, then its parameters uniformly:

- add a recorded group to a node, drop one, or swap one for another;
- split a leaf on a metric that the groups on its path yield, at a quartile of the metric's
  recorded values across the training problems, each new leaf collecting one group (or none);
- retune a condition's threshold to another quartile;
- prune a condition node back into a leaf.

With a ``menu`` (the configurations a leaf may show, for trees with ``show: leaf``, e.g. the
configurations whose rewrites were recorded) and ``routing`` groups, the moves keep to it:

- choose another configuration of the menu for a leaf;
- split a leaf on a metric of one routing group (which the node then collects), at a
  quartile, into two leaves showing two different configurations;
- route a condition node on another routing group (its condition must stay testable);
- retune a threshold; prune a condition node whose groups are a configuration of the menu.

Edits that do not apply, or that give a tree already scored in this study, are drawn again.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from random import Random

from autoprofiler.learn.proposers.base import Proposal, ProposalContext, Proposer, menu_of
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
        *,
        menu: Sequence[Sequence[str]] = (),
        routing: Sequence[str] = (),
    ) -> None:
        if edits_per_round < 1 or max_depth < 0 or max_groups < 1 or draws_per_edit < 1:
            raise ValueError("local search needs positive limits")
        if bool(menu) != bool(routing) or (menu and len(menu) < 2):
            raise ValueError("a menu needs at least two configurations and a routing group")
        self.edits_per_round = edits_per_round
        self.max_depth = max_depth
        self.max_groups = max_groups
        self.draws_per_edit = draws_per_edit
        self.menu = menu_of(menu)
        self.routing = tuple(dict.fromkeys(routing))

    @property
    def id(self) -> str:
        base = (
            f"{self.name}:edits={self.edits_per_round},depth={self.max_depth},"
            f"groups={self.max_groups},draws={self.draws_per_edit}"
        )
        if not self.menu:
            return base
        menu = ";".join("+".join(c) or "-" for c in self.menu)
        return f"{base},menu={menu},routing={'+'.join(self.routing)}"

    def propose(self, context: ProposalContext) -> list[Proposal]:
        rng = context.rng()
        if self.menu:
            moves = _MenuMoves(
                context.tree, context.summary, self.max_depth, self.menu, self.routing
            ).available()
        else:
            moves = _Moves(
                context.tree, context.summary, self.max_depth, self.max_groups
            ).available()
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
        return _retune(rng.choice(self.conditions), self.summary, rng)

    def prune(self, rng: Random) -> Edit:
        return Prune(rng.choice(self.conditions).id)


class _MenuMoves:
    """The moves that keep every leaf on a configuration of ``menu`` (see the module
    docstring), each a function of the random generator."""

    def __init__(
        self,
        tree: ProfilingTree,
        summary: RecordedSummary,
        max_depth: int,
        menu: tuple[tuple[str, ...], ...],
        routing: tuple[str, ...],
    ) -> None:
        self.tree = tree
        self.summary = summary
        self.menu = menu
        self.routing = routing
        nodes = tree.nodes()
        self.leaves = [n for n in nodes if n.is_leaf]
        self.splittable = [n for n in self.leaves if len(tree.path_to(n.id)) - 1 < max_depth]
        self.conditions = [n for n in nodes if not n.is_leaf]

    def available(self) -> list[Move]:
        moves: list[Move] = [self.choose]
        if self.splittable:
            moves.append(self.split)
        if self.conditions:
            moves.extend((self.reroute, self.retune, self.prune))
        return moves

    def choose(self, rng: Random) -> Edit | None:
        leaf = rng.choice(self.leaves)
        options = [c for c in self.menu if c != leaf.collect]
        return Rewrite(leaf.id, rng.choice(options)) if options else None

    def _condition(self, rng: Random, node: Node, routed_by: str) -> Condition | None:
        """A condition on a metric that ``routed_by`` or the groups above ``node`` yield."""
        above = [g for n in self.tree.path_to(node.id)[:-1] for g in n.collect]
        metrics = self.summary.split_metrics((*above, routed_by))
        if not metrics:
            return None
        metric = rng.choice(metrics)
        thresholds = self.summary.thresholds(metric)
        return Condition(metric, SPLIT_OP, rng.choice(thresholds)) if thresholds else None

    def split(self, rng: Random) -> Edit | None:
        leaf = rng.choice(self.splittable)
        routed_by = rng.choice(self.routing)
        condition = self._condition(rng, leaf, routed_by)
        left, right = rng.sample(self.menu, 2)
        if condition is None:
            return None
        return Split(leaf.id, condition, left, right, collect=(routed_by,))

    def reroute(self, rng: Random) -> Edit | None:
        node = rng.choice(self.conditions)
        options = [(g,) for g in self.routing if (g,) != node.collect]
        return Rewrite(node.id, rng.choice(options)) if options else None

    def retune(self, rng: Random) -> Edit | None:
        return _retune(rng.choice(self.conditions), self.summary, rng)

    def prune(self, rng: Random) -> Edit | None:
        node = rng.choice(self.conditions)
        return Prune(node.id) if node.collect in self.menu else None


def _retune(node: Node, summary: RecordedSummary, rng: Random) -> Edit | None:
    """Move ``node``'s threshold to another recorded quartile of its metric."""
    condition = node.condition
    if condition is None or condition.op == "in":
        return None
    options = [t for t in summary.thresholds(condition.metric) if t != condition.threshold]
    if not options:
        return None
    retuned = Condition(condition.metric, condition.op, rng.choice(options))
    return Rewrite(node.id, condition=retuned)
