"""The bench: fixed profiling configurations against learned trees, per budget, on held-out
problems, through one rewriter and one evaluator."""

from autoprofiler.bench.result import (
    LEARNED,
    BenchResult,
    BudgetResult,
    CompileBaseline,
    ConfigScore,
    Summary,
    TableRow,
    TrialPoint,
    budget_label,
    fast_p,
    summarize,
)
from autoprofiler.bench.runner import (
    ROW_SPACE,
    RUN_SPACE,
    SPEC_SPACE,
    Bench,
    BenchError,
    learning_curve,
    parse_budgets,
    parse_cost_weights,
)
from autoprofiler.bench.split import stratified_split

__all__ = [
    "LEARNED",
    "ROW_SPACE",
    "RUN_SPACE",
    "SPEC_SPACE",
    "Bench",
    "BenchError",
    "BenchResult",
    "BudgetResult",
    "CompileBaseline",
    "ConfigScore",
    "Summary",
    "TableRow",
    "TrialPoint",
    "budget_label",
    "fast_p",
    "learning_curve",
    "parse_budgets",
    "parse_cost_weights",
    "stratified_split",
    "summarize",
]
