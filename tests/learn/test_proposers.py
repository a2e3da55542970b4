"""Both proposers on the real recordings: local search's edits, and the LLM proposer's prompt
and reply parsing (the live server is exercised in test_learner_llm.py)."""

from __future__ import annotations

import pytest

from autoprofiler.learn import (
    LLMProposer,
    LocalSearchProposer,
    ProposalContext,
    RecordedSummary,
    parse_edits,
)
from autoprofiler.learn.objective import Objective, ProblemOutcome
from autoprofiler.problem import Problem
from autoprofiler.profile import RecordedProfiler
from autoprofiler.profile.catalogue import GROUPS, metric_available
from autoprofiler.store import Store
from autoprofiler.tree import Node, ProfilingTree, Prune, Rewrite, Split, fixed_tree, run_tree
from autoprofiler.tree.model import Condition

from .conftest import DEVICE

GATED = ProfilingTree(
    Node(
        "n0",
        ("static",),
        Condition("static.op_count", ">", 3.0),
        on_true=Node("n1", ("torch.kernels",)),
        on_false=Node("n2", ()),
    )
)


def context(
    store: Store, train: list[Problem], tree: ProfilingTree, seed: int = 0, failed: bool = False
) -> ProposalContext:
    """A proposal context whose score is made of the real replayed profiles of ``tree``
    (outcomes written by hand: the first problem failed, or everything ran at 0.5x)."""
    profiler = RecordedProfiler(store, DEVICE)
    profiles = {p.content_hash: run_tree(tree, p, profiler, 20.0) for p in train}
    outcomes = [
        ProblemOutcome(
            problem=p.key,
            problem_hash=p.content_hash,
            profile_hash=profiles[p.content_hash].content_hash,
            groups=tuple(profiles[p.content_hash].groups),
            skipped=(),
            cost_s=profiles[p.content_hash].cost_s,
            candidate_hash="c",
            correct=not (failed and i == 0),
            speedup=None if failed and i == 0 else 0.5,
            failure="wrong_values: max abs diff 3.2" if failed and i == 0 else "",
        )
        for i, p in enumerate(train)
    ]
    score = Objective().score(outcomes, profiles)
    summary = RecordedSummary.of(profiler, train)
    return ProposalContext(tree, score, 20.0, summary, (), round=0, seed=seed)


def test_the_summary_offers_recorded_groups_and_quartile_thresholds(
    store: Store, train: list[Problem]
) -> None:
    summary = RecordedSummary.of(RecordedProfiler(store, DEVICE), train)
    assert list(summary.groups) == list(GROUPS)  # every group is recorded for the examples
    assert summary.startup_s["ncu"] > 5  # the recorded ncu start-up on the H200
    values = summary.values["static.roofline_time_ms"]
    low, middle, high = summary.thresholds("static.roofline_time_ms")
    assert min(values) <= low < middle < high <= max(values)
    assert "static.bytes" in summary.split_metrics(["static"])
    assert "static.bytes" not in summary.split_metrics(["torch.ops"])


@pytest.mark.parametrize("tree", [fixed_tree("none"), fixed_tree("static"), GATED])
def test_local_search_proposes_distinct_valid_new_edits(
    store: Store, train: list[Problem], tree: ProfilingTree
) -> None:
    ctx = context(store, train, tree)
    proposals = LocalSearchProposer(edits_per_round=5).propose(ctx)
    assert 1 <= len(proposals) <= 5
    trees = [p.edit.apply(tree) for p in proposals if p.edit is not None]
    assert len(trees) == len(proposals)
    hashes = {t.content_hash for t in trees}
    assert len(hashes) == len(trees) and tree.content_hash not in hashes
    for proposal in proposals:
        edit = proposal.edit
        if isinstance(edit, Split):
            assert edit.condition.threshold in ctx.summary.thresholds(edit.condition.metric)
            assert metric_available(edit.condition.metric, tree.groups_on_path(edit.leaf_id))


def test_local_search_is_seeded_and_knows_every_move(store: Store, train: list[Problem]) -> None:
    proposer = LocalSearchProposer(edits_per_round=6)
    first = proposer.propose(context(store, train, GATED, seed=1))
    assert first == proposer.propose(context(store, train, GATED, seed=1))
    assert first != proposer.propose(context(store, train, GATED, seed=2))
    kinds = {
        type(p.edit).__name__
        if not isinstance(p.edit, Rewrite) or p.edit.collect is not None
        else "Retune"
        for seed in range(6)
        for p in proposer.propose(context(store, train, GATED, seed=seed))
    }
    assert kinds == {"Rewrite", "Split", "Prune", "Retune"}


def test_local_search_skips_trees_already_scored(store: Store, train: list[Problem]) -> None:
    ctx = context(store, train, fixed_tree("none"))
    every = LocalSearchProposer(edits_per_round=50).propose(ctx)
    # From an empty root the only edits collect one of the recorded groups.
    assert len(every) == len(ctx.summary.groups) == len(GROUPS)
    assert all(isinstance(p.edit, Rewrite) and len(p.edit.collect or ()) == 1 for p in every)


