"""Trees that show the rewriter one configuration per leaf (``show: leaf``): the routing
groups are paid for and hidden, a leaf's groups are taken whole or not at all, and on real
recordings the rewriter's prompt is exactly that of the fixed configuration."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest

from autoprofiler.profile import RecordedProfiler, import_recordings
from autoprofiler.profile.base import MetricValue
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.llm_rewriter import build_messages, profile_text
from autoprofiler.store import Store
from autoprofiler.tree import (
    Condition,
    Node,
    ProfilingTree,
    Split,
    TreeError,
    resolve_tree,
    tree_from_json,
    tree_to_json,
)

from .conftest import COSTS_S, KERNELS, MEMORY, ReplayProfiler, read_sol_kernel

SOL = "ncu.SpeedOfLight"
MWA = "ncu.MemoryWorkloadAnalysis"
DRAM_BYTES = "dram__bytes_read.sum"
RECORDINGS = Path(__file__).resolve().parents[1] / "data" / "recordings" / "examples_h200.jsonl.gz"


def routed(left: tuple[str, ...], right: tuple[str, ...]) -> ProfilingTree:
    """Route on SpeedOfLight's memory throughput; show ``left`` above 60 %, else ``right``."""
    root = Node(
        "n0",
        (SOL,),
        Condition(MEMORY, ">", 60),
        on_true=Node("n1", left),
        on_false=Node("n2", right),
    )
    return ProfilingTree(root, show="leaf").validate()


@pytest.fixture
def profiler() -> ReplayProfiler:
    metrics = {
        SOL: read_sol_kernel(*KERNELS["softmax"]),  # memory-bound: takes on_true
        MWA: {DRAM_BYTES: MetricValue(4.2e9, "byte", MWA)},
    }
    served = ReplayProfiler(metrics, COSTS_S, startup_s=2.0)
    served.name = "ncu"  # it stands for ncu: a view of ncu groups costs one of its start-ups
    return served


def test_routing_group_is_paid_and_hidden(problem, profiler):
    profile = routed((MWA,), ()).run(problem, profiler)
    assert profile.path == ["n0", "n1"]
    assert profiler.calls == [(SOL,), (MWA,)]
    assert profile.cost_s == pytest.approx(2 + 1.5 + 2 + 2.0)  # both steps charged
    shown = profile.shown
    assert shown is not None and shown.groups == [MWA]
    assert set(shown.metrics) == {DRAM_BYTES}
    assert shown.cost_s == pytest.approx(2 + 2.0)  # MWA alone: one start-up and its cost
    assert profile.seen is shown and profile.content_hash == shown.content_hash
    text = profile_text(profile)
    assert "dram__bytes_read" in text and MEMORY not in text and SOL not in text


def test_leaf_shows_a_routing_group_it_lists_without_collecting_it_again(problem, profiler):
    profile = routed((SOL, MWA), ()).run(problem, profiler)
    assert profiler.calls == [(SOL,), (MWA,)]
    assert profile.shown is not None and profile.shown.groups == [SOL, MWA]
    assert profile.shown.value(MEMORY) == profile.value(MEMORY)


def test_leaf_that_lists_nothing_shows_nothing(problem, profiler):
    profile = routed((MWA,), ()).run(problem, replace_kernel(profiler, "tiny"))
    assert profile.path == ["n0", "n2"]
    assert profile.shown is not None and not profile.shown.metrics
    assert "Nothing was collected" in profile_text(profile)


def replace_kernel(profiler: ReplayProfiler, kernel: str) -> ReplayProfiler:
    profiler.metrics[SOL] = read_sol_kernel(*KERNELS[kernel])
    return profiler


def test_leaf_groups_are_taken_whole_or_not_at_all(problem, profiler):
    # 3.5 s for the SpeedOfLight step leaves 4.5 s: MWA (4 s) fits, MWA + Occupancy (4.5 s
    # and the slack) fits, MWA + Occupancy + LaunchStats (5 s) does not, so none is collected.
    tree = routed((MWA, "ncu.Occupancy", "ncu.LaunchStats"), ())
    profile = tree.run(problem, profiler, budget_s=8.0)
    assert profiler.calls == [(SOL,)]
    assert [s.group for s in profile.skipped] == [MWA, "ncu.Occupancy", "ncu.LaunchStats"]
    assert all("together" in s.reason for s in profile.skipped)
    assert profile.shown is not None and not profile.shown.metrics and not profile.shown.groups
    assert profile.cost_s == pytest.approx(3.5)


