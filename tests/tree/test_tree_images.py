"""Rendering a tree to a file's bytes: the format from a name or a suffix, PNG and PDF pictures
that decode and show the laid-out boxes, text that stays inside its box, and a clear error when
matplotlib is missing."""

import io
import logging
import re
import sys

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.colors import to_rgb
from matplotlib.image import imread

from autoprofiler.tree import (
    Condition,
    Node,
    ProfilingTree,
    TreeError,
    TreeFormat,
    export_mermaid,
    export_svg,
    export_text,
    format_for_path,
    node_label,
    render_tree,
)
from autoprofiler.tree.image import layout_figure
from autoprofiler.tree.layout import layout_tree

from .conftest import COMPUTE, MEMORY

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
GROUPS = (
    "ncu.MemoryWorkloadAnalysis",
    "ncu.ComputeWorkloadAnalysis",
    "ncu.WarpStateStats",
    "ncu.LaunchStats",
    "ncu.Occupancy",
)


@pytest.fixture
def wide() -> ProfilingTree:
    """Three branches under the root, a deeper split, and a leaf whose groups need wrapping."""
    return ProfilingTree(
        Node(
            "n0",
            ("static", "ncu.SpeedOfLight"),
            Condition(MEMORY, ">", 60),
            on_true=Node(
                "n1",
                (),
                Condition(COMPUTE, "in", (10, 20)),
                on_true=Node("n3", GROUPS),
                on_false=Node("n4", ("ncu.Occupancy",)),
            ),
            on_false=Node("n2", GROUPS[:2]),
            on_missing=Node("n5", ()),
        )
    )


@pytest.mark.parametrize(
    ("path", "expected"),
    [
        ("tree.svg", TreeFormat.svg),
        ("out/tree.PNG", TreeFormat.png),
        ("tree.pdf", TreeFormat.pdf),
        ("tree.mmd", TreeFormat.mermaid),
        ("tree.mermaid", TreeFormat.mermaid),
        ("tree.txt", TreeFormat.text),
        ("tree", TreeFormat.svg),
        ("v1.2/tree", TreeFormat.svg),
        ("-", TreeFormat.svg),
        (None, TreeFormat.svg),
    ],
)
def test_format_from_the_suffix(path, expected):
    assert format_for_path(path) is expected


@pytest.mark.parametrize(
    ("path", "explicit", "expected"),
    [
        ("-", "png", TreeFormat.png),
        (None, "PDF", TreeFormat.pdf),
        ("tree.jpg", "svg", TreeFormat.svg),
        ("tree", TreeFormat.mermaid, TreeFormat.mermaid),
    ],
)
def test_an_explicit_format_wins(path, explicit, expected):
    assert format_for_path(path, explicit) is expected


def test_a_format_against_the_suffix_is_written_as_asked_with_a_warning(caplog):
    with caplog.at_level(logging.WARNING, logger="autoprofiler.tree.render"):
        assert format_for_path("tree.png", "svg") is TreeFormat.svg
    assert "writing svg to tree.png" in caplog.text


@pytest.mark.parametrize(
    ("call", "message"),
    [
        (lambda: format_for_path("tree.jpg"), "suffix '.jpg' of tree.jpg"),
        (lambda: format_for_path("tree.svg.gz"), "suffix '.gz'"),
        (lambda: format_for_path("tree.svg", "jpeg"), "unknown tree format 'jpeg'"),
        (lambda: render_tree(ProfilingTree(Node("n0", ())), "gif"), "unknown tree format 'gif'"),
    ],
)
def test_unknown_formats_are_one_line_errors(call, message):
    with pytest.raises(TreeError, match=re.escape(message)) as caught:
        call()
    assert "\n" not in str(caught.value) and "svg" in str(caught.value)


def test_text_formats_are_the_exporters_in_utf8(expert):
    assert render_tree(expert, "svg") == export_svg(expert).encode("utf-8")
    assert render_tree(expert, TreeFormat.mermaid) == export_mermaid(expert).encode("utf-8")
    assert render_tree(expert, "text") == export_text(expert).encode("utf-8")


