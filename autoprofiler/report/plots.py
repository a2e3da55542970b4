"""The report's plots of a bench, drawn with matplotlib (without pyplot's global state): each
``*_figure`` function returns the figure, its ``*_plot`` twin the PNG bytes.

- ``pareto_plot``: quality against mean profiling seconds per problem, for every fixed
  configuration and each learned tree, with the Pareto front and the budgets (each line
  labelled with its value);
- ``metrics_plot``: quality against the number of metrics collected ("more is not always
  better");
- ``winners_heatmap``: each test problem's speedup under each configuration, failures drawn
  apart (hatched grey, ``fail``), the best marked;
- ``learning_curves``: the objective of each trial of each budget's study, and the incumbent.

The scatter plots label their points through ``labels.LabelPlacer`` (no label over another,
a marker, the front or a budget's label) and keep every marker whole inside the frame; the
legend, outside on the right, names every kind of mark.
"""

from __future__ import annotations

import io
import json
import math
import re
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy
from matplotlib import colormaps
from matplotlib.axes import Axes
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.figure import Figure
from matplotlib.image import AxesImage
from matplotlib.lines import Line2D
from matplotlib.patches import Patch, Rectangle
from matplotlib.text import Text

from autoprofiler.bench.result import (
    BenchResult,
    BudgetResult,
    ConfigScore,
    Summary,
    summarize,
)
from autoprofiler.learn.objective import Objective, ProblemOutcome
from autoprofiler.report.labels import LabelPlacer, Spot, fit_markers

_DPI = 110
_LEARNED_COLOR = "#c0392b"
_LEARNED_PREFIX = "learned @ "
_FIXED_COLOR = "#2c6fbb"
_FRONT_COLOR = "#555"
_EAGER_COLOR = "#999"
_FAILED_COLOR = "#d0d0d0"
_FAILED_HATCH = "///"
_WIN_MARGIN = 0.01  # speedups within 1 % of the best also win
_FONT_PT = 8


@dataclass(frozen=True)
class _Marker:
    """How a kind of point is drawn (``area_pt2``: scatter's ``s``) and named in the legend."""

    color: str
    shape: str
    area_pt2: float
    legend: str


# By whether the point is a learned tree.
_MARKERS = {
    False: _Marker(_FIXED_COLOR, "o", 70, "fixed configuration\n(run without a budget)"),
    True: _Marker(_LEARNED_COLOR, "*", 160, "learned tree"),
}
_LABEL_STYLE: dict[str, object] = {
    "fontsize": _FONT_PT,
    "zorder": 4,
    "bbox": {"boxstyle": "square,pad=0.1", "facecolor": "white", "edgecolor": "none", "alpha": 0.8},
}


@dataclass(frozen=True)
class _Point:
    label: str
    summary: Summary
    learned: bool


def new_figure(width_in: float, height_in: float, **options: object) -> Figure:
    """A figure at the report's resolution, on a canvas that can measure text."""
    figure = Figure(figsize=(width_in, height_in), dpi=_DPI, **options)
    FigureCanvasAgg(figure)
    return figure


def png(figure: Figure) -> bytes:
    """``figure`` as PNG bytes."""
    buffer = io.BytesIO()
    figure.savefig(buffer, format="png", dpi=_DPI, bbox_inches="tight")
    return buffer.getvalue()


def learned_label(budget: BudgetResult) -> str:
    return f"{_LEARNED_PREFIX}{budget.label}"


def _points(bench: BenchResult) -> list[_Point]:
    objective = bench.objective()

    def point(label: str, config: ConfigScore, learned: bool) -> _Point:
        summary = summarize(config, bench.compile_baselines, objective)
        return _Point(label + ("*" if summary.incomplete else ""), summary, learned)

    fixed = [point(c.name, c, False) for c in bench.fixed]
    return fixed + [point(learned_label(b), b.learned, True) for b in bench.budgets]


def _scatter(axes: Axes, points: Sequence[_Point], x_of: Callable[[_Point], float]) -> list[Spot]:
    """Fixed configurations as circles, learned trees as stars: one spot per position, with
    the labels of the points there joined."""
    here: dict[tuple[float, float], list[_Point]] = {}
    for p in sorted(points, key=lambda p: p.learned):
        x, y = x_of(p), p.summary.geomean_speedup
        marker = _MARKERS[p.learned]
        axes.scatter([x], [y], zorder=3, color=marker.color, marker=marker.shape, s=marker.area_pt2)
        here.setdefault((round(x, 6), round(y, 6)), []).append(p)
    return [
        Spot(x, y, _joined([p.label for p in at]), max(_MARKERS[p.learned].area_pt2 for p in at))
        for (x, y), at in sorted(here.items())
    ]