def test_a_listed_routing_group_skipped_for_budget_hides_the_whole_leaf(problem, profiler):
    profile = routed((SOL, MWA), ()).run(problem, profiler, budget_s=1.0)
    assert profile.shown is not None and not profile.shown.groups  # SOL never fit


def test_path_mode_shows_everything(problem, profiler):
    tree = ProfilingTree(routed((MWA,), ()).root)
    profile = tree.run(problem, profiler)
    assert profile.shown is None and profile.seen is profile
    assert MEMORY in profile_text(profile)


def test_show_is_saved_and_part_of_the_identity(expert):
    leaf = replace(expert, show="leaf")
    assert leaf != expert and leaf.content_hash != expert.content_hash
    assert '"show": "leaf"' in tree_to_json(leaf) and '"show"' not in tree_to_json(expert)
    again = tree_from_json(tree_to_json(leaf))
    assert again == leaf and again.show == "leaf"
    edited = leaf.replace_node("n1", Node("n1", ("ncu.Occupancy",)))
    assert edited.show == "leaf"


def test_bad_show_is_a_one_line_error(expert):
    data = json.loads(tree_to_json(expert)) | {"show": "everything"}
    with pytest.raises(TreeError, match="show must be one of path, leaf, not 'everything'"):
        tree_from_json(json.dumps(data), source="t.json")
    with pytest.raises(TreeError, match="show must be one of"):
        ProfilingTree(expert.root, show="all")


def test_split_may_change_what_the_node_collects_to_route():
    start = ProfilingTree(Node("n0", (SOL, MWA)), show="leaf")
    edit = Split("n0", Condition("static.flops", ">", 1e9), (SOL,), (), collect=("static",))
    tree = edit.apply(start)
    assert tree.root.collect == ("static",) and tree.root.on_true.collect == (SOL,)
    assert tree.show == "leaf"
    kept = Split("n0", Condition(MEMORY, ">", 60), (SOL,), ()).apply(start)
    assert kept.root.collect == (SOL, MWA)
    assert "(collect static)" in str(edit) and edit.to_dict()["collect"] == ["static"]
    with pytest.raises(TreeError):  # routing on a metric the new collect cannot yield
        Split("n0", Condition(MEMORY, ">", 1), (SOL,), (), collect=("static",)).apply(start)


CONFIGS = ("none", "static", "SpeedOfLight", "SpeedOfLight+MemoryWorkloadAnalysis", "full")


@pytest.fixture(scope="module")
def recorded() -> tuple[Store, RecordedProfiler, list]:
    store = Store(":memory:")
    import_recordings(RECORDINGS, store)
    hashes = dict.fromkeys(h for h, *_ in store.iter_profile_records())
    problems = [p for h in hashes if (p := store.get_problem(h)) is not None]
    return store, RecordedProfiler(store, "H200"), problems


@pytest.mark.parametrize("config", CONFIGS)
def test_a_routed_leaf_asks_exactly_the_fixed_configurations_question(recorded, config):
    """On every recorded example, a leaf reached through static routing and a SpeedOfLight
    step asks the rewriter the very request the fixed configuration asks (same messages)."""
    _, profiler, problems = recorded
    shown = resolve_tree(config).root.collect
    root = Node(
        "n0",
        ("static", SOL),
        Condition("static.flops", ">=", 0),
        on_true=Node("n1", shown),
        on_false=Node("n2", ()),
    )
    tree = ProfilingTree(root, show="leaf").validate()
    context = RewriteContext.for_target("cuda", "H200", _cuda_config())
    for problem in problems:
        fixed = resolve_tree(config).run(problem, profiler)
        through = tree.run(problem, profiler)
        assert through.path == ["n0", "n1"]
        assert build_messages(problem, through, context) == build_messages(problem, fixed, context)
        assert through.content_hash == fixed.content_hash
        assert through.cost_s >= fixed.cost_s


def _cuda_config():
    from autoprofiler.evaluate import EvalConfig

    return EvalConfig(device="cuda")
