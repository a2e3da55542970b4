"""The bench's tables, one per budget: the cells as text (shared by the terminal and the HTML
report) and a rich table for the terminal."""

from __future__ import annotations

from rich import box
from rich.table import Table

from autoprofiler.bench.result import BenchResult, BudgetResult, TableRow, summarize
from autoprofiler.tree.serialize import tree_from_dict

COLUMNS = (
    "configuration",
    "fits budget",
    "correct",
    "flagged",
    "fast_1",
    "fast_1.5",
    "geomean vs eager",
    "geomean vs torch.compile",
    "profiling s / problem",
    "metrics / problem",
    "notes",
)
# The same columns, narrow enough for a terminal.
SHORT_COLUMNS = (
    "config",
    "fits",
    "correct",
    "flagged",
    "fast_1",
    "fast_1.5",
    "×eager",
    "×compile",
    "prof s",
    "metrics",
    "notes",
)
_LEGEND = (
    "×eager, ×compile: geomean speedup over eager and torch.compile; prof s: mean profiling "
    "seconds per problem; metrics: mean metrics per profile"
)


def flagged_rule(count_flagged: bool) -> str:
    """How the tables count flagged candidates (``Objective.count_flagged``)."""
    how = "at their speedups" if count_flagged else "as failures in fast_p and the geomeans"
    return f"flagged: correct candidates with a flag finding, counted {how}"


def _times(value: float | None) -> str:
    return "-" if value is None else f"{value:.3f}x"


def row_notes(row: TableRow) -> str:
    """Why a row's numbers need a second look: over budget, groups never recorded, replayed
    evaluations missing."""
    summary = row.summary
    notes = []
    if not row.fits:
        notes.append(f"over budget (up to {summary.max_cost_s:.3g} s)")
    if summary.incomplete:
        notes.append(f"groups unrecorded for {summary.incomplete}")
    if summary.not_recorded:
        notes.append(f"evaluation unrecorded for {summary.not_recorded}")
    return "; ".join(notes)


def row_cells(row: TableRow) -> list[str]:
    """The text of each of ``COLUMNS`` for ``row``."""
    summary = row.summary
    return [
        row.name,
        "yes" if row.fits else "no",
        f"{summary.correct_rate:.0%}",
        str(summary.flagged),
        f"{summary.fast_1:.0%}",
        f"{summary.fast_1_5:.0%}",
        _times(summary.geomean_speedup),
        _times(summary.vs_compile),
        f"{summary.mean_cost_s:.2f}",
        f"{summary.mean_metrics:.0f}",
        row_notes(row),
    ]


def budget_title(bench: BenchResult, budget: BudgetResult) -> str:
    """``bench NAME, budget 20 s: 7 test problems (tree learned in 12 trials on 8)``."""
    return (
        f"bench {bench.name}, budget {budget.label}: {len(bench.test)} test "
        f"problems (tree learned in {len(budget.trials)} trials on {len(bench.train)})"
    )


def bench_tables(bench: BenchResult) -> list[Table]:
    """One rich table per budget, its notes as a caption; rows that do not fit the budget are
    dimmed, the learned tree's is bold."""
    tables = []
    rule = flagged_rule(bench.objective().count_flagged)
    for budget in bench.budgets:
        rows = bench.table(budget)
        notes = [f"{row.name}: {note}" for row in rows if (note := row_notes(row))]
        table = Table(
            title=budget_title(bench, budget),
            caption="\n".join([*notes, f"{_LEGEND}; {rule}"]),
            caption_justify="left",
            box=box.SIMPLE_HEAD,
            padding=(0, 0),
            show_edge=False,
        )
        for index, column in enumerate(SHORT_COLUMNS[:-1]):
            table.add_column(column, justify="left" if index < 2 else "right", no_wrap=True)
        for row in rows:
            style = "bold" if row.config is budget.learned else None
            table.add_row(*row_cells(row)[:-1], style="dim" if not row.fits else style)
        tables.append(table)
    return tables


PARETO_COLUMNS = (
    "learned under",
    "test geomean vs eager",
    "geomean vs torch.compile",
    "profiling s / problem",
    "collects",
)


def pareto_rows(bench: BenchResult) -> list[list[str]]:
    """The cells of ``PARETO_COLUMNS`` for each learned tree on the quality-cost front."""
    objective = bench.objective()
    rows = []
    for budget in bench.pareto_front():
        summary = summarize(budget.learned, bench.compile_baselines, objective)
        groups = tree_from_dict(budget.learned.tree).groups()
        rows.append(
            [
                budget.label,
                _times(summary.geomean_speedup),
                _times(summary.vs_compile),
                f"{summary.mean_cost_s:.2f}",
                ", ".join(groups) or "nothing",
            ]
        )
    return rows


def pareto_table(bench: BenchResult) -> Table:
    """The learned trees no other learned tree beats on both test quality and profiling time."""
    table = Table(
        title=f"bench {bench.name}: Pareto front of the learned trees on {len(bench.test)} "
        "test problems",
        box=box.SIMPLE_HEAD,
        padding=(0, 1),
        show_edge=False,
    )
    for index, column in enumerate(PARETO_COLUMNS):
        table.add_column(column, justify="right" if 0 < index < 4 else "left")
    for row in pareto_rows(bench):
        table.add_row(*row)
    return table
