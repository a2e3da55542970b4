"""The proposer plug-in point: the current tree and what is known about it in, edits out.

Contract: ``propose`` is deterministic given its ``ProposalContext`` (the learner replays a
round when a study resumes, and expects the same proposals); randomness comes from
``context.rng()``. A proposal that could not be read or does not apply is returned as a
``Proposal`` with ``error`` set, never raised: the learner records it as an invalid trial.
"""

from __future__ import annotations

import random
from abc import ABC, abstractmethod
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoprofiler.store import content_key

if TYPE_CHECKING:
    from autoprofiler.learn.objective import TreeScore
    from autoprofiler.learn.recorded import RecordedSummary
    from autoprofiler.learn.study import Trial
    from autoprofiler.tree.edits import Edit
    from autoprofiler.tree.model import ProfilingTree


@dataclass(frozen=True)
class ProposalContext:
    """What a proposer may use: the incumbent tree and its training score (with the replayed
    profiles), the budget, the recorded groups and metric values, the trials of earlier rounds,
    the round number and study seed (for ``rng``), and the study's name."""

    tree: ProfilingTree
    score: TreeScore
    budget_s: float | None
    summary: RecordedSummary
    history: Sequence[Trial]
    round: int
    seed: int
    study: str = ""

    def rng(self) -> random.Random:
        """A random generator seeded by the study seed, the round and the tree."""
        return random.Random(content_key("propose", self.seed, self.round, self.tree.content_hash))

    def tried_trees(self) -> frozenset[str]:
        """Hashes of the trees already scored (the incumbent included)."""
        scored = (t.tree_hash for t in self.history if t.score is not None)
        return frozenset({self.tree.content_hash, *scored})


def menu_of(configurations: Sequence[Sequence[str]]) -> tuple[tuple[str, ...], ...]:
    """A menu of configurations (each a sequence of group names), repeats dropped;
    ``ValueError`` for a configuration given as one string (a name, not its groups)."""
    if any(isinstance(c, str) for c in configurations):
        raise ValueError("a menu holds configurations, each a list of group names")
    return tuple(dict.fromkeys(tuple(c) for c in configurations))


class AwaitingReply(Exception):
    """A proposer's question has been asked of a batch, not answered yet: the study stops
    before the round; once the reply is imported, resuming asks again and finds it.
    ``request`` is what to export (an ``autoprofiler.llm.batch.BatchRequest``)."""

    def __init__(self, message: str, request: Any) -> None:
        super().__init__(message)
        self.request = request


@dataclass(frozen=True)
class Proposal:
    """One proposed edit, or (``edit`` None) what was proposed and why it is unusable."""

    edit: Edit | None
    error: str = ""
    proposed: Any = None

    def __post_init__(self) -> None:
        if (self.edit is None) == (not self.error):
            raise ValueError("a proposal has either an edit or an error")


class Proposer(ABC):
    """Proposes edits of a profiling tree, up to ``edits_per_round`` per call."""

    name: str = "proposer"

    @property
    def id(self) -> str:
        """What the study records as its proposer (settings that change proposals included)."""
        return self.name

    @abstractmethod
    def propose(self, context: ProposalContext) -> list[Proposal]:
        """Edits of ``context.tree`` to try, best guess first; empty when there is none left."""
