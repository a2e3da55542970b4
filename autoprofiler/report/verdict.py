"""Rich tables of evaluation results for the terminal."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from autoprofiler.evaluate.result import EvalResult, counted_speedup, flag_names


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


def mark_flagged(speedup: str, flagged: Sequence[str]) -> str:
    """``speedup`` as shown, marked with the names of its flag findings when there are any:
    ``1.82x (flagged: side_channel)``."""
    return f"{speedup} (flagged: {', '.join(flagged)})" if flagged else speedup


def _flags(result: EvalResult | None) -> tuple[str, ...]:
    """The flag findings' names of a correct ``result`` (a failure is not a flagged one)."""
    return flag_names(result.findings) if result is not None and result.correct else ()


def _speedup_cell(result: EvalResult) -> str:
    """The speedup of ``result``, marked when the candidate is flagged."""
    return mark_flagged(_ms(result.speedup), _flags(result))


def _geomean_caption(
    results: Sequence[EvalResult | None], count_flagged: bool, what: str = ""
) -> str:
    """``geomean speedup over eager 1.234 (failures and 1 flagged count 1.0)``: failures (None:
    no candidate) and, unless ``count_flagged``, flagged candidates count 1.0."""
    speedups = [
        counted_speedup(r.correct, r.speedup, _flags(r), count_flagged) if r is not None else None
        for r in results
    ]
    flagged = sum(bool(_flags(r)) for r in results)
    if not flagged:
        counts = "failures count 1.0"
    elif count_flagged:
        counts = f"failures count 1.0; {flagged} flagged counted at their speedups"
    else:
        counts = f"failures and {flagged} flagged count 1.0"
    value = geomean([1.0 if s is None else s for s in speedups])
    return f"geomean speedup{what} {value:.3f} ({counts})"


def verdict_table(problem: str, candidate: str, result: EvalResult) -> Table:
    """One candidate's verdict: correctness, timings, speedup, failure and findings."""
    table = Table(title=f"{candidate} on {problem}", show_header=False)
    table.add_column("what", style="bold")
    table.add_column("value")
    verdict = "[green]correct[/green]" if result.correct else "[red]failed[/red]"
    table.add_row("verdict", verdict + (" (cached)" if result.from_cache else ""))
    if result.failure_kind:
        table.add_row("failure", f"{result.failure_kind.value}: {result.failure_message}")
    table.add_row("device", f"{result.device} ({result.timer})")
    table.add_row("max abs diff", _ms(result.max_abs_diff))
    table.add_row("tolerance", f"atol {result.atol} rtol {result.rtol}")
    if result.reference:
        table.add_row("reference median ms", _ms(result.reference.median_ms))
    if result.candidate:
        table.add_row("candidate median ms", _ms(result.candidate.median_ms))
    if result.compiled_reference:
        table.add_row("torch.compile median ms", _ms(result.compiled_reference.median_ms))
    table.add_row("speedup over eager", _speedup_cell(result))
    for finding in result.findings:
        table.add_row(f"finding ({finding.severity})", f"{finding.name}: {finding.detail}")
    return table


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def results_table(
    title: str, rows: Sequence[tuple[str, EvalResult]], count_flagged: bool = False
) -> Table:
    """One line per problem, and a geomean speedup (failures count 1.0, and so do flagged
    candidates unless ``count_flagged``)."""
    table = Table(title=title)
    for column in ("problem", "verdict", "eager ms", "candidate ms", "speedup"):
        table.add_column(column)
    for key, result in rows:
        verdict = (
            "ok" if result.correct else (result.failure_kind.value if result.failure_kind else "?")
        )
        table.add_row(
            key,
            verdict,
            _ms(result.reference.median_ms if result.reference else None),
            _ms(result.candidate.median_ms if result.candidate else None),
            _speedup_cell(result),
        )
    table.caption = _geomean_caption([r for _, r in rows], count_flagged)
    return table


def optimize_table(rows: Sequence[tuple], count_flagged: bool = False) -> Table:
    """One line per optimized problem: profile, transformation, verdict, speedup, file; the
    geomean counts failures, and flagged candidates unless ``count_flagged``, as 1.0. A row
    may end with what ``--keep best`` kept (who wrote it, its counted speedup): a column and
    a geomean of its own."""
    kept = [row[5] if len(row) > 5 else None for row in rows]
    table = Table(title="optimize")
    columns = ["problem", "profiled", "cost s", "rewrite", "verdict", "speedup"]
    columns += ["kept"] if any(kept) else []
    for column in (*columns, "candidate"):
        table.add_column(column)
    for (problem, profile, candidate, written, result, *_), chosen in zip(rows, kept):
        if result is None:
            verdict, speedup = f"no candidate: {candidate.failure}", "-"
        else:
            verdict = "ok" if result.correct else result.failure_kind.value
            speedup = _speedup_cell(result)
        cells = [
            problem.key,
            ", ".join(profile.groups) or "nothing",
            f"{profile.cost_s:.1f}",
            str(candidate.info.get("transformation", candidate.producer)),
            verdict,
            speedup,
        ]
        if any(kept):
            cells.append(f"{chosen['by']} {chosen['speedup']:.3g}x" if chosen else "-")
        written = chosen["written"] if chosen else written
        table.add_row(*cells, str(written or "-"))
    timer = next((row[4].timer for row in rows if row[4] is not None), "")
    caption = _geomean_caption([row[4] for row in rows], count_flagged, " over eager")
    if any(kept):
        value = geomean([k["speedup"] for k in kept if k] or [1.0])
        caption += f"; kept (best of the contenders): {value:.3f}"
    table.caption = f"{caption}; timer: {timer or '-'}"
    return table
