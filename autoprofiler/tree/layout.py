"""Where each box and line of a tree's picture goes; the SVG and the matplotlib pictures share it.

Units are pixels of a 12 px monospace font (points at 72 dpi for matplotlib). Nodes are layered
by depth, each subtree as wide as the wider of its own box and its children side by side, so
boxes never overlap and a line only crosses the gap between two layers.
"""

from __future__ import annotations

import math
import textwrap
from dataclasses import dataclass

from autoprofiler.tree.model import Node, ProfilingTree

FONT_PX = 12
LINE_PX = 16
_PAD_PX = 8
EDGE_COLOUR = "#666"
LABEL_COLOUR = "#444"
# The width of a character is an estimate for a 12 px monospace font (DejaVu Sans Mono: 7.2).
_CHAR_PX = 7.3
_GAP_X_PX = 24
_GAP_Y_PX = 44
_MARGIN_PX = 16
_WRAP_CHARS = 72  # longer lines break between words (groups), continuations indented
_LEAF_COLOURS = ("#eaf7ea", "#3a9a3a")
_INNER_COLOURS = ("#e8f0fe", "#3b6fd8")


def node_label(node: Node) -> tuple[str, ...]:
    """The lines that describe a node: its id, what it collects and (if any) its condition."""
    lines = [node.id, "collect " + (", ".join(node.collect) or "nothing")]
    if node.condition is not None:
        lines.append(f"if {node.condition}")
    return tuple(lines)


def branch_label(branch: str) -> str:
    """What an edge says: ``true``, ``false`` or ``missing``."""
    return branch.removeprefix("on_")


def _wrapped(line: str) -> list[str]:
    return textwrap.wrap(
        line, _WRAP_CHARS, subsequent_indent="  ", break_long_words=False, break_on_hyphens=False
    ) or [line]


@dataclass(frozen=True)
class Box:
    """One node's box: top-left corner, size, the lines written in it (the first is the id)."""

    node: Node
    x: float
    y: float
    width: float
    height: float
    lines: tuple[str, ...]

    @property
    def centre(self) -> float:
        return self.x + self.width / 2

    @property
    def colours(self) -> tuple[str, str]:
        """Fill and stroke: green for a leaf, blue for a node that branches."""
        return _LEAF_COLOURS if self.node.is_leaf else _INNER_COLOURS

    @property
    def text_x(self) -> float:
        """The x where the lines of text start."""
        return self.x + _PAD_PX

    def baseline(self, line: int) -> float:
        """The y of the baseline of text line ``line``."""
        return self.y + _PAD_PX + FONT_PX + line * LINE_PX


@dataclass(frozen=True)
class Edge:
    """A line from a parent's bottom centre to a child's top centre, named by its branch."""

    label: str
    x1: float
    y1: float
    x2: float
    y2: float

    @property
    def middle(self) -> tuple[float, float]:
        return (self.x1 + self.x2) / 2, (self.y1 + self.y2) / 2


@dataclass(frozen=True)
class Layout:
    """A whole picture: its size, the boxes and the edges (children before their parents)."""

    width: int
    height: int
    boxes: tuple[Box, ...]
    edges: tuple[Edge, ...]


def layout_tree(tree: ProfilingTree) -> Layout:
    """Place every node of ``tree``: layered by depth, each parent centred over its children."""
    lines = {id(n): tuple(w for s in node_label(n) for w in _wrapped(s)) for n in tree.nodes()}
    box_h = max(len(x) for x in lines.values()) * LINE_PX + 2 * _PAD_PX
    span: dict[int, float] = {}

    def box_w(node: Node) -> float:
        return max(len(s) for s in lines[id(node)]) * _CHAR_PX + 2 * _PAD_PX

    def measure(node: Node) -> float:
        children = [c for _, c in node.branches()]
        below = sum(measure(c) for c in children) + _GAP_X_PX * max(len(children) - 1, 0)
        span[id(node)] = max(box_w(node), below)
        return span[id(node)]

    boxes: list[Box] = []
    edges: list[Edge] = []

    def place(node: Node, left: float, depth: int) -> Box:
        top = _MARGIN_PX + depth * (box_h + _GAP_Y_PX)
        width = box_w(node)
        box = Box(node, left + (span[id(node)] - width) / 2, top, width, box_h, lines[id(node)])
        children = node.branches()
        below = sum(span[id(c)] for _, c in children) + _GAP_X_PX * max(len(children) - 1, 0)
        x = left + (span[id(node)] - below) / 2
        for branch, child in children:
            child_box = place(child, x, depth + 1)
            x += span[id(child)] + _GAP_X_PX
            edges.append(
                Edge(branch_label(branch), box.centre, top + box_h, child_box.centre, child_box.y)
            )
        boxes.append(box)
        return box

    width = math.ceil(measure(tree.root) + 2 * _MARGIN_PX)
    place(tree.root, _MARGIN_PX, 0)
    height = 2 * _MARGIN_PX + (tree.depth + 1) * box_h + tree.depth * _GAP_Y_PX
    return Layout(width, height, tuple(boxes), tuple(edges))
