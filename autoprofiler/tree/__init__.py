"""Profiling trees: what to collect for a kernel, branch by branch, within a budget."""

from autoprofiler.tree.edits import Edit, Prune, Rewrite, Split, edit_from_dict
from autoprofiler.tree.export import export_mermaid, export_svg, export_text, node_label
from autoprofiler.tree.fixed import FIXED_GROUPS, FIXED_TREES, fixed_tree, resolve_tree
from autoprofiler.tree.model import OPERATORS, Condition, Node, ProfilingTree, TreeError
from autoprofiler.tree.render import TreeFormat, format_for_path, render_tree
from autoprofiler.tree.run import run_tree
from autoprofiler.tree.serialize import (
    load_tree,
    save_tree,
    tree_from_dict,
    tree_from_json,
    tree_to_dict,
    tree_to_json,
)

__all__ = [
    "FIXED_GROUPS",
    "FIXED_TREES",
    "OPERATORS",
    "Condition",
    "Edit",
    "Node",
    "ProfilingTree",
    "Prune",
    "Rewrite",
    "Split",
    "TreeError",
    "TreeFormat",
    "edit_from_dict",
    "export_mermaid",
    "export_svg",
    "export_text",
    "fixed_tree",
    "format_for_path",
    "load_tree",
    "node_label",
    "render_tree",
    "resolve_tree",
    "run_tree",
    "save_tree",
    "tree_from_dict",
    "tree_from_json",
    "tree_to_dict",
    "tree_to_json",
]
