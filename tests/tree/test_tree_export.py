"""Pictures: text snapshots, well-formed Mermaid, and an SVG that parses and does not overlap."""

import re
import xml.etree.ElementTree as ET

import pytest

from autoprofiler.tree import (
    Condition,
    Node,
    ProfilingTree,
    export_mermaid,
    export_svg,
    export_text,
    node_label,
)

from .conftest import COMPUTE, MEMORY

SVG = "{http://www.w3.org/2000/svg}"

EXPERT_TEXT = f"""\
n0: collect static, ncu.SpeedOfLight; if {MEMORY} > 60
|--- true: n1: collect ncu.MemoryWorkloadAnalysis
|--- false: n2: collect nothing; if {COMPUTE} > 60
|   |--- true: n3: collect ncu.ComputeWorkloadAnalysis, ncu.WarpStateStats
|   |--- false: n4: collect ncu.LaunchStats, ncu.Occupancy
"""


@pytest.fixture
def awkward() -> ProfilingTree:
    """Characters that need escaping, and an explicit missing branch."""
    return ProfilingTree(
        Node(
            "n0",
            ("static",),
            Condition("static.flops", "<", 1e9),
            on_true=Node("n1", ("ncu.LaunchStats",)),
            on_false=Node("n2", ("ncu.SpeedOfLight",)),
            on_missing=Node("n3", ("ncu.Occupancy",)),
        )
    )


def test_node_label(expert):
    assert node_label(expert.node("n2")) == ("n2", "collect nothing", f"if {COMPUTE} > 60")
    assert node_label(expert.node("n1")) == ("n1", "collect ncu.MemoryWorkloadAnalysis")


def test_text_snapshot(expert):
    assert export_text(expert) == EXPERT_TEXT
    assert export_text(expert, max_depth=5) == EXPERT_TEXT


def test_text_truncated_by_depth(expert):
    assert export_text(expert, max_depth=1) == (
        f"n0: collect static, ncu.SpeedOfLight; if {MEMORY} > 60\n"
        "|--- true: n1: collect ncu.MemoryWorkloadAnalysis\n"
        f"|--- false: n2: collect nothing; if {COMPUTE} > 60\n"
        "|   |--- ... 2 more nodes (truncated at depth 1)\n"
    )
    assert export_text(expert, max_depth=0) == (
        f"n0: collect static, ncu.SpeedOfLight; if {MEMORY} > 60\n"
        "|--- ... 4 more nodes (truncated at depth 0)\n"
    )


def test_text_shows_the_missing_branch(awkward):
    assert export_text(awkward).splitlines()[1:] == [
        "|--- true: n1: collect ncu.LaunchStats",
        "|--- false: n2: collect ncu.SpeedOfLight",
        "|--- missing: n3: collect ncu.Occupancy",
    ]


@pytest.mark.parametrize("name", ["expert", "awkward"])
def test_mermaid_is_well_formed(request, name):
    tree = request.getfixturevalue(name)
    lines = export_mermaid(tree).splitlines()
    assert lines[0] == "flowchart TD"
    node_lines = [x for x in lines if re.fullmatch(r'    N\d+\["[^"<>]*(<br/>[^"<>]*)*"\]', x)]
    edge_lines = [x for x in lines if re.fullmatch(r"    N\d+ -->\|(true|false|missing)\| N\d+", x)]
    assert len(node_lines) == tree.size
    assert len(edge_lines) == tree.size - 1
    assert lines[-1].startswith("    class ") and lines[-2].startswith("    classDef leaf")
    assert len(lines) == 1 + len(node_lines) + len(edge_lines) + 2


def test_mermaid_escapes(awkward):
    assert "static.flops #60; 1e+09" in export_mermaid(awkward)


@pytest.mark.parametrize("name", ["expert", "awkward"])
def test_svg_is_standalone_and_laid_out(request, name):
    tree = request.getfixturevalue(name)
    root = ET.fromstring(export_svg(tree).encode("utf-8"))
    assert root.tag == f"{SVG}svg"
    width, height = float(root.get("width")), float(root.get("height"))
    assert root.get("viewBox") == f"0 0 {root.get('width')} {root.get('height')}"
    boxes = [r for r in root.findall(f"{SVG}rect") if r.get("x") is not None]
    assert len(boxes) == tree.size
    assert len(root.findall(f"{SVG}line")) == tree.size - 1
    text = "".join(root.itertext())
    for node in tree.nodes():
        assert all(part in text for part in node_label(node))
    rects = [
        (float(r.get("x")), float(r.get("y")), float(r.get("width")), float(r.get("height")))
        for r in boxes
    ]
    for x, y, w, h in rects:
        assert x >= 0 and x + w <= width and y >= 0 and y + h <= height
    for i, a in enumerate(rects):
        for b in rects[i + 1 :]:
            apart_x = a[0] + a[2] <= b[0] or b[0] + b[2] <= a[0]
            apart_y = a[1] + a[3] <= b[1] or b[1] + b[3] <= a[1]
            assert apart_x or apart_y


def test_svg_layers_by_depth(expert):
    root = ET.fromstring(export_svg(expert))
    tops = sorted({float(r.get("y")) for r in root.findall(f"{SVG}rect") if r.get("y")})
    assert len(tops) == expert.depth + 1
