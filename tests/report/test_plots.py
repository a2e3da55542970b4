"""The plots' geometry, measured on the drawn figures in display pixels: no label over another
label, a marker or the title; no marker cut at the frame; every budget labelled on its line;
a legend entry for every kind of mark; failures in the heatmap drawn apart from a real 1.0x.
Run on the committed H200 reproduction bench (crowded labels) and the session's bench."""

from __future__ import annotations

import itertools
import math

import numpy
import pytest
from matplotlib.axes import Axes
from matplotlib.collections import PathCollection
from matplotlib.colors import to_hex
from matplotlib.figure import Figure
from matplotlib.text import Text
from matplotlib.transforms import Bbox

from autoprofiler.bench import BenchResult
from autoprofiler.report.labels import LabelPlacer, Spot
from autoprofiler.report.plots import (
    heatmap_data,
    metrics_figure,
    new_figure,
    pareto_figure,
    winners_figure,
)
from tests.report.reproduction import reproduction, with_outcome


@pytest.fixture(params=["reproduction", "session"])
def bench(request: pytest.FixtureRequest) -> BenchResult:
    if request.param == "reproduction":
        return reproduction()
    return BenchResult.from_dict(request.getfixturevalue("bench_run").results_data())


def shared_area(a: Bbox, b: Bbox) -> float:
    width = min(a.x1, b.x1) - max(a.x0, b.x0)
    height = min(a.y1, b.y1) - max(a.y0, b.y0)
    return max(width, 0.0) * max(height, 0.0)


def drawn(figure: Figure) -> Axes:
    """The figure's (first) axes after the figure is drawn, so that every position is final."""
    figure.canvas.draw()
    return figure.axes[0]


def label_boxes(axes: Axes) -> dict[str, Bbox]:
    """The letters' box of every text on the axes (leader lines left out), by text."""
    renderer = axes.figure.canvas.get_renderer()
    return {t.get_text(): Text.get_window_extent(t, renderer) for t in axes.texts}


def marker_boxes(axes: Axes) -> list[Bbox]:
    """The display box of every scatter marker on the axes."""
    boxes = []
    for collection in axes.collections:
        assert isinstance(collection, PathCollection)
        (size,) = collection.get_sizes()
        radius = math.sqrt(size) / 2 * axes.figure.dpi / 72
        for x, y in axes.transData.transform(collection.get_offsets()):
            boxes.append(Bbox.from_extents(x - radius, y - radius, x + radius, y + radius))
    return boxes


def assert_labels_clear(axes: Axes) -> None:
    boxes = label_boxes(axes)
    assert len(boxes) == len(axes.texts)  # no two labels alike
    for (a, box_a), (b, box_b) in itertools.combinations(boxes.items(), 2):
        assert shared_area(box_a, box_b) == 0, f"{a!r} overlaps {b!r}"
    title = axes.title.get_window_extent(axes.figure.canvas.get_renderer())
    frame = axes.get_window_extent()
    for name, box in boxes.items():
        assert shared_area(box, title) == 0, f"{name!r} overlaps the title"
        assert frame.contains(box.x0, box.y0) and frame.contains(box.x1, box.y1), name
        for marker in marker_boxes(axes):
            assert shared_area(box, marker) == 0, f"{name!r} covers a marker"


def assert_markers_whole(axes: Axes) -> None:
    frame = axes.get_window_extent()
    markers = marker_boxes(axes)
    assert markers
    for box in markers:
        assert frame.x0 < box.x0 and box.x1 < frame.x1, box
        assert frame.y0 < box.y0 and box.y1 < frame.y1, box


def assert_legend_covers_every_mark(axes: Axes) -> None:
    """Every marker colour and every line's (colour, style) has a legend entry."""
    legend = axes.get_legend()
    assert legend is not None
    handles = legend.legend_handles
    marked = {to_hex(c.get_facecolor()[0]) for c in axes.collections}
    assert marked <= {to_hex(h.get_color()) for h in handles if h.get_marker() not in ("", "None")}
    lines = {(to_hex(line.get_color()), line.get_linestyle()) for line in axes.lines}
    assert lines <= {(to_hex(h.get_color()), h.get_linestyle()) for h in handles}


