"""The tree model: conditions, node structure, identity, lookups and catalogue validation."""

import dataclasses

import pytest

from autoprofiler.tree import Condition, Node, ProfilingTree, TreeError

from .conftest import COMPUTE, MEMORY


@pytest.mark.parametrize(
    ("op", "threshold", "value", "expected"),
    [
        ("<", 60, 59.9, True),
        ("<", 60, 60, False),
        ("<=", 60, 60, True),
        (">", 60, 60, False),
        (">", 60, 86.5, True),
        (">=", 60, 60, True),
        ("==", 2, 2.0, True),
        ("==", 2, 3, False),
        ("in", (1, 2), 2.0, True),
        ("in", [1, 2], 3.0, False),
    ],
)
def test_condition_operators(op, threshold, value, expected):
    assert Condition("static.op_count", op, threshold).test(value) is expected


def test_condition_normalises_thresholds():
    assert Condition(MEMORY, ">", 60) == Condition(MEMORY, ">", 60.0)
    assert Condition("static.op_count", "in", [1, 2]).threshold == (1.0, 2.0)
    assert str(Condition(MEMORY, "in", (1, 2.5))) == f"{MEMORY} in (1, 2.5)"


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ((MEMORY, "=>", 60), "bad operator '=>'"),
        ((MEMORY, ">", "60"), "is not a finite number"),
        ((MEMORY, ">", float("nan")), "is not a finite number"),
        ((MEMORY, ">", True), "is not a finite number"),
        ((MEMORY, "in", ()), "non-empty list"),
        ((MEMORY, "in", 3), "non-empty list"),
        (("", ">", 1), "needs a metric"),
    ],
)
def test_condition_errors(args, message):
    with pytest.raises(TreeError, match=message):
        Condition(*args)


def test_node_structure_errors():
    leaf = Node("n1")
    cond = Condition(MEMORY, ">", 60)
    with pytest.raises(TreeError, match="needs an on_false branch"):
        Node("n0", condition=cond, on_true=leaf)
    with pytest.raises(TreeError, match="needs an on_true branch"):
        Node("n0", condition=cond, on_false=leaf)
    with pytest.raises(TreeError, match="has branches but no condition"):
        Node("n0", on_true=leaf, on_false=Node("n2"))
    with pytest.raises(TreeError, match="collects 'static' twice"):
        Node("n0", ("static", "static"))
    with pytest.raises(TreeError, match="bad node id"):
        Node("n 0")
    with pytest.raises(TreeError, match="list of group names"):
        Node("n0", "static")


def test_immutable_equal_and_hashed(expert):
    with pytest.raises(dataclasses.FrozenInstanceError):
        expert.root.collect = ()  # type: ignore[misc]
    same = ProfilingTree(expert.root, description="other words")
    assert same == expert and hash(same) == hash(expert)
    assert same.content_hash == expert.content_hash
    # Pinned: the hash keys cached results, so a change of canonical form must be deliberate.
    assert expert.content_hash == "a069f7c6e8177319"
    changed = expert.replace_node("n2", dataclasses.replace(expert.node("n2"), collect=("static",)))
    assert changed != expert and changed.content_hash != expert.content_hash


def test_lookups(expert):
    assert [n.id for n in expert.nodes()] == ["n0", "n1", "n2", "n3", "n4"]
    assert [n.id for n in expert.path_to("n4")] == ["n0", "n2", "n4"]
    assert expert.groups_on_path("n3") == (
        "static",
        "ncu.SpeedOfLight",
        "ncu.ComputeWorkloadAnalysis",
        "ncu.WarpStateStats",
    )
    assert (expert.size, expert.depth) == (5, 2)
    assert expert.node("n2").condition == Condition(COMPUTE, ">", 60)
    with pytest.raises(TreeError, match="unknown node 'n9'"):
        expert.node("n9")


def test_fresh_ids_never_collide():
    tree = ProfilingTree(
        Node(
            "n0",
            condition=Condition("static.flops", ">", 1),
            on_true=Node("n7"),
            on_false=Node("x"),
        )
    )
    assert tree.fresh_ids(2) == ("n8", "n9")
    assert ProfilingTree(Node("root")).fresh_ids(1) == ("n0",)


def test_replace_node_leaves_the_original(expert):
    new = expert.replace_node("n4", Node("n4", ("ncu.Occupancy",)))
    assert new.node("n4").collect == ("ncu.Occupancy",)
    assert expert.node("n4").collect == ("ncu.LaunchStats", "ncu.Occupancy")
    assert new.node("n1") is expert.node("n1")


def _tree(collect: tuple[str, ...], metric: str, child_ids=("n1", "n2")) -> ProfilingTree:
    cond = Condition(metric, ">", 1)
    return ProfilingTree(
        Node("n0", collect, cond, on_true=Node(child_ids[0]), on_false=Node(child_ids[1]))
    )


def test_validate_accepts_the_nodes_own_groups(expert):
    assert expert.validate() is expert
    assert _tree(("ncu.SpeedOfLight",), COMPUTE).validate()
    assert _tree(("static",), "static.flops").validate()


@pytest.mark.parametrize(
    ("tree", "message"),
    [
        (_tree(("ncu.Bogus",), COMPUTE), "node n0: unknown group 'ncu.Bogus'"),
        (_tree(("static",), COMPUTE), f"node n0: condition on '{COMPUTE}'.*\\(static\\)"),
        (_tree((), "static.flops"), "collected on the path to it \\(nothing\\) cannot provide"),
        (_tree(("static",), "static.flops", ("n1", "n1")), "duplicate node id 'n1'"),
    ],
)
def test_validate_errors(tree, message):
    with pytest.raises(TreeError, match=message):
        tree.validate()
