"""Rich tables of evaluation results for the terminal."""

from __future__ import annotations

import math
from collections.abc import Sequence

from rich.table import Table

from autoprofiler.evaluate.result import EvalResult


def _ms(value: float | None) -> str:
    return "-" if value is None else f"{value:.4g}"


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
    table.add_row("speedup over eager", _ms(result.speedup))
    for finding in result.findings:
        table.add_row(f"finding ({finding.severity})", f"{finding.name}: {finding.detail}")
    return table


def geomean(values: Sequence[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def results_table(title: str, rows: Sequence[tuple[str, EvalResult]]) -> Table:
    """One line per problem, and a geomean speedup (failures count 1.0)."""
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
            _ms(result.speedup),
        )
    speedups = [r.speedup if r.speedup else 1.0 for _, r in rows]
    table.caption = f"geomean speedup {geomean(speedups):.3f} (failures count 1.0)"
    return table


def optimize_table(rows: Sequence[tuple]) -> Table:
    """One line per optimized problem: profile, transformation, verdict, speedup, file."""
    table = Table(title="optimize")
    for column in ("problem", "profiled", "cost s", "rewrite", "verdict", "speedup", "candidate"):
        table.add_column(column)
    speedups = []
    for problem, profile, candidate, written, result in rows:
        if result is None:
            verdict, speedup = f"no candidate: {candidate.failure}", None
        else:
            verdict = "ok" if result.correct else result.failure_kind.value
            speedup = result.speedup
        speedups.append(speedup or 1.0)
        table.add_row(
            problem.key,
            ", ".join(profile.groups) or "nothing",
            f"{profile.cost_s:.1f}",
            str(candidate.info.get("transformation", candidate.producer)),
            verdict,
            _ms(speedup),
            str(written or "-"),
        )
    timer = next((r.timer for *_, r in rows if r is not None), "")
    table.caption = (
        f"geomean speedup over eager {geomean(speedups):.3f} (failures count 1.0); "
        f"timer: {timer or '-'}"
    )
    return table