def test_the_cost_plot_keeps_labels_apart_markers_whole_and_budgets_labelled(
    bench: BenchResult,
) -> None:
    axes = drawn(pareto_figure(bench))
    assert_labels_clear(axes)
    assert_markers_whole(axes)
    assert_legend_covers_every_mark(axes)
    texts = {t.get_text() for t in axes.texts}
    for config in bench.fixed:
        assert any(config.name in t for t in texts), config.name
    boxes = label_boxes(axes)
    budgets = {b.budget_s for b in bench.budgets if b.budget_s is not None}
    assert budgets
    for budget_s in budgets:
        box = boxes[f"budget {budget_s:g} s"]  # labelled with its value, on its line
        line_x, _ = axes.transData.transform((budget_s, 1.0))
        assert min(abs(box.x0 - line_x), abs(box.x1 - line_x)) < 8


def test_the_metrics_plot_keeps_labels_apart_and_markers_whole(bench: BenchResult) -> None:
    axes = drawn(metrics_figure(bench))
    assert_labels_clear(axes)
    assert_markers_whole(axes)
    assert_legend_covers_every_mark(axes)


def test_crowded_labels_at_the_edges_are_placed_apart() -> None:
    """Twelve points in one small cluster, and a point in each corner of the frame."""
    figure = new_figure(6, 4)
    axes = figure.add_subplot()
    axes.set_xlim(0, 100)
    axes.set_ylim(0, 100)
    cluster = [(50 + (i % 4), 50 + (i // 4)) for i in range(12)]
    corners = [(1, 1), (99, 1), (1, 99), (99, 99)]
    spots = [
        Spot(x, y, f"configuration number {i}", 70) for i, (x, y) in enumerate(cluster + corners)
    ]
    for spot in spots:
        axes.scatter([spot.x], [spot.y], s=spot.size_pt2)
    axes.set_title("title")
    LabelPlacer(axes, spots).label_all(fontsize=8)
    axes = drawn(figure)
    assert len(axes.texts) == len(spots)
    assert_labels_clear(axes)


def cell_colour(figure: Figure, row: int, column: int) -> numpy.ndarray:
    """The mean colour of the top-left corner of a heatmap cell, away from its text."""
    axes = drawn(figure)
    pixels = numpy.asarray(figure.canvas.buffer_rgba())[:, :, :3].astype(float)
    height = pixels.shape[0]
    (x0, y0), (x1, y1) = axes.transData.transform(
        [(column - 0.4, row - 0.4), (column - 0.15, row - 0.15)]
    )
    rows = slice(int(height - max(y0, y1)), int(height - min(y0, y1)))
    columns = slice(int(min(x0, x1)), int(max(x0, x1)))
    return pixels[rows, columns].mean(axis=(0, 1))


def test_a_failure_is_drawn_apart_from_a_real_one_times_speedup() -> None:
    bench = with_outcome(reproduction(), "none", "L1/27_SELU_", speedup=1.0)
    bench = with_outcome(bench, "none", "L1/25_Swish", flagged=("side_channel",))
    data = heatmap_data(bench)
    one = data.problems.index("L1/27_SELU_")
    failed = data.problems.index("L2/69_Conv2d_HardSwish_ReLU")
    flagged = data.problems.index("L1/25_Swish")
    column = data.labels.index("none")
    assert data.speedups[one][column] == data.speedups[failed][column] == 1.0
    assert data.failures[one][column] == ""
    assert data.failures[failed][column] == "failed"
    assert data.failures[flagged][column] == "flagged"  # not counted: a failure too
    figure = winners_figure(bench)
    axes = drawn(figure)
    cells = {(round(y), round(x)): t.get_text() for t in axes.texts for x, y in [t.get_position()]}
    assert cells[one, column] == "1.00"
    assert cells[failed, column] == "fail"
    assert cells[flagged, column] == "flag"
    real, failure = cell_colour(figure, one, column), cell_colour(figure, failed, column)
    assert numpy.linalg.norm(real - failure) > 40, (real, failure)
    assert numpy.ptp(failure) < 20  # grey
    legend = [t.get_text() for t in axes.get_legend().get_texts()]
    assert any(t.startswith("fail: ") for t in legend)
    assert any(t.startswith("flag: ") for t in legend)


def test_learned_trees_alike_share_one_heatmap_column() -> None:
    bench = reproduction()
    data = heatmap_data(bench)
    assert len(bench.fixed) == 7 and len(bench.budgets) == 9
    assert data.labels == [
        *(c.name for c in bench.fixed),
        "learned @ 5 s (+5 alike)",  # static, under every budget of cost weight 0 and 0.01
        "learned @ 5 s, cost weight 0.05 (+2 alike)",  # nothing
    ]
    assert len(data.problems) == 21 and all(len(row) == 9 for row in data.speedups)
