"""The LLM rewriter's replies as judged on the GPU: a table per profile configuration.

Reads the rows of ``benchmarks/llm_sweep.py`` (the last row of each request wins: a request
judged again after a fix) and the committed requests (for the number of metric lines each
prompt showed), and writes, between the markers ``<!-- llm_table:start -->`` and
``<!-- llm_table:end -->`` of ``--markdown``: per configuration, correct %, fast_1, fast_1.5,
geomean over eager and over torch.compile, how often the profile changed the kernel written;
quality against the number of metrics shown; and how often each configuration wins per
kernel. Only problems with every configuration judged are tabled (others are listed).

    python benchmarks/llm_table.py --rows docs/results/data/llm_sweep_rows.jsonl.gz \\
        --requests docs/results/data/llm_requests.jsonl.gz --markdown docs/results/llm_rewriter.md
"""

from __future__ import annotations

import argparse
import ast
import gzip
import itertools
import json
import re
import statistics
import sys
from collections import Counter, defaultdict
from dataclasses import dataclass
from pathlib import Path

from _common import card_name, geomean, replace_block
from llm_sweep import CONFIGS

METRIC_LINE = re.compile(r"^\s+[\w.:\[\]/-]+ = ", re.MULTILINE)
CODE_BLOCK = re.compile(r"```(?:python)?\n(.*?)```", re.DOTALL)


@dataclass(frozen=True)
class Judged:
    """One request's candidate as judged: speedups are None when it failed."""

    problem: str
    configuration: str
    correct: bool
    over_eager: float | None
    over_compile: float | None
    failure: str
    kind: str
    candidate_hash: str
    flags: tuple[str, ...] = ()

    @property
    def kept(self) -> float:
        """Speedup over eager of the program a user keeps: 1.0 when the candidate failed."""
        return self.over_eager if self.correct and self.over_eager else 1.0


def _open(path: Path):
    return gzip.open(path, "rt", encoding="utf-8") if path.suffix == ".gz" else path.open()


def read_rows(path: Path) -> dict[str, dict]:
    """custom_id -> its last row."""
    rows: dict[str, dict] = {}
    with _open(path) as handle:
        for line in handle:
            if line.strip():
                row = json.loads(line)
                rows[row["custom_id"]] = row
    return rows


def judged(row: dict) -> Judged:
    result = row.get("result") or {}
    over_compile = None
    compiled, timing = result.get("compiled_reference"), result.get("candidate")
    if row.get("correct") and compiled and timing and timing.get("median_ms"):
        over_compile = compiled["median_ms"] / timing["median_ms"]
    failure = row.get("failure_kind") or ("" if row.get("correct") else "no code")
    return Judged(
        problem=row["problem"],
        configuration=row["configuration"],
        correct=bool(row.get("correct")),
        over_eager=row.get("speedup") if row.get("correct") else None,
        over_compile=over_compile,
        failure=str(failure).removeprefix("FailureKind.").lower(),
        kind=row.get("kind", ""),
        candidate_hash=row.get("candidate_hash", ""),
        flags=tuple(f["name"] for f in result.get("findings", []) if f.get("severity") == "flag"),
    )


def metric_lines(requests: Path) -> dict[str, int]:
    """custom_id -> metric lines its prompt showed."""
    counts = {}
    with gzip.open(requests, "rt", encoding="utf-8") as handle:
        for line in handle:
            request = json.loads(line)
            text = "".join(m["content"] for m in request["params"]["messages"])
            profile = text.split("## Reference program")[0]
            counts[request["custom_id"]] = len(METRIC_LINE.findall(profile))
    return counts


def code_shape(text: str) -> str:
    """A reply's program with comments and layout removed (its AST), to tell whether two
    replies wrote different kernels rather than different words."""
    try:
        return ast.dump(ast.parse(text))
    except SyntaxError:
        return text


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rows", type=Path, required=True)
    parser.add_argument("--requests", type=Path, required=True)
    parser.add_argument("--replies", type=Path, help="the replies, to compare their code")
    parser.add_argument("--markdown", type=Path, required=True)
    return parser.parse_args(argv)


def _replies_code(path: Path | None) -> dict[str, str]:
    if path is None:
        return {}
    code = {}
    with _open(path) as handle:
        for line in handle:
            reply = json.loads(line)
            blocks = CODE_BLOCK.findall(reply["content"])
            code[reply["custom_id"]] = code_shape(max(blocks, key=len) if blocks else "")
    return code


def judged_devices(rows: dict[str, dict]) -> list[str]:
    """The GPU models whose verdicts the rows hold, as the page names them."""
    labels = {row["result"].get("device", "") for row in rows.values() if row.get("result")}
    return sorted(card_name(label) for label in labels if label)