def _frame(axes: Axes, spots: Sequence[Spot]) -> None:
    """The eager line, a symlog x axis, and limits that hold every marker whole."""
    axes.axhline(1.0, color=_EAGER_COLOR, linewidth=0.8, linestyle=":")
    axes.set_ylabel("geomean speedup over eager")
    axes.set_xscale("symlog", linthresh=1.0)
    axes.margins(x=0.05, y=0.12)
    axes.autoscale_view()
    fit_markers(axes, spots)
    axes.grid(True, alpha=0.3)


def _legend(axes: Axes, *extra: Line2D) -> None:
    """A legend of every kind of mark on the plot, outside it on the right."""
    handles = [
        Line2D(
            [],
            [],
            linestyle="none",
            marker=m.shape,
            color=m.color,
            markersize=m.area_pt2**0.5,
            label=m.legend,
        )
        for m in _MARKERS.values()
    ]
    eager = Line2D([], [], color=_EAGER_COLOR, linewidth=0.8, linestyle=":", label="eager (1.0x)")
    handles += [*extra, eager]
    axes.legend(
        handles=handles,
        loc="upper left",
        bbox_to_anchor=(1.02, 1.0),
        borderaxespad=0.0,
        fontsize=_FONT_PT,
        frameon=False,
        labelspacing=1.0,
    )


def _joined(names: Sequence[str], most_learned: int = 2) -> str:
    """The labels of coinciding points, learned trees counted when there are many, wrapped."""
    learned = [n for n in names if n.startswith(_LEARNED_PREFIX)]
    shown = [n for n in names if not n.startswith(_LEARNED_PREFIX)]
    if len(learned) > most_learned:
        shown.append(f"{len(learned)} learned trees")
    else:
        shown.extend(learned)
    return textwrap.fill(", ".join(shown), width=32)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both cost (lower) and quality (higher), by cost."""
    front: list[tuple[float, float]] = []
    for cost, quality in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or quality > front[-1][1]:
            front.append((cost, quality))
    return front


def _step_vertices(points: Sequence[tuple[float, float]]) -> tuple[list[float], list[float]]:
    """The corners of the step line (``where="post"``) through ``points``."""
    xs, ys = [points[0][0]], [points[0][1]]
    for x, y in points[1:]:
        xs += [x, x]
        ys += [ys[-1], y]
    return xs, ys


def _budget_label(axes: Axes, budget_s: float, side: int, y: float) -> Callable[[], Text]:
    """A candidate label of the budget line at ``budget_s``: on its right (``side`` 1) or left
    (-1), at height ``y`` (a fraction of the axes)."""
    va = "top" if y > 0.5 else ("bottom" if y < 0.5 else "center")
    return lambda: axes.annotate(
        f"budget {budget_s:g} s",
        (budget_s, y),
        xycoords=("data", "axes fraction"),
        xytext=(3 * side, 0),
        textcoords="offset points",
        rotation=90,
        ha="left" if side > 0 else "right",
        va=va,
        color=_LEARNED_COLOR,
        **_LABEL_STYLE,
    )


def pareto_figure(bench: BenchResult) -> Figure:
    """Quality against mean profiling seconds per problem (see the module docstring)."""
    points = _points(bench)
    figure = new_figure(7.5, 4.6)
    axes = figure.add_subplot()
    spots = _scatter(axes, points, lambda p: p.summary.mean_cost_s)
    front = pareto_front([(p.summary.mean_cost_s, p.summary.geomean_speedup) for p in points])
    axes.step(*zip(*front), where="post", color=_FRONT_COLOR, linewidth=1)
    budgets = sorted({b.budget_s for b in bench.budgets if b.budget_s is not None})
    for budget_s in budgets:
        axes.axvline(budget_s, color=_LEARNED_COLOR, linewidth=0.8, linestyle="--")
    _frame(axes, spots)
    axes.set_xlabel("mean profiling seconds per problem (symlog)")
    axes.set_title("Quality against profiling cost")
    placer = LabelPlacer(axes, spots)
    placer.avoid_path(*_step_vertices(front))
    for budget_s in budgets:
        placer.place(
            _budget_label(axes, budget_s, side, y) for y in (0.98, 0.02, 0.5) for side in (1, -1)
        )
    placer.label_all(**_LABEL_STYLE)
    extra = [Line2D([], [], color=_FRONT_COLOR, linewidth=1, label="Pareto front")]
    if budgets:
        extra.append(
            Line2D([], [], color=_LEARNED_COLOR, linewidth=0.8, linestyle="--", label="budget")
        )
    _legend(axes, *extra)
    return figure


def pareto_plot(bench: BenchResult) -> bytes:
    """``pareto_figure`` as PNG bytes."""
    return png(pareto_figure(bench))


def metrics_figure(bench: BenchResult) -> Figure:
    """Quality against the mean number of metrics collected per problem."""
    figure = new_figure(7.5, 4.6)
    axes = figure.add_subplot()
    spots = _scatter(axes, _points(bench), lambda p: p.summary.mean_metrics)
    _frame(axes, spots)
    axes.set_xlabel("metrics collected per problem (mean, symlog)")
    axes.set_title("More metrics are not always better")
    LabelPlacer(axes, spots).label_all(**_LABEL_STYLE)
    _legend(axes)
    return figure


def metrics_plot(bench: BenchResult) -> bytes:
    """``metrics_figure`` as PNG bytes."""
    return png(metrics_figure(bench))


def winners(speedups: Sequence[Sequence[float]]) -> list[list[bool]]:
    """For each row, which columns reach the row's best speedup (within 1 %)."""
    return [[s >= max(row) * (1 - _WIN_MARGIN) for s in row] for row in speedups]


