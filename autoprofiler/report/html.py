"""The bench report: one self-contained HTML page (inline CSS, PNG plots as data URIs, tree
pictures as inline SVG; nothing is fetched when it is opened)."""

from __future__ import annotations

import base64
import re
import statistics
from collections.abc import Callable, Iterable, Sequence
from html import escape
from pathlib import Path

from autoprofiler.bench.result import BenchResult, BudgetResult, ConfigScore
from autoprofiler.report import plots
from autoprofiler.report.compare import comparison
from autoprofiler.report.tables import (
    COLUMNS,
    PARETO_COLUMNS,
    budget_title,
    flagged_rule,
    pareto_rows,
    row_cells,
)
from autoprofiler.report.verdict import mark_flagged
from autoprofiler.rewrite.llm_rewriter import LLMRewriter
from autoprofiler.rewrite.rules import RuleRewriter
from autoprofiler.tree.export import export_svg
from autoprofiler.tree.serialize import tree_from_dict

_STYLE = """
body { font-family: system-ui, sans-serif; margin: 2em auto; max-width: 1200px; color: #222; }
h1, h2, h3 { font-weight: 600; } h2 { border-bottom: 1px solid #ccc; padding-bottom: .2em; }
table { border-collapse: collapse; margin: .6em 0 1.2em; font-size: 14px; }
th, td { border: 1px solid #ddd; padding: 3px 8px; text-align: right; }
th { background: #f3f3f3; } td:first-child, td.text { text-align: left; }
tr.over td { color: #999; } tr.learned td { font-weight: 600; background: #fdf1ef; }
dl { display: grid; grid-template-columns: max-content auto; gap: 2px 14px; font-size: 14px; }
dt { font-weight: 600; } figure { margin: 1em 0; } figcaption { font-size: 13px; color: #555; }
img { max-width: 100%; } .tree { overflow-x: auto; } .note { color: #555; font-size: 14px; }
p.versus { font-size: 14px; border-left: 3px solid #ccc; padding-left: .6em; }
p.versus.worse { border-left-color: #c0392b; } p.versus strong { color: #a93226; }
summary { cursor: pointer; }
"""


def _table(header: Sequence[str], rows: Iterable[tuple[Sequence[str], str]]) -> str:
    """An HTML table; each row is (cells, CSS class)."""
    head = "".join(f"<th>{escape(h)}</th>" for h in header)
    body = "".join(
        f'<tr class="{css}">' + "".join(f"<td>{escape(c)}</td>" for c in cells) + "</tr>"
        for cells, css in rows
    )
    return f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>"


def _figure(data: bytes, alt: str, caption: str) -> str:
    encoded = base64.b64encode(data).decode("ascii")
    return (
        f'<figure><img alt="{escape(alt)}" src="data:image/png;base64,{encoded}">'
        f"<figcaption>{escape(caption)}</figcaption></figure>"
    )


def _class_path(kind: type) -> str:
    return f"{kind.__module__}.{kind.__qualname__}"


_SETTINGS_HASH = re.compile(r"[0-9a-f]{12}")


def rewriter_name(rewriter_id: str) -> str:
    """The rewriter as ``--rewriter`` names it, from the id a bench records (``CLASS:NAME``,
    then an LLM's ``provider:model`` and sampling settings' hash): the rule rewriter's name
    (``rules``, ``rules-without-A``), ``llm (provider:model)``, or another class's
    ``MODULE:CLASS`` with the name it gives itself."""
    path, _, name = rewriter_id.partition(":")
    if not name:
        return rewriter_id
    if path == _class_path(RuleRewriter):
        return name
    if path == _class_path(LLMRewriter):
        name, _, model = name.partition(":")
        head, _, tail = model.rpartition(":")
        return f"{name} ({head if head and _SETTINGS_HASH.fullmatch(tail) else model})"
    module, _, kind = path.rpartition(".")
    return f"{module}:{kind} (named {name})" if module else rewriter_id


def _problem_list(bench: BenchResult, hashes: Sequence[str]) -> str:
    """The problems' names, folded under their count."""
    names = ", ".join(bench.names.get(h, h) for h in hashes)
    return f"<details><summary>{len(hashes)} problems</summary>{escape(names)}</details>"


