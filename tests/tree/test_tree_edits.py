"""Edits: each applies immutably, keeps ids stable, and each invalid edit is refused."""

import pytest

from autoprofiler.tree import Condition, Edit, Prune, Rewrite, Split, TreeError, edit_from_dict

from .conftest import COMPUTE, MEMORY

STALL = "smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio"


def test_rewrite_collect(expert):
    new = Rewrite("n4", collect=["ncu.Occupancy"]).apply(expert)
    assert new.node("n4").collect == ("ncu.Occupancy",)
    assert expert.node("n4").collect == ("ncu.LaunchStats", "ncu.Occupancy")
    assert [n.id for n in new.nodes()] == [n.id for n in expert.nodes()]
    assert new.description == expert.description


def test_rewrite_condition_keeps_children(expert):
    new = Rewrite("n0", condition=Condition(MEMORY, ">=", 75)).apply(expert)
    assert new.root.condition == Condition(MEMORY, ">=", 75)
    assert new.root.on_false is expert.root.on_false
    assert new.content_hash != expert.content_hash


def test_split_a_leaf(expert):
    edit = Split("n3", Condition(STALL, ">", 2), ["ncu.SourceCounters"], ["ncu.SchedulerStats"])
    new = edit.apply(expert)
    n3 = new.node("n3")
    assert n3.collect == ("ncu.ComputeWorkloadAnalysis", "ncu.WarpStateStats")
    assert n3.condition == Condition(STALL, ">", 2)
    assert (n3.on_true.id, n3.on_true.collect) == ("n5", ("ncu.SourceCounters",))
    assert (n3.on_false.id, n3.on_false.collect) == ("n6", ("ncu.SchedulerStats",))
    assert n3.on_missing is None
    assert expert.node("n3").is_leaf
    # A second split gets ids that do not collide with the first one's.
    again = Split("n6", Condition(COMPUTE, "<", 10), [], ["ncu.LaunchStats"]).apply(new)
    assert {"n7", "n8"} <= {n.id for n in again.nodes()}


def test_prune_keeps_the_nodes_groups(expert):
    new = Prune("n2").apply(expert)
    assert new.node("n2").is_leaf and new.node("n2").collect == ()
    assert new.size == 3
    assert Prune("n0").apply(expert).size == 1


@pytest.mark.parametrize(
    ("make_edit", "message"),
    [
        (lambda: Rewrite("n9", collect=["static"]), "unknown node 'n9'"),
        (lambda: Split("n9", Condition(MEMORY, ">", 1), ["static"], []), "unknown node 'n9'"),
        (lambda: Prune("n9"), "unknown node 'n9'"),
        (lambda: Rewrite("n1", collect=["ncu.Bogus"]), "node n1: unknown group 'ncu.Bogus'"),
        (
            lambda: Split("n1", Condition(MEMORY, ">", 1), ["ncu.Bogus"], []),
            "unknown group 'ncu.Bogus'",
        ),
        # The condition on n1 could only use what n0 and n1 collect: no stall reasons there.
        (
            lambda: Split("n1", Condition(STALL, ">", 1), ["static"], []),
            f"node n1: condition on '{STALL}'",
        ),
        # n0's own condition needs the SpeedOfLight group that this rewrite removes.
        (lambda: Rewrite("n0", collect=["static"]), f"node n0: condition on '{MEMORY}'"),
        (lambda: Split("n0", Condition(MEMORY, ">", 1), ["static"], []), "n0: it is not a leaf"),
        (lambda: Split("n1", Condition(MEMORY, ">", 1), [], []), "needs a branch that collects"),
        (lambda: Rewrite("n1", condition=Condition(MEMORY, ">", 1)), "n1 is a leaf"),
        (lambda: Rewrite("n1"), "changes nothing"),
        (lambda: Rewrite("n1", collect="static"), "must be a list of group names"),
        (lambda: Prune("n1"), "cannot prune n1: it is already a leaf"),
    ],
)
def test_invalid_edits(expert, make_edit, message):
    with pytest.raises(TreeError, match=message) as caught:
        make_edit().apply(expert)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "edit",
    [
        Rewrite("n4", collect=("ncu.Occupancy",)),
        Rewrite("n0", condition=Condition(MEMORY, "in", (1, 2))),
        Split("n1", Condition(MEMORY, ">", 90), ("ncu.Roofline",), ()),
        Prune("n2"),
    ],
    ids=str,
)
def test_edit_round_trip(expert, edit: Edit):
    again = edit_from_dict(edit.to_dict())
    assert again == edit
    assert again.apply(expert) == edit.apply(expert)


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"kind": "graft", "node_id": "n1"}, "needs a kind"),
        ([], "needs a kind"),
        ({"kind": "prune", "node": "n1"}, "bad fields for a prune edit: node"),
        (
            {"kind": "rewrite", "node_id": "n0", "condition": {"metric": MEMORY, "op": "~"}},
            "edit.condition: missing field 'threshold'",
        ),
    ],
)
def test_edit_from_dict_errors(data, message):
    with pytest.raises(TreeError, match=message):
        edit_from_dict(data)
