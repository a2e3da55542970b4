"""How the tree learned under a budget compares, column by column of the budget's table, with
no profile (the fixed configuration ``none``) and with the best fixed configuration that fits
the budget: better, worse or the same, as the table shows the numbers (two values that print
alike are the same). A column on which every row prints alike says nothing and is left out.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from autoprofiler.bench.result import BenchResult, BudgetResult, Summary, TableRow
from autoprofiler.report.tables import COLUMNS, row_cells

NO_PROFILE = "none"


class Verdict(enum.Enum):
    """The learned tree against another configuration on one column."""

    WORSE = "worse"
    BETTER = "better"
    SAME = "the same"


@dataclass(frozen=True)
class Measure:
    """A column of ``COLUMNS`` that ranks configurations, and which way is better."""

    column: str
    value: Callable[[Summary], float]
    higher_is_better: bool = True


MEASURES = (
    Measure("correct", lambda s: s.correct_rate),
    Measure("flagged", lambda s: s.flagged, higher_is_better=False),
    Measure("fast_1", lambda s: s.fast_1),
    Measure("fast_1.5", lambda s: s.fast_1_5),
    Measure("geomean vs eager", lambda s: s.geomean_speedup),
    Measure("profiling s / problem", lambda s: s.mean_cost_s, higher_is_better=False),
)


@dataclass(frozen=True)
class Versus:
    """The learned tree against ``others`` (several when they tie as the best) on ``column``:
    both values as the table prints them, and the verdict."""

    column: str
    learned: str
    other: str
    others: tuple[str, ...]
    verdict: Verdict


@dataclass(frozen=True)
class Clause:
    """A piece of a comparison's text; ``worse`` marks where the learned tree is worse."""

    text: str
    worse: bool = False


def _shown(row: TableRow, column: str) -> str:
    return row_cells(row)[COLUMNS.index(column)]


def _ranks_above(measure: Measure, a: TableRow, b: TableRow) -> bool:
    """Whether ``a`` is better than ``b`` on ``measure`` (never when they print alike)."""
    if _shown(a, measure.column) == _shown(b, measure.column):
        return False
    a_value, b_value = measure.value(a.summary), measure.value(b.summary)
    return a_value > b_value if measure.higher_is_better else a_value < b_value


def _versus(measure: Measure, learned: TableRow, others: Sequence[TableRow]) -> Versus:
    """``learned`` against the best of ``others`` (all of them printing alike) on ``measure``."""
    best = others[0]
    for row in others[1:]:
        if _ranks_above(measure, row, best):
            best = row
    tied = tuple(
        r.name for r in others if _shown(r, measure.column) == _shown(best, measure.column)
    )
    if _ranks_above(measure, learned, best):
        verdict = Verdict.BETTER
    elif _ranks_above(measure, best, learned):
        verdict = Verdict.WORSE
    else:
        verdict = Verdict.SAME
    return Versus(
        measure.column, _shown(learned, measure.column), _shown(best, measure.column), tied, verdict
    )


def compare(bench: BenchResult, budget: BudgetResult) -> tuple[list[Versus], list[Versus]]:
    """The learned tree of ``budget`` against no profile (empty when the bench has no
    ``none``) and against the best fixed configuration that fits the budget (empty when
    none fits), on each informative column of ``MEASURES``."""
    rows = bench.table(budget)
    learned = next(r for r in rows if r.config is budget.learned)
    fixed = [r for r in rows if r is not learned]
    measures = [m for m in MEASURES if len({_shown(r, m.column) for r in rows}) > 1]
    no_profile = [r for r in fixed if r.name == NO_PROFILE]
    fitting = [r for r in fixed if r.fits]
    return (
        [_versus(m, learned, no_profile) for m in measures] if no_profile else [],
        [_versus(m, learned, fitting) for m in measures] if fitting else [],
    )


def _names(names: Sequence[str], most: int = 2) -> str:
    """``a``, ``a and b``, ``a, b and 3 more``."""
    if len(names) <= most:
        return " and ".join(names)
    return f"{', '.join(names[:most])} and {len(names) - most} more"


def _and(items: Sequence[str]) -> str:
    return items[0] if len(items) == 1 else f"{', '.join(items[:-1])} and {items[-1]}"


def _clauses(comparisons: Sequence[Versus], named: bool) -> list[Clause]:
    """``worse on A (x vs y) and B (...); better on C (...)``: worse first, then better,
    then the same; with ``named``, each opponent's name after its value."""
    groups = []
    for verdict in Verdict:
        items = []
        for v in (c for c in comparisons if c.verdict is verdict):
            values = v.learned if verdict is Verdict.SAME else f"{v.learned} vs {v.other}"
            items.append(f"{v.column} ({values}{f': {_names(v.others)}' if named else ''})")
        if items:
            groups.append(Clause(f"{verdict.value} on {_and(items)}", verdict is Verdict.WORSE))
    clauses: list[Clause] = []
    for index, group in enumerate(groups):
        clauses += [Clause("; ")] if index else []
        clauses.append(group)
    return clauses


def comparison(bench: BenchResult, budget: BudgetResult) -> list[list[Clause]]:
    """Up to two sentences on ``budget``'s learned tree (see the module docstring), each as
    clauses: against no profile, and against the best fixed configuration."""
    against_none, against_best = compare(bench, budget)
    sentences = []
    if against_none:
        lead = Clause(f"Learned tree against no profile ({NO_PROFILE}): ")
        sentences.append([lead, *_clauses(against_none, named=False), Clause(".")])
    if against_best:
        lead = Clause(
            "Against the best fixed configuration within the budget on each column (named "
            "after the value): "
        )
        sentences.append([lead, *_clauses(against_best, named=True), Clause(".")])
    elif bench.fixed:
        sentences.append([Clause("No fixed configuration fits the budget.")])
    return sentences


def comparison_text(bench: BenchResult, budget: BudgetResult) -> str:
    """``comparison`` as plain text."""
    return " ".join("".join(c.text for c in s) for s in comparison(bench, budget))
