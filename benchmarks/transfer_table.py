"""The same candidates judged on two GPUs: do the verdicts carry over from one to the other?

Every (problem, candidate, configuration) with a verdict on both devices is a pair (the newest
verdict on each side, later files counting as newer). The table says how often correctness
agrees, lists the pairs where it does not, and compares the speedups over eager of the pairs
correct on both: the ratio TO / FROM (median, geometric mean, range, share within 5 %). The
evaluator versions on each side are named: a pair judged by two versions mixes the change of
GPU with the change of judge.

    python benchmarks/transfer_table.py docs/results/data/kernelbench_h200_evaluations.jsonl.gz \\
        docs/results/data/llm_evaluations.jsonl.gz \\
        docs/results/data/rebuild/nvidia-h100-80gb-hbm3/*.jsonl.gz \\
        --to "cuda:NVIDIA H100 80GB HBM3" \\
        --markdown docs/results/reproduction.md
"""

from __future__ import annotations

import argparse
import logging
import statistics
import tempfile
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

from _common import FIRST_JUDGED_ON, card_name, geomean, replace_block, run_main

from autoprofiler.evaluate import EvaluationsFileError, import_evaluations
from autoprofiler.store import Store

log = logging.getLogger("transfer_table")

BLOCK = "transfer_table"
CLOSE = 0.05  # a speedup ratio within this of 1.0 counts as carried over


@dataclass(frozen=True)
class Pair:
    """One candidate's verdicts on both devices (each a stored result dict)."""

    problem: str
    candidate: str
    before: dict
    after: dict

    @property
    def ratio(self) -> float | None:
        """Speedup over eager, after / before; None unless both are correct and timed."""
        if not (self.before.get("correct") and self.after.get("correct")):
            return None
        first, second = self.before.get("speedup"), self.after.get("speedup")
        return second / first if first and second else None


def pairs(store: Store, before: str, after: str) -> list[Pair]:
    """The pairs of ``store`` judged on both devices, in problem order."""
    newest: dict[str, dict[tuple[str, str, str], dict]] = {before: {}, after: {}}
    for _, problem_hash, candidate_hash, device, config_hash, result in store.iter_evaluations():
        if device in newest:
            newest[device][(problem_hash, candidate_hash, config_hash)] = result
    found = []
    for key in newest[before].keys() & newest[after].keys():
        problem = store.get_problem(key[0])
        candidate = store.get_candidate(key[1]) or {}
        name = candidate.get("info", {}).get("transformation") or candidate.get("producer", "")
        found.append(
            Pair(
                problem.key if problem else key[0][:12],
                name or key[1][:12],
                newest[before][key],
                newest[after][key],
            )
        )
    return sorted(found, key=lambda p: (p.problem, p.candidate))


def _verdict(result: dict) -> str:
    return "correct" if result.get("correct") else result.get("failure_kind") or "failed"


def _versions(results: list[dict]) -> str:
    counted = Counter(str(r.get("evaluator_version") or "1") for r in results)  # v1 named none
    return ", ".join(f"v{v} ({n})" for v, n in sorted(counted.items()))


def table(found: list[Pair], before: str, after: str) -> str:
    """The markdown block: agreement, disagreements, speedup ratios."""
    first, second = card_name(before), card_name(after)
    if not found:
        return f"No candidate has a verdict on both the {first} and the {second}."
    agree = [p for p in found if p.before.get("correct") == p.after.get("correct")]
    ratios = [r for p in found if (r := p.ratio) is not None]
    both = sum(bool(p.before.get("correct") and p.after.get("correct")) for p in found)
    lines = [
        f"{len(found)} candidates judged on both the {first} (evaluator "
        f"{_versions([p.before for p in found])}) and the {second} (evaluator "
        f"{_versions([p.after for p in found])}).",
        "",
        "| | value |",
        "|---|---|",
        f"| correctness agrees | {len(agree)} of {len(found)} |",
        f"| correct on both | {both} |",
    ]
    if ratios:
        close = sum(abs(r - 1.0) <= CLOSE for r in ratios)
        lines += [
            f"| speedup over eager, {second} / {first}: median | {statistics.median(ratios):.3f} |",
            f"| geometric mean | {geomean(ratios):.3f} |",
            f"| range | {min(ratios):.3f} to {max(ratios):.3f} |",
            f"| within {CLOSE:.0%} | {close} of {len(ratios)} |",
        ]
    differ = [p for p in found if p.before.get("correct") != p.after.get("correct")]
    if differ:
        lines += ["", f"Where correctness differs ({first} / {second}):", ""]
        lines += [
            f"- {p.problem} `{p.candidate}`: {_verdict(p.before)} / {_verdict(p.after)}"
            for p in differ
        ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exports", type=Path, nargs="+", help="evaluation exports, oldest first")
    parser.add_argument(
        "--from", dest="before", default=FIRST_JUDGED_ON, help=f"default {FIRST_JUDGED_ON}"
    )
    parser.add_argument("--to", dest="after", required=True, help="the other device's label")
    parser.add_argument("--markdown", type=Path, help=f"a page with a {BLOCK} block to fill")
    args = parser.parse_args(argv)
    if args.before == args.after:
        log.error("--from and --to both name %s: give two different devices", args.after)
        return 2
    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "t.sqlite") as store:
        try:
            for path in args.exports:
                import_evaluations(path, store)
        except EvaluationsFileError as exc:
            log.error("%s", exc)
            return 2
        text = table(pairs(store, args.before, args.after), args.before, args.after)
    print(text)
    if args.markdown is not None and not replace_block(args.markdown, BLOCK, text):
        return 2
    return 0


if __name__ == "__main__":
    run_main(main, log)
