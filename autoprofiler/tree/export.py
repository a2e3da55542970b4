"""Pictures of a profiling tree: indented text, Mermaid and standalone SVG.

All three exporters are free functions over a tree and share ``node_label``.
"""

from __future__ import annotations

import math
from xml.sax.saxutils import escape

from autoprofiler.tree.model import Node, ProfilingTree

# SVG layout, in pixels; the width of a character is an estimate for a 12 px monospace font.
_FONT_PX = 12
_CHAR_PX = 7.3
_LINE_PX = 16
_PAD_PX = 8
_GAP_X_PX = 24
_GAP_Y_PX = 44
_MARGIN_PX = 16
_MERMAID_ESCAPES = {"&": "#38;", '"': "#34;", "<": "#60;", ">": "#62;"}


def node_label(node: Node) -> tuple[str, ...]:
    """The lines that describe a node: its id, what it collects and (if any) its condition."""
    lines = [node.id, "collect " + (", ".join(node.collect) or "nothing")]
    if node.condition is not None:
        lines.append(f"if {node.condition}")
    return tuple(lines)


def _branch_label(branch: str) -> str:
    return branch.removeprefix("on_")


def export_text(tree: ProfilingTree, max_depth: int | None = None) -> str:
    """An indented text picture; below ``max_depth`` it says how many nodes it left out."""
    out: list[str] = []

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
            out.append(f"{indent}|--- {_branch_label(branch)}: {line(child)}")
            visit(child, depth + 1)

    out.append(line(tree.root))
    visit(tree.root, 0)
    return "\n".join(out) + "\n"


def export_mermaid(tree: ProfilingTree) -> str:
    """A Mermaid ``flowchart`` of the tree (nodes named N0, N1, ... in depth-first order)."""
    nodes = tree.nodes()
    names = {id(node): f"N{i}" for i, node in enumerate(nodes)}
    out = ["flowchart TD"]
    for node in nodes:
        text = "<br/>".join(
            "".join(_MERMAID_ESCAPES.get(c, c) for c in part) for part in node_label(node)
        )
        out.append(f'    {names[id(node)]}["{text}"]')
    for node in nodes:
        for branch, child in node.branches():
            out.append(f"    {names[id(node)]} -->|{_branch_label(branch)}| {names[id(child)]}")
    leaves = ",".join(names[id(n)] for n in nodes if n.is_leaf)
    out.append("    classDef leaf fill:#eaf7ea,stroke:#3a9a3a")
    out.append(f"    class {leaves} leaf")
    return "\n".join(out) + "\n"


def export_svg(tree: ProfilingTree) -> str:
    """A standalone SVG picture: one box per node, layered by depth, lines labelled by branch."""
    box_h = max(len(node_label(n)) for n in tree.nodes()) * _LINE_PX + 2 * _PAD_PX
    span: dict[int, float] = {}

    def box_w(node: Node) -> float:
        return max(len(s) for s in node_label(node)) * _CHAR_PX + 2 * _PAD_PX

    def measure(node: Node) -> float:
        children = [c for _, c in node.branches()]
        below = sum(measure(c) for c in children) + _GAP_X_PX * max(len(children) - 1, 0)
        span[id(node)] = max(box_w(node), below)
        return span[id(node)]

    edges: list[str] = []
    boxes: list[str] = []

    def place(node: Node, left: float, depth: int) -> tuple[float, float]:
        centre = left + span[id(node)] / 2
        top = _MARGIN_PX + depth * (box_h + _GAP_Y_PX)
        children = node.branches()
        below = sum(span[id(c)] for _, c in children) + _GAP_X_PX * max(len(children) - 1, 0)
        x = left + (span[id(node)] - below) / 2
        for branch, child in children:
            child_centre, child_top = place(child, x, depth + 1)
            x += span[id(child)] + _GAP_X_PX
            y1 = top + box_h
            edges.append(
                f'<line x1="{centre:.1f}" y1="{y1:.1f}" x2="{child_centre:.1f}" '
                f'y2="{child_top:.1f}" stroke="#666"/>'
                f'<text x="{(centre + child_centre) / 2:.1f}" y="{(y1 + child_top) / 2:.1f}" '
                f'text-anchor="middle" font-size="{_FONT_PX - 1}" fill="#444">'
                f"{_branch_label(branch)}</text>"
            )
        width = box_w(node)
        fill, stroke = ("#eaf7ea", "#3a9a3a") if node.is_leaf else ("#e8f0fe", "#3b6fd8")
        x_text = centre - width / 2 + _PAD_PX
        first, *rest = node_label(node)
        lines = f'<tspan x="{x_text:.1f}" font-weight="bold">{escape(first)}</tspan>' + "".join(
            f'<tspan x="{x_text:.1f}" dy="{_LINE_PX}">{escape(text)}</tspan>' for text in rest
        )
        boxes.append(
            f'<rect x="{centre - width / 2:.1f}" y="{top:.1f}" width="{width:.1f}" '
            f'height="{box_h}" rx="6" fill="{fill}" stroke="{stroke}"/>'
            f'<text y="{top + _PAD_PX + _FONT_PX:.1f}" font-size="{_FONT_PX}">{lines}</text>'
        )
        return centre, top

    width = math.ceil(measure(tree.root) + 2 * _MARGIN_PX)
    place(tree.root, _MARGIN_PX, 0)
    height = 2 * _MARGIN_PX + (tree.depth + 1) * box_h + tree.depth * _GAP_Y_PX
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