def _settings(bench: BenchResult) -> str:
    spec = bench.spec
    evaluation = spec.get("evaluation", {})
    items = {
        "rewriter": rewriter_name(str(spec.get("rewriter", ""))),
        "proposer": spec.get("proposer", ""),
        "profiles recorded on": spec.get("recorded_device", ""),
        "evaluated on": f"{evaluation.get('device', '')} (configuration "
        f"{evaluation.get('config', '')})",
        "objective": str(spec.get("objective", {}).get("name", "")),
        "flagged candidates": flagged_rule(bench.objective().count_flagged),
        "seed": str(spec.get("seed", "")),
        "torch.compile": _compile_line(bench),
    }
    rows = [f"<dt>{escape(k)}</dt><dd>{escape(v)}</dd>" for k, v in items.items()]
    for what, hashes in (("training problems", bench.train), ("test problems", bench.test)):
        rows.append(f"<dt>{what}</dt><dd>{_problem_list(bench, hashes)}</dd>")
    return "<dl>" + "".join(rows) + "</dl>"


def _compile_line(bench: BenchResult) -> str:
    baselines = list(bench.compile_baselines.values())
    if not baselines:
        return "not evaluated (speedups over it are not shown)"
    correct = sum(b.correct for b in baselines)
    geomean = statistics.geometric_mean(b.program_speedup for b in baselines)
    return (
        f"correct on {correct} of {len(baselines)} test problems; geomean {geomean:.3f}x "
        "over eager (eager where it fails)"
    )


def _versus(bench: BenchResult, budget: BudgetResult) -> str:
    """The comparison of the learned tree with no profile and the best fixed configuration,
    a sentence a line, the learned tree's shortfalls in bold."""
    sentences = comparison(bench, budget)
    if not sentences:
        return ""
    lines = [
        "".join(f"<strong>{escape(c.text)}</strong>" if c.worse else escape(c.text) for c in s)
        for s in sentences
    ]
    worse = any(c.worse for s in sentences for c in s)
    return f'<p class="{"versus worse" if worse else "versus"}">{"<br>".join(lines)}</p>'


def _budget_section(bench: BenchResult, budget: BudgetResult) -> str:
    rows = []
    for row in bench.table(budget):
        css = "learned" if row.config is budget.learned else ("over" if not row.fits else "")
        rows.append((row_cells(row), css))
    start, learned = budget.start_train_score, budget.train_score
    accepted = sum(t.accepted for t in budget.trials)
    return (
        f"<h3>{escape(budget_title(bench, budget))}</h3>"
        + _table(COLUMNS, rows)
        + _versus(bench, budget)
        + f'<p class="note">Study <code>{escape(budget.study)}</code>: '
        f"{len(budget.trials)} trials, {accepted} accepted, stopped ({escape(budget.stop_reason)})"
        f"; on the training problems {escape(start.objective)} {start.value:.4g} (start tree) "
        f"&rarr; {learned.value:.4g} (learned). Grey rows do not fit the budget.</p>"
    )


def _pareto_section(bench: BenchResult) -> str:
    """The quality-cost front of the learned trees, when trees were learned at cost weights."""
    if not any(b.cost_weight for b in bench.budgets):
        return ""
    return (
        "<h3>Pareto front of the learned trees</h3>"
        + _table(PARETO_COLUMNS, [(row, "") for row in pareto_rows(bench)])
        + '<p class="note">Every tree learned (per budget and cost weight: the objective '
        "times exp(-weight &times; profiling seconds per problem)) that no other learned tree "
        "beats on both the test geomean and the mean profiling seconds, cheapest first.</p>"
    )


def _tree_sections(bench: BenchResult) -> list[str]:
    """One picture per distinct learned tree, captioned with every budget that learned it."""
    sections = []
    for budgets in plots.learned_groups(bench):
        svg = export_svg(tree_from_dict(budgets[0].learned.tree))
        svg = svg.split("?>", 1)[1] if svg.startswith("<?xml") else svg
        under = "; ".join(b.label for b in budgets)
        sections.append(
            f"<figure><div class='tree'>{svg}</div><figcaption>tree learned under "
            f"{escape(under)}</figcaption></figure>"
        )
    return sections


def _outcome_rows(
    label: str, config: ConfigScore, bench: BenchResult
) -> list[tuple[list[str], str]]:
    rows = []
    for outcome, metrics in zip(config.score.outcomes, config.metric_counts):
        speedup = "-" if outcome.speedup is None else f"{outcome.speedup:.3f}x"
        speedup = mark_flagged(speedup, outcome.flagged if outcome.is_flagged else ())
        cells = [
            bench.names.get(outcome.problem_hash, outcome.problem),
            label,
            "yes" if outcome.correct else "no",
            speedup,
            f"{outcome.cost_s:.3g}",
            str(metrics),
            ", ".join(outcome.groups) or "-",
            outcome.failure,
        ]
        rows.append((cells, ""))
    return rows


