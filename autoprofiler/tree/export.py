"""Pictures of a profiling tree as text: indented text, Mermaid and standalone SVG.

The exporters are free functions over a tree and share ``node_label``; the SVG is drawn from
the same layout as the PNG and PDF pictures (``autoprofiler.tree.image``).
"""

from __future__ import annotations

from xml.sax.saxutils import escape

from autoprofiler.tree.layout import (
    EDGE_COLOUR,
    FONT_PX,
    LABEL_COLOUR,
    LINE_PX,
    branch_label,
    layout_tree,
    node_label,
)
from autoprofiler.tree.model import Node, ProfilingTree

__all__ = ["export_mermaid", "export_svg", "export_text", "node_label"]

_MERMAID_ESCAPES = {"&": "#38;", '"': "#34;", "<": "#60;", ">": "#62;"}


LEAF_NOTE = "show: leaf (the rewriter is shown only the groups of the leaf it ends at)"


def export_text(tree: ProfilingTree, max_depth: int | None = None) -> str:
    """An indented text picture; below ``max_depth`` it says how many nodes it left out. A
    tree that shows its leaves only says so first."""
    out: list[str] = [LEAF_NOTE] if tree.show == "leaf" else []

    def line(node: Node) -> str:
        first, *rest = node_label(node)
        return f"{first}: " + "; ".join(rest)

    def visit(node: Node, depth: int) -> None:
        indent = "|   " * depth
        children = node.branches()
        if children and max_depth is not None and depth >= max_depth:
            hidden = sum(len(tuple(child.walk())) for _, child in children)
            out.append(f"{indent}|--- ... {hidden} more nodes (truncated at depth {max_depth})")
            return
        for branch, child in children:
            out.append(f"{indent}|--- {branch_label(branch)}: {line(child)}")
            visit(child, depth + 1)

    out.append(line(tree.root))
    visit(tree.root, 0)
    return "\n".join(out) + "\n"


def export_mermaid(tree: ProfilingTree) -> str:
    """A Mermaid ``flowchart`` of the tree (nodes named N0, N1, ... in depth-first order)."""
    nodes = tree.nodes()
    names = {id(node): f"N{i}" for i, node in enumerate(nodes)}
    out = ["flowchart TD", *([f"    %% {LEAF_NOTE}"] if tree.show == "leaf" else [])]
    for node in nodes:
        text = "<br/>".join(
            "".join(_MERMAID_ESCAPES.get(c, c) for c in part) for part in node_label(node)
        )
        out.append(f'    {names[id(node)]}["{text}"]')
    for node in nodes:
        for branch, child in node.branches():
            out.append(f"    {names[id(node)]} -->|{branch_label(branch)}| {names[id(child)]}")
    leaves = ",".join(names[id(n)] for n in nodes if n.is_leaf)
    out.append("    classDef leaf fill:#eaf7ea,stroke:#3a9a3a")
    out.append(f"    class {leaves} leaf")
    return "\n".join(out) + "\n"


def export_svg(tree: ProfilingTree) -> str:
    """A standalone SVG picture: one box per node, layered by depth, lines labelled by branch."""
    layout = layout_tree(tree)
    edges = [
        f'<line x1="{e.x1:.1f}" y1="{e.y1:.1f}" x2="{e.x2:.1f}" y2="{e.y2:.1f}" '
        f'stroke="{EDGE_COLOUR}"/>'
        f'<text x="{e.middle[0]:.1f}" y="{e.middle[1]:.1f}" text-anchor="middle" '
        f'font-size="{FONT_PX - 1}" fill="{LABEL_COLOUR}">{e.label}</text>'
        for e in layout.edges
    ]
    boxes = []
    for box in layout.boxes:
        fill, stroke = box.colours
        x_text = box.text_x
        first, *rest = box.lines
        lines = f'<tspan x="{x_text:.1f}" font-weight="bold">{escape(first)}</tspan>' + "".join(
            f'<tspan x="{x_text:.1f}" dy="{LINE_PX}">{escape(text)}</tspan>' for text in rest
        )
        boxes.append(
            f'<rect x="{box.x:.1f}" y="{box.y:.1f}" width="{box.width:.1f}" '
            f'height="{box.height}" rx="6" fill="{fill}" stroke="{stroke}"/>'
            f'<text y="{box.baseline(0):.1f}" font-size="{FONT_PX}" xml:space="preserve">'
            f"{lines}</text>"
        )
    width, height = layout.width, layout.height
    return "\n".join(
        [
            '<?xml version="1.0" encoding="UTF-8"?>',
            f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
            f'viewBox="0 0 {width} {height}" font-family="monospace">',
            f"<title>profiling tree {tree.content_hash}</title>",
            f'<rect width="{width}" height="{height}" fill="white"/>',
            *edges,
            *boxes,
            "</svg>",
            "",
        ]
    )
