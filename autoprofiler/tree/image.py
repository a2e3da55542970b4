"""PNG and PDF pictures of a profiling tree, drawn with matplotlib (no pyplot global state).

The picture is the SVG's layout (``layout_tree``) drawn at one point per layout pixel. Files
are reproducible: the same tree gives the same bytes (no creation date, no software stamp).
"""

from __future__ import annotations

import io
import logging
import math

from matplotlib.figure import Figure
from matplotlib.patches import FancyBboxPatch

from autoprofiler.tree.layout import (
    EDGE_COLOUR,
    FONT_PX,
    LABEL_COLOUR,
    Layout,
    layout_tree,
)
from autoprofiler.tree.model import ProfilingTree

logger = logging.getLogger(__name__)

IMAGE_FORMATS = ("png", "pdf")
_PNG_DPI = 144  # two image pixels per layout pixel
# Agg refuses 2**16 pixels a side and big images are slow and huge: a big tree gets a lower dpi.
_MAX_PNG_SIDE_PX = 30_000
_MAX_PNG_PIXELS = 25_000_000
_POINTS_PER_INCH = 72
_FONT = "monospace"


def draw_image(tree: ProfilingTree, fmt: str) -> bytes:
    """``tree`` as a ``png`` or ``pdf`` file's bytes (``ValueError`` for another format)."""
    if fmt not in IMAGE_FORMATS:
        raise ValueError(f"not an image format: {fmt!r} (expected one of {IMAGE_FORMATS})")
    layout = layout_tree(tree)
    figure = layout_figure(layout)
    title = f"profiling tree {tree.content_hash}"
    if fmt == "png":
        dpi = _png_dpi(layout)
        metadata: dict[str, str | None] = {"Title": title, "Software": None}
    else:
        dpi, metadata = _POINTS_PER_INCH, {"Title": title, "CreationDate": None}
    buffer = io.BytesIO()
    figure.savefig(buffer, format=fmt, dpi=dpi, metadata=metadata, facecolor="white")
    return buffer.getvalue()


def _png_dpi(layout: Layout) -> float:
    """``_PNG_DPI``, or less for a picture that would pass the size limits."""
    inches_w, inches_h = layout.width / _POINTS_PER_INCH, layout.height / _POINTS_PER_INCH
    dpi = min(
        _PNG_DPI,
        _MAX_PNG_SIDE_PX / max(inches_w, inches_h),
        math.sqrt(_MAX_PNG_PIXELS / (inches_w * inches_h)),
    )
    if dpi < _PNG_DPI:
        logger.info("a %d x %d px tree picture drawn at %.0f dpi", layout.width, layout.height, dpi)
    return dpi


def layout_figure(layout: Layout) -> Figure:
    """The picture as a matplotlib figure: one point per layout pixel, y growing downwards."""
    size = (layout.width / _POINTS_PER_INCH, layout.height / _POINTS_PER_INCH)
    figure = Figure(figsize=size, dpi=_POINTS_PER_INCH)
    axes = figure.add_axes((0, 0, 1, 1))
    axes.set_xlim(0, layout.width)
    axes.set_ylim(layout.height, 0)
    axes.set_axis_off()
    for edge in layout.edges:
        axes.plot([edge.x1, edge.x2], [edge.y1, edge.y2], color=EDGE_COLOUR, lw=1, zorder=1)
        axes.text(
            *edge.middle,
            edge.label,
            ha="center",
            va="center",
            fontsize=FONT_PX - 1,
            family=_FONT,
            color=LABEL_COLOUR,
            bbox={"boxstyle": "round,pad=0.2", "facecolor": "white", "edgecolor": "none"},
            zorder=2,
        )
    for box in layout.boxes:
        fill, stroke = box.colours
        axes.add_patch(
            FancyBboxPatch(
                (box.x, box.y),
                box.width,
                box.height,
                boxstyle="round,pad=0,rounding_size=6",
                facecolor=fill,
                edgecolor=stroke,
                lw=1,
                zorder=3,
            )
        )
        for i, line in enumerate(box.lines):
            axes.text(
                box.text_x,
                box.baseline(i),
                line,
                va="baseline",
                fontsize=FONT_PX,
                family=_FONT,
                fontweight="bold" if i == 0 else "normal",
                zorder=4,
            )
    return figure
