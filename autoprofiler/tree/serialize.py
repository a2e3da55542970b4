"""Reading and writing profiling trees as JSON (format: docs/tree-format.md).

Every reader validates what it reads and raises ``TreeError`` with one line naming the source
(file name or ``<json>``) and the problem.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from autoprofiler.tree.model import BRANCHES, SHOW_MODES, Condition, Node, ProfilingTree, TreeError

SCHEMA = "autoprofiler.tree"
VERSION = 1
_DOCUMENT_FIELDS = ({"schema", "version", "root"}, {"description", "show"})
_NODE_FIELDS = ({"id"}, {"collect", "condition", *BRANCHES})
_CONDITION_FIELDS = ({"metric", "op", "threshold"}, set())


def tree_to_dict(tree: ProfilingTree) -> dict[str, Any]:
    """The JSON document of ``tree`` as plain data."""
    data: dict[str, Any] = {"schema": SCHEMA, "version": VERSION}
    if tree.description:
        data["description"] = tree.description
    if tree.show != "path":
        data["show"] = tree.show
    data["root"] = tree.root.to_dict()
    return data


def tree_to_json(tree: ProfilingTree) -> str:
    """The JSON document of ``tree``, indented, ending with a newline."""
    return json.dumps(tree_to_dict(tree), indent=2) + "\n"


def save_tree(tree: ProfilingTree, path: str | Path) -> None:
    """Write ``tree`` as JSON to ``path``."""
    Path(path).write_text(tree_to_json(tree), encoding="utf-8")


def load_tree(path: str | Path) -> ProfilingTree:
    """Read and validate the tree in the JSON file ``path``."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else str(exc)
        raise TreeError(f"{path}: cannot read: {reason}") from None
    return tree_from_json(text, source=str(path))


def tree_from_json(text: str, source: str = "<json>") -> ProfilingTree:
    """Parse and validate a tree from JSON ``text``; ``source`` names it in errors."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise TreeError(f"{source}: malformed JSON at line {exc.lineno}: {exc.msg}") from None
    except RecursionError:
        raise TreeError(f"{source}: nested too deeply") from None
    return tree_from_dict(data, source)


def tree_from_dict(data: Any, source: str = "<json>") -> ProfilingTree:
    """Build and validate a tree from its JSON document as plain data."""
    try:
        _check_fields(data, _DOCUMENT_FIELDS, "document")
        if data["schema"] != SCHEMA:
            raise TreeError(f"schema is {data['schema']!r}, not {SCHEMA!r}")
        if type(data["version"]) is not int or data["version"] != VERSION:
            raise TreeError(f"unknown version {data['version']!r} (this reader knows {VERSION})")
        description = data.get("description", "")
        if not isinstance(description, str):
            raise TreeError("description must be a string")
        show = data.get("show", "path")
        if show not in SHOW_MODES:
            raise TreeError(f"show must be one of {', '.join(SHOW_MODES)}, not {show!r}")
        tree = ProfilingTree(node_from_data(data["root"], "root"), description, show)
        return tree.validate()
    except TreeError as exc:
        raise TreeError(f"{source}: {exc}") from None
    except RecursionError:
        raise TreeError(f"{source}: nested too deeply") from None


def node_from_data(data: Any, where: str) -> Node:
    """A node (and its subtree) from plain data; ``where`` locates it in errors."""
    _check_fields(data, _NODE_FIELDS, where)
    collect = data.get("collect", [])
    if not isinstance(collect, list):
        raise TreeError(f"{where}: collect must be a list of group names")
    condition = data.get("condition")
    branches = {
        b: node_from_data(data[b], f"{where}.{b}") for b in BRANCHES if data.get(b) is not None
    }
    return Node(
        id=data["id"],
        collect=tuple(collect),
        condition=None if condition is None else condition_from_data(condition, where),
        **branches,
    )


def condition_from_data(data: Any, where: str) -> Condition:
    """A condition from ``{"metric", "op", "threshold"}``; ``where`` locates it in errors."""
    _check_fields(data, _CONDITION_FIELDS, f"{where}.condition")
    try:
        return Condition(data["metric"], data["op"], data["threshold"])
    except TreeError as exc:
        raise TreeError(f"{where}.condition: {exc}") from None


def _check_fields(data: Any, fields: tuple[set[str], set[str]], where: str) -> None:
    required, optional = fields
    if not isinstance(data, dict):
        raise TreeError(f"{where}: expected an object, got {type(data).__name__}")
    missing = sorted(required - data.keys())
    if missing:
        raise TreeError(f"{where}: missing field {missing[0]!r}")
    unknown = sorted(data.keys() - required - optional)
    if unknown:
        raise TreeError(f"{where}: unknown field {unknown[0]!r}")