def _close(pixel, colour: str) -> bool:
    return all(abs(a - b) < 0.03 for a, b in zip(pixel[:3], to_rgb(colour)))


@pytest.mark.parametrize("name", ["expert", "wide"])
def test_png_draws_every_box_where_the_layout_puts_it(request, name):
    tree = request.getfixturevalue(name)
    data = render_tree(tree, "png")
    assert data.startswith(PNG_SIGNATURE)
    image = imread(io.BytesIO(data), format="png")
    layout = layout_tree(tree)
    scale = 2  # 144 dpi over 72 points per inch
    assert image.shape[:2] == (layout.height * scale, layout.width * scale)
    assert _close(image[2, 2], "white")
    rgb = image[..., :3]
    assert (rgb.min(axis=-1) < 0.97).mean() > 0.2, "the picture is mostly blank"
    for box in layout.boxes:
        # Below the last line of text, the box is filled with its colour.
        x, y = int((box.x + box.width / 2) * scale), int((box.y + box.height - 3) * scale)
        assert _close(image[y, x], box.colours[0]), box.node.id
        # Where its text is written there is dark ink.
        top, left = int(box.y * scale), int(box.x * scale)
        region = rgb[top : top + int(box.height * scale), left : left + int(box.width * scale)]
        assert region.max(axis=-1).min() < 0.3, f"no text in {box.node.id}"


def test_pdf_is_one_page_the_size_of_the_layout(expert):
    data = render_tree(expert, "pdf")
    assert data.startswith(b"%PDF-") and data.rstrip().endswith(b"%%EOF")
    layout = layout_tree(expert)
    assert f"/MediaBox [ 0 0 {layout.width} {layout.height} ]".encode() in data
    assert f"(profiling tree {expert.content_hash})".encode() in data


@pytest.mark.parametrize("fmt", ["png", "pdf"])
def test_images_are_reproducible(expert, fmt):
    assert render_tree(expert, fmt) == render_tree(expert, fmt)


@pytest.mark.parametrize("name", ["expert", "wide"])
def test_drawn_text_stays_in_its_box_and_never_overlaps(request, name):
    tree = request.getfixturevalue(name)
    figure = layout_figure(layout_tree(tree))
    renderer = FigureCanvasAgg(figure).get_renderer()
    (axes,) = figure.axes
    boxes = [p.get_window_extent(renderer) for p in axes.patches]
    texts = [t.get_window_extent(renderer) for t in axes.texts]
    assert len(boxes) == tree.size and len(axes.lines) == tree.size - 1
    for i, a in enumerate(boxes):
        assert not any(a.overlaps(b) for b in boxes[i + 1 :])
    for i, a in enumerate(texts):
        assert not any(a.overlaps(b) for b in texts[i + 1 :]), axes.texts[i].get_text()
    for text, extent in zip(axes.texts, texts):
        if text.get_text() in ("true", "false", "missing"):
            assert not any(extent.overlaps(b) for b in boxes), "an edge label on a box"
        else:
            assert any(
                b.contains(extent.x0, extent.y0) and b.contains(extent.x1, extent.y1) for b in boxes
            ), text.get_text()


def test_long_lines_wrap_between_groups(wide):
    (leaf,) = [b for b in layout_tree(wide).boxes if b.node.id == "n3"]
    assert max(len(line) for line in leaf.lines) <= 72 < len(node_label(leaf.node)[1])
    assert " ".join(leaf.lines[1:]).split() == node_label(leaf.node)[1].split()


def test_images_without_matplotlib_are_a_clear_error(monkeypatch, expert):
    for name in [m for m in sys.modules if m == "matplotlib" or m.startswith("matplotlib.")]:
        monkeypatch.setitem(sys.modules, name, None)
    monkeypatch.delitem(sys.modules, "autoprofiler.tree.image")
    with pytest.raises(TreeError, match=r"a png picture needs matplotlib.*pip install"):
        render_tree(expert, "png")
    assert render_tree(expert, "svg").startswith(b"<?xml")
