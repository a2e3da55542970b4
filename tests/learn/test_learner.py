"""The learner through the real evaluator: candidates of the ``GatedRewriter`` are evaluated on
the CPU (two programs per problem, cached in the session's store after their first run)."""

from __future__ import annotations

import math
import shutil
import sqlite3
from collections.abc import Sequence
from pathlib import Path

import pytest

from autoprofiler.learn import (
    LearnConfig,
    LocalSearchProposer,
    Objective,
    Proposal,
    ProposalContext,
    Proposer,
    StudyError,
    StudyStorage,
    TreeLearner,
    Trial,
    TrialState,
)
from autoprofiler.problem import Problem
from autoprofiler.rewrite.llm_rewriter import LLMRewriter
from autoprofiler.rewrite.rules import RuleRewriter
from autoprofiler.store import Store
from autoprofiler.tree import Node, ProfilingTree, Rewrite, fixed_tree

from .conftest import make_scorer
from .gated_rewriter import GatedRewriter

SOL_METRIC = "sm__throughput.avg.pct_of_peak_sustained_elapsed"


class ScriptedProposer(Proposer):
    """Proposes the given proposals in round ``i`` (nothing once the script runs out)."""

    name = "scripted"

    def __init__(self, *rounds: Sequence[Proposal]) -> None:
        self.rounds = rounds

    def propose(self, context: ProposalContext) -> list[Proposal]:
        return list(self.rounds[context.round]) if context.round < len(self.rounds) else []


def collect(*groups: str) -> Proposal:
    return Proposal(Rewrite("n0", groups))


def test_an_edit_that_helps_is_accepted_and_one_that_hurts_is_rejected(
    store: Store, train: list[Problem], validation: list[Problem]
) -> None:
    proposer = ScriptedProposer(
        [collect("torch.ops"), collect("static")],  # no help (and dearer), then the gate
        [collect()],  # back to nothing: the slow candidates again
    )
    learner = TreeLearner(make_scorer(store), proposer, LearnConfig(iterations=5))
    result = learner.learn("helps-hurts", train, validation)

    states = [(t.round, t.index, t.state) for t in result.trials]
    assert states == [
        (0, 0, TrialState.REJECTED),
        (0, 1, TrialState.ACCEPTED),
        (1, 0, TrialState.REJECTED),
    ]
    dearer, helps, hurts = result.trials
    assert "not cheaper" in dearer.reason
    assert helps.reason.startswith("better") and hurts.reason.startswith("worse")
    assert result.tree.root.collect == ("static",)
    assert result.start_score.geomean_speedup < 0.25  # every candidate repeats the reference
    assert result.score.geomean_speedup > 0.6  # the reference itself, about 1.0x
    assert all(o.correct for o in result.score.outcomes)
    # The held-out set is scored for the start tree and accepted trees only.
    assert result.validation is not None and result.start_validation is not None
    assert result.validation.value > result.start_validation.value
    assert (dearer.validation, hurts.validation) == (None, None)
    assert result.stop_reason == "the proposer has nothing new to try"
    # The last trial gives every problem the start tree's (empty) profile again.
    assert result.cache.hit_rate > 0 and result.accepted == 1


def test_the_flags_on_a_builtin_rewriters_candidates_do_not_discount_them(
    store: Store, train: list[Problem]
) -> None:
    """The gated rewriter's candidates run the reference's own ops, which the evaluator flags.
    From a model's rewriter that is a suspected reward hack and counts as a failure; the same
    verdicts of a builtin rewriter (autoprofiler's own code, as the rule rewriter's
    torch.compile builds the reference ``Model``) count at their speedups."""
    strict = Objective()
    tree = fixed_tree("static")
    from_a_model = make_scorer(store, objective=strict).score(tree, train)
    builtin = GatedRewriter()
    builtin.builtin = True
    ours = make_scorer(store, builtin, objective=strict).score(tree, train)
    assert from_a_model.flagged == len(train) and from_a_model.fast_1 == 0
    assert from_a_model.geomean_speedup == pytest.approx(1.0)  # failures count 1.0x
    assert ours.flagged == 0 and all(o.flagged == () for o in ours.outcomes)
    speedups = [o.speedup for o in ours.outcomes]
    assert speedups == [o.speedup for o in from_a_model.outcomes]  # the same verdicts
    assert ours.geomean_speedup == pytest.approx(math.prod(speedups) ** (1 / len(speedups)))
    assert RuleRewriter.builtin and not LLMRewriter.builtin


def test_a_group_over_the_budget_is_skipped(store: Store, train: list[Problem]) -> None:
    scorer = make_scorer(store, GatedRewriter(metric=SOL_METRIC), budget_s=5.0)
    proposer = ScriptedProposer([collect("static", "ncu.SpeedOfLight")])
    result = TreeLearner(scorer, proposer).learn("over-budget", train)

    (trial,) = result.trials
    assert trial.state is TrialState.REJECTED
    assert trial.score is not None
    for outcome in trial.score.outcomes:
        assert outcome.groups == ("static",)
        assert outcome.skipped == ("ncu.SpeedOfLight",)
        assert outcome.cost_s <= 5.0
    # Skipped, the ncu metric never reached the rewriter: same candidates as before.
    assert trial.score.value == pytest.approx(result.start_score.value)


