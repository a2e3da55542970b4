"""benchmarks/keep_best.py's table: torch.compile alone is read from whichever contender
carried its verdict (without a profile the rule rewriter's pick is torch.compile itself, judged
once under the rule rewriter's name)."""

from __future__ import annotations

from .conftest import import_benchmark

keep_best = import_benchmark("keep_best")


def _row(contenders: list[dict], kept: float, by: str) -> dict:
    return {"kept": {"contenders": contenders, "speedup": kept, "by": by}}


def test_compile_alone_counts_the_rule_rewriters_compile_pick() -> None:
    deduplicated = [
        {"by": "llm", "counted": 2.0},
        {"by": "rules", "transformation": "compile", "counted": 1.5},
    ]
    separate = [
        {"by": "llm", "counted": None},
        {"by": "rules", "transformation": "tf32", "counted": 1.2},
        {"by": "compile", "counted": 1.1},
    ]
    rows = [_row(deduplicated, 2.0, "llm"), _row(separate, 1.2, "rules")]
    text = keep_best.table({"none": rows}, True, judged_on="cuda:NVIDIA H100 80GB HBM3")
    line = text.splitlines()[2]
    cells = [cell.strip() for cell in line.strip("|").split("|")]
    assert cells[:6] == ["none", "2", f"{2.0**0.5:.3f}", f"{(1.5 * 1.2) ** 0.5:.3f}",
                         f"{(1.5 * 1.1) ** 0.5:.3f}", f"{(2.0 * 1.2) ** 0.5:.3f}"]  # fmt: skip
    assert cells[7] == "0"  # neither kept program is slower than torch.compile
    assert "Geomean speedups over eager on the H100 80GB HBM3 (replayed)" in text