MENU = ((), ("static",), ("ncu.SpeedOfLight",), ("ncu.SpeedOfLight", "ncu.Occupancy"))
ROUTING = ("static", "ncu.SpeedOfLight")


def test_menu_search_keeps_every_leaf_on_the_menu(store: Store, train: list[Problem]) -> None:
    """Walking many rounds of menu edits from a leaf-mode tree: every leaf shows a menu
    configuration and every condition node collects one routing group; all moves occur."""
    proposer = LocalSearchProposer(edits_per_round=6, menu=MENU, routing=ROUTING)
    tree = ProfilingTree(Node("n0", ("static",)), show="leaf")
    kinds: set[str] = set()
    for round_ in range(25):
        proposals = proposer.propose(context(store, train, tree, seed=round_))
        assert proposals and all(p.edit is not None for p in proposals)
        for proposal in proposals:
            edited = proposal.edit.apply(tree)
            assert edited.show == "leaf"
            for node in edited.nodes():
                assert node.collect in (MENU if node.is_leaf else [(g,) for g in ROUTING])
            kinds.add(type(proposal.edit).__name__)
        tree = proposals[round_ % len(proposals)].edit.apply(tree)  # wander
    assert kinds == {"Rewrite", "Split", "Prune"}
    assert "menu=-;static;" in proposer.id


def test_a_menu_needs_routing_and_two_configurations() -> None:
    with pytest.raises(ValueError, match="menu"):
        LocalSearchProposer(menu=MENU)
    with pytest.raises(ValueError, match="menu"):
        LocalSearchProposer(menu=[()], routing=ROUTING)
    with pytest.raises(ValueError, match="a menu holds configurations"):
        LocalSearchProposer(menu={"none": (), "static": ("static",)}, routing=ROUTING)


REPLY = """Here are my edits:
```json
[{"kind": "rewrite", "node_id": "n0", "collect": ["static", "ncu.SpeedOfLight"]},
 {"kind": "prune", "node_id": "n7"},
 {"kind": "split", "leaf_id": "n0", "condition": {"metric": "static.op_count", "op": ">",
  "threshold": 3}, "left_collect": ["torch.ops"], "right_collect": []}]
```"""


def test_a_reply_is_read_as_validated_edits() -> None:
    tree = fixed_tree("static")
    proposals = parse_edits(REPLY, tree, limit=4)
    assert proposals[0].edit == Rewrite("n0", ("static", "ncu.SpeedOfLight"))
    assert proposals[1].edit is None and "unknown node 'n7'" in proposals[1].error
    assert proposals[1].proposed == {"kind": "prune", "node_id": "n7"}
    assert isinstance(proposals[2].edit, Split)
    assert len(parse_edits(REPLY, tree, limit=1)) == 1
    single = parse_edits('{"edits": [{"kind": "prune", "node_id": "n0"}]}', GATED, 4)
    assert single[0].edit == Prune("n0")


@pytest.mark.parametrize(
    ("reply", "error"),
    [
        ("I would collect more metrics.", "no JSON edit in the reply"),
        ("```json\n[1, 2\n```", "no JSON edit in the reply"),
        ('"collect everything"', "no JSON edit in the reply"),
        ("[]", "the JSON is not a list of edits"),
        ('[{"kind": "grow"}]', "edit 1: an edit needs a kind"),
        ('[{"kind": "rewrite", "node_id": "n0", "collect": "static"}]', "edit 1: rewrite collect"),
        ('[{"kind": "rewrite", "node": "n0"}]', "edit 1: bad fields"),
        ('[{"kind": "rewrite", "node_id": "n0", "collect": ["ncu.Nope"]}]', "unknown group"),
    ],
)
def test_an_unusable_reply_becomes_a_proposal_with_its_reason(reply: str, error: str) -> None:
    proposals = parse_edits(reply, fixed_tree("static"), limit=4)
    assert len(proposals) == 1
    assert proposals[0].edit is None
    assert error in proposals[0].error


class NoModel:
    model_id = "test:none"


def test_the_prompt_shows_tree_budget_catalogue_and_feedback(
    store: Store, train: list[Problem]
) -> None:
    ctx = context(store, train, fixed_tree("SpeedOfLight"), failed=True)
    system, user = LLMProposer(NoModel(), feedback_problems=1).messages(ctx)  # type: ignore[arg-type]
    text = user["content"]
    assert system["role"] == "system" and "profiling tree" in system["content"]
    assert '"ncu.SpeedOfLight"' in text  # the tree as JSON
    assert "Budget: 20 s per problem" in text
    assert "- torch.ops (torch, ~0.0037 s, recorded for 2)" in text
    assert f"ncu {ctx.summary.startup_s['ncu']:.2g} s" in text  # the recorded start-up
    assert "sm__throughput.avg.pct_of_peak_sustained_elapsed" in text  # a curated metric first
    assert "### 05_elementwise_chain: failed: wrong_values: max abs diff 3.2" in text
    assert "[ncu.SpeedOfLight]" in text  # its rendered profile
    assert "09_reduction" not in text  # one problem of feedback only
