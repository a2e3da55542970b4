"""JSON round trip and every load error, each reported in one line naming the file."""

import json

import pytest

from autoprofiler.tree import (
    FIXED_TREES,
    Condition,
    Node,
    ProfilingTree,
    TreeError,
    load_tree,
    save_tree,
    tree_from_json,
    tree_to_dict,
    tree_to_json,
)

from .conftest import EXPERT, MEMORY


def test_expert_example_loads(expert):
    assert expert.root.collect == ("static", "ncu.SpeedOfLight")
    assert expert.description.startswith("Expert baseline")
    assert tree_to_dict(expert) == json.loads(EXPERT.read_text())


def test_round_trip_through_a_file(tmp_path, expert):
    tree = ProfilingTree(
        Node(
            "n0",
            ("ncu.SpeedOfLight",),
            Condition(MEMORY, "in", (1, 2)),
            on_true=Node("a", ("ncu.Occupancy",)),
            on_false=Node("b"),
            on_missing=Node("c", ("static",)),
        ),
        description="with a missing branch",
    )
    for original in (tree, expert, *FIXED_TREES.values()):
        path = tmp_path / "tree.json"
        save_tree(original, path)
        loaded = load_tree(path)
        assert loaded == original
        assert loaded.content_hash == original.content_hash
        assert loaded.description == original.description
        assert tree_to_json(loaded) == path.read_text()


def _document(**root_changes) -> dict:
    root = {"id": "n0", "collect": ["ncu.SpeedOfLight"]}
    root.update(root_changes)
    return {"schema": "autoprofiler.tree", "version": 1, "root": root}


def _with_branches(**changes) -> dict:
    branches = {
        "condition": {"metric": MEMORY, "op": ">", "threshold": 60},
        "on_true": {"id": "n1", "collect": ["ncu.Occupancy"]},
        "on_false": {"id": "n2"},
    }
    return _document(**{**branches, **changes})


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"schema": "autoprofiler.tree",', "malformed JSON at line 1"),
        ("[1, 2]", "document: expected an object, got list"),
        (json.dumps({"schema": "autoprofiler.tree", "version": 1}), "missing field 'root'"),
        (json.dumps({**_document(), "schema": "other"}), "schema is 'other'"),
        (json.dumps({**_document(), "version": 2}), "unknown version 2"),
        (json.dumps({**_document(), "version": True}), "unknown version True"),
        (json.dumps(_document(id=None)), "bad node id None"),
        (json.dumps({**_document(), "root": {"collect": []}}), "root: missing field 'id'"),
        (json.dumps(_document(colect=[])), "root: unknown field 'colect'"),
        (json.dumps(_document(collect="static")), "collect must be a list"),
        (json.dumps(_document(collect=["ncu.Bogus"])), "node n0: unknown group 'ncu.Bogus'"),
        (
            json.dumps(_with_branches(condition={"metric": MEMORY, "op": "=>", "threshold": 1})),
            "root.condition: bad operator '=>'",
        ),
        (
            json.dumps(_with_branches(condition={"metric": MEMORY, "op": ">"})),
            "root.condition: missing field 'threshold'",
        ),
        (
            json.dumps(_with_branches(on_false={"id": "n1"})),
            "duplicate node id 'n1'",
        ),
        (json.dumps(_with_branches(on_false=None)), "node n0: condition node needs an on_false"),
        (json.dumps(_document(on_true={"id": "n1"})), "node n0: has branches but no condition"),
        (
            json.dumps(
                _with_branches(condition={"metric": "static.flops", "op": ">", "threshold": 1})
            ),
            "condition on 'static.flops'",
        ),
        (
            json.dumps(_with_branches(on_true={"id": "n1", "on_ture": {}})),
            "root.on_true: unknown field 'on_ture'",
        ),
        ("[" * 100_000 + "]" * 100_000, "nested too deeply"),
    ],
)
def test_load_errors(tmp_path, text, message):
    path = tmp_path / "bad.json"
    path.write_text(text)
    with pytest.raises(TreeError, match=message) as caught:
        load_tree(path)
    assert str(caught.value).startswith(f"{path}: ")
    assert "\n" not in str(caught.value)


def test_missing_file(tmp_path):
    with pytest.raises(TreeError, match=r"nope\.json: cannot read: No such file"):
        load_tree(tmp_path / "nope.json")


def test_from_text_names_its_source():
    with pytest.raises(TreeError, match=r"^<json>: malformed JSON"):
        tree_from_json("{")