@dataclass(frozen=True)
class HeatmapData:
    """Each test problem's (rows) speedup over eager under each configuration (columns) as the
    objective counts it (a failure, and a flagged candidate unless counted, at the failure
    speedup), and why a cell counts as a failure: ``failed``, ``flagged``, or "" (it does
    not)."""

    problems: list[str]
    labels: list[str]
    speedups: list[list[float]]
    failures: list[list[str]]


def learned_groups(bench: BenchResult, same_outcomes: bool = False) -> list[list[BudgetResult]]:
    """The budgets grouped by the tree they learned (its nodes; descriptions differ), in order;
    with ``same_outcomes``, by the tree and its test outcomes."""
    groups: dict[str, list[BudgetResult]] = {}
    for budget in bench.budgets:
        key = json.dumps(budget.learned.tree.get("root"), sort_keys=True)
        if same_outcomes:
            key += repr(budget.learned.score.outcomes)
        groups.setdefault(key, []).append(budget)
    return list(groups.values())


def _columns(bench: BenchResult) -> list[tuple[str, ConfigScore]]:
    """The fixed configurations, then the learned trees; trees learned alike under several
    budgets with the same outcomes are one column, named after the first budget."""
    columns = [(c.name, c) for c in bench.fixed]
    for group in learned_groups(bench, same_outcomes=True):
        more = f" (+{len(group) - 1} alike)" if len(group) > 1 else ""
        columns.append((learned_label(group[0]) + more, group[0].learned))
    return columns


def _failure(objective: Objective, outcome: ProblemOutcome) -> str:
    """Why ``outcome`` counts as a failure: ``failed``, ``flagged``, or "" (it does not)."""
    if objective.counted_speedup(outcome) is not None:
        return ""
    return "flagged" if outcome.is_flagged else "failed"


def heatmap_data(bench: BenchResult) -> HeatmapData:
    """The cells of the per-problem heatmap (see ``HeatmapData``)."""
    objective = bench.objective()
    columns = _columns(bench)
    speedups, failures = [], []
    for problem_hash in bench.test:
        outcomes = [
            next(o for o in config.score.outcomes if o.problem_hash == problem_hash)
            for _, config in columns
        ]
        speedups.append([objective.speedup(o) for o in outcomes])
        failures.append([_failure(objective, o) for o in outcomes])
    problems = [bench.names.get(h, h) for h in bench.test]
    return HeatmapData(problems, [n for n, _ in columns], speedups, failures)


def _short(name: str, most: int = 42) -> str:
    """``name`` for a tick label: runs of underscores made one, and the middle of a name
    longer than ``most`` characters left out (``…``)."""
    name = re.sub(r"_+", "_", name).strip("_")
    if len(name) <= most:
        return name
    tail = most // 3
    return f"{name[: most - tail - 1]}…{name[-tail:]}"


def _failure_patch(corner: tuple[float, float] = (0.0, 0.0), **options: object) -> Rectangle:
    """A hatched grey cell: a failure in the heatmap, or its legend entry."""
    options = {"facecolor": _FAILED_COLOR, **options}
    return Rectangle(corner, 1, 1, hatch=_FAILED_HATCH, edgecolor="#888", linewidth=0, **options)


def _draw_cells(axes: Axes, data: HeatmapData, image: AxesImage) -> None:
    """Each cell's speedup (``fail``/``flag`` on a hatched failure; white on a dark cell), and
    a frame round the winners of each row among the cells that did not fail."""
    for i, (row, why) in enumerate(zip(data.speedups, data.failures)):
        for j, (value, failure) in enumerate(zip(row, why)):
            if failure:
                axes.add_patch(_failure_patch((j - 0.5, i - 0.5), fill=False))
            text = {"failed": "fail", "flagged": "flag"}.get(failure, f"{value:.2f}")
            red, green, blue, _ = image.cmap(image.norm(math.log2(value)))
            dark = not failure and 0.299 * red + 0.587 * green + 0.114 * blue < 0.45
            color = "white" if dark else "black"
            axes.text(j, i, text, ha="center", va="center", fontsize=7, color=color)
    for i, (row, why) in enumerate(zip(winners(data.speedups), data.failures)):
        for j, (won, failure) in enumerate(zip(row, why)):
            if won and not failure:
                axes.add_patch(Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, linewidth=2))