def _outcomes(bench: BenchResult) -> str:
    header = (
        "problem",
        "configuration",
        "correct",
        "speedup vs eager",
        "profiling s",
        "metrics",
        "groups collected",
        "failure",
    )
    rows = [r for c in bench.fixed for r in _outcome_rows(c.name, c, bench)]
    for budget in bench.budgets:
        rows += _outcome_rows(plots.learned_label(budget), budget.learned, bench)
    rows.sort(key=lambda r: r[0][0])
    return (
        "<details><summary>Every test problem under every configuration</summary>"
        + _table(header, rows)
        + "</details>"
    )


# (file stem, plot, alt text, caption) of every figure of a bench, in page order.
FIGURES: tuple[tuple[str, Callable[[BenchResult], bytes], str, str], ...] = (
    (
        "pareto",
        plots.pareto_plot,
        "quality against profiling cost",
        "Geomean speedup over eager against mean profiling seconds per problem: fixed "
        "configurations (circles, run without a budget), learned trees (stars), the Pareto "
        "front and each budget (dashed, labelled with its value). Points at one place share "
        "one label. An asterisk after a name: some of its groups were not recorded for some "
        "problems, so the point shows what was recorded.",
    ),
    (
        "metrics",
        plots.metrics_plot,
        "quality against number of metrics",
        "The same quality against the number of metrics in each profile.",
    ),
    (
        "winners",
        plots.winners_heatmap,
        "per-problem winners",
        "Each test problem's speedup over eager under each configuration. Hatched grey "
        "cells are failures (fail: no correct candidate; flag: a flagged one, unless "
        "flagged candidates are counted), which the scores count as the eager reference "
        "kept in place; framed cells are the best for that problem (within 1 %). A learned "
        "column marked +N alike stands for N more budgets that learned the same tree with "
        "the same outcomes.",
    ),
    (
        "learning",
        plots.learning_curves,
        "learning curves",
        "The training objective of each scored trial (red: accepted) and the incumbent.",
    ),
)


def write_figures(benches: Sequence[BenchResult], folder: str | Path) -> list[Path]:
    """Write every bench's figures as ``<bench>-<figure>.png`` files into ``folder``."""
    folder = Path(folder)
    folder.mkdir(parents=True, exist_ok=True)
    written = []
    for bench in benches:
        for stem, plot, _, _ in FIGURES:
            path = folder / f"{bench.name}-{stem}.png"
            path.write_bytes(plot(bench))
            written.append(path)
    return written


def _bench_section(bench: BenchResult) -> str:
    figures = [_figure(plot(bench), alt, caption) for _, plot, alt, caption in FIGURES]
    parts = [
        f'<section id="bench-{escape(bench.name)}"><h2>Bench {escape(bench.name)}</h2>',
        _settings(bench),
        *(_budget_section(bench, b) for b in bench.budgets),
        _pareto_section(bench),
        "<h3>Plots</h3>",
        *figures,
        "<h3>Learned trees</h3>",
        *_tree_sections(bench),
        "<h3>Per-problem outcomes</h3>",
        _outcomes(bench),
        "</section>",
    ]
    return "\n".join(parts)


def render_report(
    benches: Sequence[BenchResult], title: str = "autoprofiler bench", note: str | None = None
) -> str:
    """The whole report of ``benches`` as one HTML page; ``note``, a paragraph under the title
    (such as where its verdicts came from)."""
    return (
        '<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
        f"<title>{escape(title)}</title><style>{_STYLE}</style></head><body>"
        f"<h1>{escape(title)}</h1>"
        + (f'<p class="note">{escape(note)}</p>' if note else "")
        + '<p class="note">Fixed profiling configurations against trees learned per budget, '
        "scored on held-out test problems through the same rewriter and evaluator. Speedups "
        "count a failed candidate as the eager reference kept in place (1.0x).</p>\n"
        + "\n".join(_bench_section(b) for b in benches)
        + "\n</body></html>\n"
    )


def write_report(benches: Sequence[BenchResult], path: str | Path, note: str | None = None) -> Path:
    """Write ``render_report(benches, note=note)`` to ``path``; returns the path."""
    path = Path(path)
    path.write_text(render_report(benches, note=note), encoding="utf-8")
    return path
