"""Evaluator accuracy and overhead: our timings against triton.testing.do_bench.

For each problem, two candidates (the reference renamed ``ModelNew`` and a ``torch.compile``
wrapper) are evaluated ``--repeats`` times with ``autoprofiler.evaluate`` (a fresh worker each
time), and the same callables are timed with ``triton.testing.do_bench`` in this process.
Rows go to a JSONL file as they finish; a rerun skips problems already there.

    python benchmarks/evaluator_bench.py --problems PROBLEMS.jsonl --ids 3,13,23 --out rows.jsonl
    python benchmarks/evaluator_bench.py --report rows.jsonl --markdown docs/results/evaluator.md
"""

from __future__ import annotations

import argparse
import platform
import statistics
import sys
import time
from pathlib import Path

from _common import append_jsonl, read_jsonl

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.evaluate.baselines import compiled_candidate, reference_as_candidate
from autoprofiler.problem import load_problems


def do_bench_ms(problem, compiled: bool) -> float:
    import torch
    import triton.testing

    module = problem.load_module("autoprofiler_bench_reference")
    device = torch.device("cuda")
    with torch.device(device):
        torch.manual_seed(42)
        model = module.Model(*module.get_init_inputs()).to(device).eval()
        torch.manual_seed(43)
        inputs = [x.to(device) if isinstance(x, torch.Tensor) else x for x in module.get_inputs()]
    fn = torch.compile(model) if compiled else model
    with torch.no_grad():
        fn(*inputs)
        ms = triton.testing.do_bench(lambda: fn(*inputs), return_mode="median")
    return float(ms)


def torch_cuda_empty_cache() -> None:
    import gc

    import torch

    gc.collect()
    torch.cuda.empty_cache()


def measure(args: argparse.Namespace) -> None:
    ids = [int(x) for x in args.ids.split(",")] if args.ids else None
    levels = [int(x) for x in args.levels.split(",")] if args.levels else None
    report = load_problems(args.problems, levels, ids)
    done = {row["problem"] for row in read_jsonl(args.out)}
    config = EvalConfig(device="cuda")
    deadline = min(
        time.monotonic() + args.deadline_s, time.monotonic() + args.stop_at - time.time()
    )
    for problem in report.problems:
        if problem.key in done:
            continue
        if time.monotonic() > deadline:  # leave whole problems for a resumed run
            print(f"deadline reached before {problem.key}", flush=True)
            break
        for kind, source in (
            ("reference", reference_as_candidate(problem)),
            ("compile", compiled_candidate(problem)),
        ):
            evals = [
                evaluate(problem, source, config, use_cache=False) for _ in range(args.repeats)
            ]
            torch_cuda_empty_cache()
            try:
                bench = do_bench_ms(problem, compiled=kind == "compile")
            except Exception as exc:  # recorded, the run goes on
                bench, error = None, f"{type(exc).__name__}: {exc}"[:200]
            else:
                error = ""
            row = {
                "problem": problem.key,
                "candidate": kind,
                "correct": [r.correct for r in evals],
                "failure": next((r.failure_message for r in evals if not r.correct), ""),
                "candidate_ms": [r.candidate.median_ms if r.candidate else None for r in evals],
                "reference_ms": [r.reference.median_ms if r.reference else None for r in evals],
                "trials": [r.candidate.trials if r.candidate else 0 for r in evals],
                "wall_s": [r.wall_s for r in evals],
                "timed_s": [r.timed_s for r in evals],
                "do_bench_ms": bench,
                "do_bench_error": error,
                "device": evals[0].device,
                "torch": evals[0].torch_version,
            }
            append_jsonl(args.out, row)
            print(f"{problem.key} {kind}: {row['candidate_ms']} do_bench {bench}", flush=True)


def _fmt(value: float | None, digits: int = 3) -> str:
    return "-" if value is None else f"{value:.{digits}f}"


def write_report(rows_path: Path, markdown: Path, command: str) -> None:
    rows = read_jsonl(rows_path)
    lines = [
        "# Evaluator: agreement with `triton.testing.do_bench`, spread, harness overhead",
        "",
        f"Machine: {rows[0]['device'] if rows else '?'}, "
        f"torch {rows[0]['torch'] if rows else '?'}.",
        f"Command: `{command}`",
        "",
        "Per problem and candidate: *ours* is the median over the repeated evaluations of the",
        "candidate's median time (each evaluation a fresh worker, CUDA events, L2 flushed);",
        "*do_bench* is `triton.testing.do_bench(..., return_mode='median')` on the same callable",
        "in the benchmark process; *spread* is max/min of the repeated evaluations' medians;",
        "*overhead* is the median of `wall_s - timed_s` (worker start, build, correctness trials).",
        "",
        "| problem | candidate | correct | ours ms | do_bench ms | ours/do_bench | spread |"
        " overhead s |",
        "|---|---|---|---|---|---|---|---|",
    ]
    ratios, spreads, overheads = [], [], []
    for row in rows:
        times = [t for t in row["candidate_ms"] if t is not None]
        ours = statistics.median(times) if times else None
        ratio = ours / row["do_bench_ms"] if ours and row["do_bench_ms"] else None
        spread = max(times) / min(times) if len(times) > 1 else None
        overhead = statistics.median(w - t for w, t in zip(row["wall_s"], row["timed_s"]))
        ratios += [ratio] if ratio else []
        spreads += [spread] if spread else []
        overheads.append(overhead)
        correct = f"{sum(row['correct'])}/{len(row['correct'])}"
        lines.append(
            f"| {row['problem']} | {row['candidate']} | {correct} | {_fmt(ours, 4)} | "
            f"{_fmt(row['do_bench_ms'], 4)} | {_fmt(ratio)} | {_fmt(spread)} | "
            f"{_fmt(overhead, 1)} |"
        )
    within = sum(1 for r in ratios if abs(r - 1) <= 0.03)
    tight = sum(1 for s in spreads if s <= 1.05)
    lines += [
        "",
        "## Summary",
        "",
        f"- rows: {len(rows)} ({len({r['problem'] for r in rows})} problems)",
        f"- agreement with do_bench within 3 %: {within}/{len(ratios)} rows; median ratio "
        f"{_fmt(statistics.median(ratios) if ratios else None)}, worst "
        f"{_fmt(max(ratios, key=lambda r: abs(r - 1)) if ratios else None)}",
        f"- spread <= 1.05: {tight}/{len(spreads)} rows; median spread "
        f"{_fmt(statistics.median(spreads) if spreads else None)}, worst "
        f"{_fmt(max(spreads) if spreads else None)}",
        f"- harness overhead per evaluation: median {_fmt(statistics.median(overheads), 1)} s",
        "",
    ]
    markdown.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path)
    parser.add_argument("--levels")
    parser.add_argument("--ids")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--out", type=Path, default=Path("evaluator_rows.jsonl"))
    parser.add_argument("--deadline-s", type=float, default=1e9, help="start no problem after")
    parser.add_argument("--stop-at", type=float, default=1e12, help="...nor after this Unix time")
    parser.add_argument("--report", type=Path, help="Write the markdown table from these rows.")
    parser.add_argument("--markdown", type=Path, default=Path("docs/results/evaluator.md"))
    parser.add_argument("--command", default="", help="The measuring command, for the report.")
    args = parser.parse_args()
    if args.report:
        write_report(args.report, args.markdown, args.command)
        return
    print(f"evaluator bench on {platform.node()} python {sys.version.split()[0]}", flush=True)
    measure(args)


if __name__ == "__main__":
    main()
