"""The report's plots of a bench, drawn with matplotlib (without pyplot's global state) and
returned as PNG bytes.

- ``pareto_plot``: quality against mean profiling seconds per problem, for every fixed
  configuration and each learned tree, with the Pareto front and the budgets;
- ``metrics_plot``: quality against the number of metrics collected ("more is not always
  better");
- ``winners_heatmap``: each test problem's speedup under each configuration, the best marked;
- ``learning_curves``: the objective of each trial of each budget's study, and the incumbent.
"""

from __future__ import annotations

import io
import math
import textwrap
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from matplotlib.axes import Axes
from matplotlib.figure import Figure
from matplotlib.patches import Rectangle

from autoprofiler.bench.result import (
    BenchResult,
    BudgetResult,
    ConfigScore,
    Summary,
    summarize,
)

_DPI = 110
_LEARNED_COLOR = "#c0392b"
_LEARNED_PREFIX = "learned @ "
_FIXED_COLOR = "#2c6fbb"
_WIN_MARGIN = 0.01  # speedups within 1 % of the best also win


@dataclass(frozen=True)
class _Point:
    label: str
    summary: Summary
    learned: bool


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


def _scatter(axes: Axes, points: Sequence[_Point], x_of: Callable[[_Point], float]) -> None:
    """Fixed configurations as circles, learned trees as stars; the labels of points that
    coincide are joined."""
    labels: dict[tuple[float, float], list[str]] = {}
    for p in sorted(points, key=lambda p: p.learned):
        color = _LEARNED_COLOR if p.learned else _FIXED_COLOR
        marker = "*" if p.learned else "o"
        x, y = x_of(p), p.summary.geomean_speedup
        axes.scatter([x], [y], color=color, marker=marker, s=110 if p.learned else 70, zorder=3)
        labels.setdefault((round(x, 6), round(y, 6)), []).append(p.label)
    # Labels of neighbouring points are staggered upwards so that long ones do not overlap.
    for rank, ((x, y), names) in enumerate(sorted(labels.items())):
        axes.annotate(
            _joined(names),
            (x, y),
            xytext=(6, 5 + 11 * (rank % 3)),
            textcoords="offset points",
            fontsize=8,
        )
    axes.axhline(1.0, color="#999", linewidth=0.8, linestyle=":")
    axes.set_ylabel("geomean speedup over eager")
    axes.set_xscale("symlog", linthresh=1.0)
    axes.set_xlim(left=-0.3)
    axes.grid(True, alpha=0.3)


def _joined(names: Sequence[str], most_learned: int = 2) -> str:
    """The labels of coinciding points, learned trees counted when there are many, wrapped."""
    learned = [n for n in names if n.startswith(_LEARNED_PREFIX)]
    shown = [n for n in names if not n.startswith(_LEARNED_PREFIX)]
    if len(learned) > most_learned:
        shown.append(f"{len(learned)} learned trees")
    else:
        shown.extend(learned)
    return textwrap.fill(", ".join(shown), width=48)


def pareto_front(points: Sequence[tuple[float, float]]) -> list[tuple[float, float]]:
    """The points no other point beats on both cost (lower) and quality (higher), by cost."""
    front: list[tuple[float, float]] = []
    for cost, quality in sorted(points, key=lambda p: (p[0], -p[1])):
        if not front or quality > front[-1][1]:
            front.append((cost, quality))
    return front


def pareto_plot(bench: BenchResult) -> bytes:
    """Quality against mean profiling seconds per problem (see the module docstring)."""
    points = _points(bench)
    figure = Figure(figsize=(7.5, 4.6))
    axes = figure.add_subplot()
    _scatter(axes, points, lambda p: p.summary.mean_cost_s)
    front = pareto_front([(p.summary.mean_cost_s, p.summary.geomean_speedup) for p in points])
    axes.step(*zip(*front), where="post", color="#555", linewidth=1, label="Pareto front")
    for budget in bench.budgets:
        if budget.budget_s is not None:
            axes.axvline(budget.budget_s, color=_LEARNED_COLOR, linewidth=0.8, linestyle="--")
    axes.set_xlabel("mean profiling seconds per problem (symlog; dashed: budgets)")
    axes.set_title("Quality against profiling cost")
    axes.legend(loc="best")
    return png(figure)


def metrics_plot(bench: BenchResult) -> bytes:
    """Quality against the mean number of metrics collected per problem."""
    figure = Figure(figsize=(7.5, 4.6))
    axes = figure.add_subplot()
    _scatter(axes, _points(bench), lambda p: p.summary.mean_metrics)
    axes.set_xlabel("metrics collected per problem (mean, symlog)")
    axes.set_title("More metrics are not always better")
    return png(figure)


def winners(speedups: Sequence[Sequence[float]]) -> list[list[bool]]:
    """For each row, which columns reach the row's best speedup (within 1 %)."""
    return [[s >= max(row) * (1 - _WIN_MARGIN) for s in row] for row in speedups]


def heatmap_data(bench: BenchResult) -> tuple[list[str], list[str], list[list[float]]]:
    """(problem names, configuration labels, speedup over eager of each), failures (and
    flagged candidates, unless counted) at the objective's failure speedup."""
    objective = bench.objective()
    configs = [(c.name, c) for c in bench.fixed]
    configs += [(learned_label(b), b.learned) for b in bench.budgets]
    rows = []
    for problem_hash in bench.test:
        row = []
        for _, config in configs:
            outcome = next(o for o in config.score.outcomes if o.problem_hash == problem_hash)
            row.append(objective.speedup(outcome))
        rows.append(row)
    return [bench.names.get(h, h) for h in bench.test], [n for n, _ in configs], rows


def winners_heatmap(bench: BenchResult) -> bytes:
    """Speedup of each test problem (rows) under each configuration (columns); the winners of
    each row are framed."""
    problems, labels, speedups = heatmap_data(bench)
    logs = [[math.log2(s) for s in row] for row in speedups]
    reach = max(max(abs(v) for row in logs for v in row), 0.1)
    figure = Figure(figsize=(1.1 * len(labels) + 3.0, 0.42 * len(problems) + 2.2))
    axes = figure.add_subplot()
    image = axes.imshow(logs, cmap="RdYlGn", vmin=-reach, vmax=reach, aspect="auto")
    for i, row in enumerate(speedups):
        for j, value in enumerate(row):
            axes.text(j, i, f"{value:.2g}", ha="center", va="center", fontsize=8)
    for i, row in enumerate(winners(speedups)):
        for j, won in enumerate(row):
            if won:
                frame = Rectangle((j - 0.5, i - 0.5), 1, 1, fill=False, linewidth=2)
                axes.add_patch(frame)
    axes.set_xticks(range(len(labels)), labels, rotation=35, ha="right")
    axes.set_yticks(range(len(problems)), problems)
    axes.set_title("Which configuration wins, per problem (speedup over eager; framed: best)")
    figure.colorbar(image, ax=axes, label="log2 speedup over eager")
    return png(figure)


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
    figure = Figure(figsize=(4.2 * columns + 0.6, 3.6 * rows), layout="constrained")
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