def build_table(rows: dict[str, dict], metrics: dict[str, int], code: dict[str, str]) -> str:
    by_problem: dict[str, dict[str, tuple[str, Judged]]] = defaultdict(dict)
    for custom_id, row in rows.items():
        entry = judged(row)
        by_problem[entry.problem][entry.configuration] = (custom_id, entry)
    complete = sorted(p for p, c in by_problem.items() if set(c) >= set(CONFIGS))
    partial = sorted(set(by_problem) - set(complete))
    judged_on = " and the ".join(judged_devices(rows)) or "GPU"
    lines = [
        f"Judged: {len(rows)} of 240 requests; tabled: the {len(complete)} problems with all six "
        f"configurations judged ({len(complete) * len(CONFIGS)} candidates). Speedups are medians "
        f"of the evaluator's timed trials on the {judged_on}; a failed candidate counts 1.0x "
        "over eager in the geomean (the user keeps the reference); over torch.compile is the "
        "geomean over "
        "correct candidates only. `changed` is how often the reply's code (its syntax tree, "
        "comments and layout aside) differs from the reply to the same problem with no profile.",
        "",
        "| configuration | metric lines shown (median) | correct | flagged (of correct) "
        "| fast_1 | fast_1.5 | geomean over eager | same, flagged as 1.0x "
        "| geomean over compile (correct) | changed vs none | failures |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    winners: Counter[str] = Counter()
    quality = {}
    for name in CONFIGS:
        entries = [by_problem[p][name] for p in complete]
        judged_ = [e for _, e in entries]
        n = len(judged_)
        correct = sum(e.correct for e in judged_)
        fast1 = sum(e.correct and e.kept > 1.0 for e in judged_)
        fast15 = sum(e.correct and e.kept > 1.5 for e in judged_)
        eager = geomean([e.kept for e in judged_])
        flagged = sum(e.correct and bool(e.flags) for e in judged_)
        unflagged = geomean([1.0 if e.flags else e.kept for e in judged_])
        compiled = geomean([e.over_compile for e in judged_ if e.over_compile])
        shown = statistics.median(metrics.get(cid, 0) for cid, _ in entries)
        changed = "-"
        if name != "none" and code:
            diffs = [
                code.get(cid) != code.get(by_problem[p]["none"][0])
                for (cid, _), p in zip(entries, complete)
            ]
            changed = f"{sum(diffs)}/{len(diffs)}"
        failures = Counter(e.failure for e in judged_ if not e.correct)
        quality[name] = (shown, eager)
        lines.append(
            f"| {name} | {shown:g} | {correct}/{n} ({100 * correct / n:.0f} %) | {flagged} | "
            f"{fast1} | {fast15} | {eager:.3f} | {unflagged:.3f} | {compiled:.3f} | {changed} | "
            f"{', '.join(f'{k} {v}' for k, v in sorted(failures.items())) or '-'} |"
        )
    flag_names = Counter(
        f for p in complete for name in CONFIGS for f in by_problem[p][name][1].flags
        if by_problem[p][name][1].correct
    )  # fmt: skip
    lines += [
        "",
        "Flags among the correct candidates tabled (a flagged speedup counts only with "
        "`--count-flagged`; the columns but one count them): "
        + ", ".join(f"{name} {count}" for name, count in flag_names.most_common())
        + ".",
    ]
    best_single = max(quality, key=lambda name: quality[name][1])
    oracle, contested = [], 0
    for problem in complete:
        kept = {name: by_problem[problem][name][1].kept for name in CONFIGS}
        top = max(kept.values())
        oracle.append(top)
        if not any(by_problem[problem][name][1].correct for name in CONFIGS):
            continue  # nothing to win: every configuration failed
        contested += 1
        for name, value in kept.items():
            if value == top:
                winners[name] += 1
    order = sorted(CONFIGS, key=lambda name: quality[name][0])
    rising = all(quality[a][1] <= quality[b][1] for a, b in itertools.pairwise(order))
    lines += [
        "",
        "**More metrics, better kernels?** Ordered by the metric lines shown ("
        + ", ".join(f"{n} {quality[n][0]:g}: {quality[n][1]:.3f}x" for n in order)
        + f"), the geomean {'rises' if rising else 'does not rise'} monotonically.",
        "",
        f"**Which configuration wins per kernel** (the best kept speedup of the six, over the "
        f"{contested} problems where one was correct; a tie counts for each): "
        + ", ".join(f"{name} {winners[name]}" for name in CONFIGS)
        + f". The best per kernel would give {geomean(oracle):.3f}x over eager against "
        f"{quality[best_single][1]:.3f}x for the best single configuration ({best_single}).",
        "",
        "Per problem (kept speedup over eager; failures named):",
        "",
        "| problem | " + " | ".join(CONFIGS) + " |",
        "|---|" + "---|" * len(CONFIGS),
    ]
    for problem in complete:
        cells = []
        for name in CONFIGS:
            entry = by_problem[problem][name][1]
            cells.append(f"{entry.over_eager:.2f}" if entry.correct else entry.failure)
        lines.append(f"| {problem} | " + " | ".join(cells) + " |")
    if partial:
        lines += ["", "Not tabled (not every configuration judged yet): " + ", ".join(
            f"{p} ({len(by_problem[p])} of 6)" for p in partial) + "."]  # fmt: skip
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    table = build_table(
        read_rows(args.rows), metric_lines(args.requests), _replies_code(args.replies)
    )
    return 0 if replace_block(args.markdown, "llm_table", table) else 2


if __name__ == "__main__":
    sys.exit(main())