def _heatmap_legend(axes: Axes, data: HeatmapData, failure_speedup: float) -> None:
    """A legend above the heatmap of the kinds of failure in it and of the frames."""
    counts = f"counts as {failure_speedup:.1f}x"
    kinds = {f for row in data.failures for f in row}
    handles = [
        _failure_patch(label=f"{short}: {what} ({counts})")
        for kind, short, what in (
            ("failed", "fail", "no correct candidate"),
            ("flagged", "flag", "flagged candidate"),
        )
        if kind in kinds
    ]
    handles.append(
        Patch(fill=False, linewidth=2, label="framed: best for the problem (within 1 %)")
    )
    axes.legend(
        handles=handles,
        loc="lower left",
        bbox_to_anchor=(0.0, 1.01),
        ncol=len(handles),
        fontsize=_FONT_PT,
        frameon=False,
        borderaxespad=0.0,
    )


def winners_figure(bench: BenchResult) -> Figure:
    """Speedup of each test problem (rows) under each configuration (columns): a failure is a
    hatched grey cell, the winners of each row among the others are framed."""
    data = heatmap_data(bench)
    failed = numpy.array([[bool(f) for f in row] for row in data.failures])
    logs = numpy.ma.masked_array(numpy.log2(numpy.array(data.speedups)), mask=failed)
    reach = max(float(numpy.abs(logs).max()) if logs.count() else 0.0, 0.1)
    figure = new_figure(0.6 * len(data.labels) + 3.4, 0.3 * len(data.problems) + 2.6)
    axes = figure.add_subplot()
    colors = colormaps["RdYlGn"].with_extremes(bad=_FAILED_COLOR)
    image = axes.imshow(logs, cmap=colors, vmin=-reach, vmax=reach, aspect="auto")
    _draw_cells(axes, data, image)
    axes.set_xticks(range(len(data.labels)), data.labels, rotation=35, ha="right")
    shown = [_short(p) for p in data.problems]
    axes.set_yticks(range(len(data.problems)), shown, fontsize=_FONT_PT)
    _heatmap_legend(axes, data, bench.objective().failure_speedup)
    axes.set_title("Which configuration wins, per problem (speedup over eager)", pad=24)
    figure.colorbar(image, ax=axes, label="log2 speedup over eager", fraction=0.03)
    return figure


def winners_heatmap(bench: BenchResult) -> bytes:
    """``winners_figure`` as PNG bytes."""
    return png(winners_figure(bench))


def incumbent_curve(budget: BudgetResult) -> list[tuple[int, float]]:
    """The incumbent's objective after each trial (trial -1: the start tree)."""
    value = budget.start_train_score.value
    curve = [(-1, value)]
    for trial in budget.trials:
        if trial.accepted and trial.value is not None:
            value = trial.value
        curve.append((trial.number, value))
    return curve


def learning_curves(bench: BenchResult) -> bytes:
    """One panel per budget (and cost weight), three to a row: each scored trial's objective
    and the incumbent's."""
    count = len(bench.budgets)
    columns = min(count, 3)
    rows = -(-count // columns)
    figure = new_figure(4.2 * columns + 0.6, 3.6 * rows, layout="constrained")
    panels = list(figure.subplots(rows, columns, squeeze=False).flat)
    for axes in panels[count:]:
        axes.set_visible(False)
    for axes, budget in zip(panels, bench.budgets):
        scored = [t for t in budget.trials if t.value is not None]
        for accepted, color in ((False, "#aaa"), (True, _LEARNED_COLOR)):
            chosen = [t for t in scored if t.accepted == accepted]
            axes.scatter(
                [t.number for t in chosen],
                [t.value for t in chosen],
                color=color,
                s=22,
                zorder=3,
                label="accepted" if accepted else "rejected",
            )
        axes.step(*zip(*incumbent_curve(budget)), where="post", color="#333", label="incumbent")
        axes.set_title(f"budget {budget.label}")
        axes.set_xlabel("trial")
        axes.grid(True, alpha=0.3)
    for axes in panels[::columns]:
        axes.set_ylabel(f"training {bench.objective().name}")
    if any(b.cost_weight for b in bench.budgets):
        figure.suptitle("with a cost weight W: the objective x exp(-W x profiling s per problem)")
    panels[0].legend(loc="lower right", fontsize=8)
    return png(figure)