def test_unusable_proposals_become_invalid_trials(store: Store, train: list[Problem]) -> None:
    proposer = ScriptedProposer(
        [
            Proposal(None, "no JSON edit in the reply", "I think you should profile more."),
            Proposal(Rewrite("n9", ("static",))),
            collect(),
        ]
    )
    result = TreeLearner(make_scorer(store), proposer).learn("invalid", train)
    assert [t.state for t in result.trials] == [TrialState.INVALID] * 3
    assert [t.reason for t in result.trials] == [
        "no JSON edit in the reply",
        "unknown node 'n9'",
        "the edit changes nothing",
    ]
    assert result.trials[0].proposed == "I think you should profile more."
    assert all(t.score is None for t in result.trials)


def test_two_trees_giving_the_same_information_cost_nothing_the_second_time(
    store_path: Path, tmp_path: Path, train: list[Problem]
) -> None:
    copy = tmp_path / "without_full.sqlite"
    shutil.copyfile(store_path, copy)
    with sqlite3.connect(copy) as db:  # as if ncu.set.full had never been recorded
        db.execute("DELETE FROM profile_records WHERE grp = 'ncu.set.full'")
    with Store(copy) as store:
        scorer = make_scorer(store, GatedRewriter(repeats=12, delay_s=0.0))
        first = scorer.score(fixed_tree("static"), train)
        before = (scorer.stats.rewrites - scorer.stats.rewrite_hits, scorer.stats.evaluations_run)
        # Replayed, a group never recorded adds nothing to the profile.
        same = ProfilingTree(Node("n0", ("ncu.set.full", "static")))
        second = scorer.score(same, train)
        after = (scorer.stats.rewrites - scorer.stats.rewrite_hits, scorer.stats.evaluations_run)
    assert after == before
    assert second.value == first.value
    assert [o.skipped for o in second.outcomes] == [("ncu.set.full",)] * len(train)


def test_a_study_stops_on_patience_and_time(store: Store, train: list[Problem]) -> None:
    stuck = ScriptedProposer(*([collect("torch.ops")] for _ in range(5)))
    result = TreeLearner(make_scorer(store), stuck, LearnConfig(patience=2)).learn("stuck", train)
    assert result.stop_reason == "no improvement for 2 rounds"
    assert len(result.trials) == 2
    timed = TreeLearner(make_scorer(store), stuck, LearnConfig(time_limit_s=0.0))
    result = timed.learn("no-time", train)
    assert (result.stop_reason, result.trials) == ("time limit", ())


def path(trials: Sequence[Trial]) -> list[tuple]:
    return [(t.number, t.round, t.index, t.edit, t.state) for t in trials]


def searcher(store: Store, iterations: int, rewriter: GatedRewriter | None = None) -> TreeLearner:
    proposer = LocalSearchProposer(edits_per_round=3)
    return TreeLearner(
        make_scorer(store, rewriter), proposer, LearnConfig(iterations, patience=5, seed=0)
    )


def test_a_study_resumes_after_its_last_round(store: Store, train: list[Problem]) -> None:
    whole = searcher(store, 3).learn("whole", train)
    searcher(store, 1).learn("halves", train)
    with pytest.raises(StudyError, match="exists"):
        searcher(store, 3).learn("halves", train)
    resumed = searcher(store, 3).learn("halves", train, resume=True)
    assert path(resumed.trials) == path(whole.trials)
    assert resumed.tree == whole.tree
    with pytest.raises(StudyError, match="different budget_s"):
        TreeLearner(make_scorer(store, budget_s=1.0), LocalSearchProposer(3)).learn(
            "halves", train, resume=True
        )


def test_a_study_killed_mid_round_resumes_with_the_next_proposal(
    store: Store, train: list[Problem]
) -> None:
    # A rewriter of its own name, whose candidates are not cached yet: its 7th rewrite (of 16)
    # comes in the second round, which the interruption leaves unfinished.
    options = {"delay_s": 0.001}
    with pytest.raises(KeyboardInterrupt):
        searcher(store, 3, GatedRewriter(interrupt_after=6, **options)).learn("killed", train)
    killed = StudyStorage(store).trials("killed")
    assert killed[-1].round == 1 and killed[-1].index + 1 < killed[-1].round_size
    resumed = searcher(store, 3, GatedRewriter(**options)).learn("killed", train, resume=True)
    whole = searcher(store, 3, GatedRewriter(**options)).learn("unkilled", train)
    assert path(resumed.trials) == path(whole.trials)
    assert path(resumed.trials[: len(killed)]) == path(killed)
