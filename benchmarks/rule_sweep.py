"""Evaluate, once, every candidate the rule rewriter could write for each problem.

A profiling tree changes what the ``RuleRewriter`` is told, and so which transformation it
picks; ``RuleRewriter.reachable`` lists every transformation some profile could make it pick.
This script evaluates each of them (and times torch.compile of the reference beside the first)
on this machine's GPU, into a store, so that ``bench``/``learn``/``optimize`` can later replay
any tree on a CPU with recorded profiles and recorded evaluations. It also yields the rewriter's
oracle: the best candidate per problem.

    python3 benchmarks/rule_sweep.py PROBLEMS.jsonl --levels 1 2 --ids 1 23 \\
        --store $OUT/sweep0.sqlite --rows $OUT/sweep0.jsonl --deadline-s 540 --claims /tmp/claims

Resumable: evaluations are cached in the store (a rerun on the same store skips them) and one
JSONL row per evaluation is appended as it finishes. Several processes (one per GPU) share the
work through ``--claims``: each problem is taken by the first process to create its claim file.
``--exclude`` drops transformations (``compile_max_autotune`` by default: minutes of
autotuning per problem). Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import time
from pathlib import Path

from _common import (
    add_problem_arguments,
    append_jsonl,
    in_id_order,
    log_progress,
    read_jsonl,
    run_main,
)

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.problem import Problem, ProblemError, load_problems
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.rules import RuleRewriter
from autoprofiler.store import Store

log = logging.getLogger("rule_sweep")
# Cheap candidates first, so that a deadline cuts the expensive compiles.
EVALUATION_ORDER = (
    "cuda_graph",
    "tf32",
    "bf16_autocast",
    "channels_last",
    "triton_row",
    "triton_elementwise",
    "triton_all",
    "compile",
    "compile_tf32",
    "compile_max_autotune",
)
# Seconds to keep in hand before starting one more evaluation. On the H200, max-autotune
# evaluations took 14-85 s on 23 GEMM/conv problems; one depthwise conv ran past 250 s.
RESERVE_S = {"compile": 45.0, "compile_tf32": 45.0, "compile_max_autotune": 120.0}
DEFAULT_RESERVE_S = 20.0


def sweep_config(device: str) -> EvalConfig:
    """The evaluation settings of the sweep (replays must use the same ones)."""
    return EvalConfig(device=device, time_compile_baseline=True)


def sweep_context(config: EvalConfig, device_name: str) -> RewriteContext:
    """What the rule rewriter is told: the device and the float32 tolerance of ``config``."""
    atol, rtol = config.tolerance_for("float32")
    on_cuda = config.device != "cpu"
    return RewriteContext(
        device="cuda" if on_cuda else "cpu", device_name=device_name, atol=atol, rtol=rtol
    )


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_problem_arguments(parser)
    parser.add_argument("--store", required=True, help="SQLite store to evaluate into")
    parser.add_argument("--rows", required=True, help="JSONL file, one row per evaluation")
    parser.add_argument("--device", default="cuda", help="cuda or cpu")
    parser.add_argument("--device-name", default="", help="device the rewriter is told about")
    parser.add_argument("--claims", help="folder of claim files shared by parallel sweeps")
    parser.add_argument("--exclude", nargs="*", default=["compile_max_autotune"])
    parser.add_argument("--deadline-s", type=float, help="stop cleanly before this many seconds")
    return parser.parse_args(argv)


def _claim(claims: Path | None, problem: Problem) -> bool:
    """Whether this process takes ``problem`` (always, without a claims folder)."""
    if claims is None:
        return True
    claims.mkdir(parents=True, exist_ok=True)
    try:
        (claims / problem.content_hash).open("x").close()
    except FileExistsError:
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    log_progress()
    args = _parse_args(argv)
    try:
        loaded = load_problems(args.problems, levels=args.levels, ids=args.ids)
        rewriter = RuleRewriter(exclude=args.exclude)
    except (ProblemError, ValueError, KeyError) as exc:
        log.error("%s", exc)
        return 2
    problems = in_id_order(loaded.problems, args.ids)
    claims = Path(args.claims) if args.claims else None
    config = sweep_config(args.device)
    context = sweep_context(config, args.device_name)
    rows = Path(args.rows)
    done = {(r["problem_hash"], r["transformation"]) for r in read_jsonl(rows)}
    log.info("%d problems, %d evaluations already done", len(problems), len(done))
    deadline = args.deadline_s
    stopped = False
    with Store(args.store) as store:
        for number, problem in enumerate(problems, 1):
            if not _claim(claims, problem):
                continue
            names = rewriter.reachable(problem, context)
            names.sort(key=EVALUATION_ORDER.index)
            for name in names:
                if (problem.content_hash, name) in done:
                    continue
                elapsed = time.monotonic() - started
                if (
                    deadline is not None
                    and elapsed + RESERVE_S.get(name, DEFAULT_RESERVE_S) > deadline
                ):
                    stopped = True
                    break
                candidate = rewriter.generate(problem, name, context)
                row = {
                    "problem": problem.key,
                    "problem_hash": problem.content_hash,
                    "level": problem.level,
                    "problem_id": problem.problem_id,
                    "transformation": name,
                    "candidate_hash": candidate.content_hash,
                    "config_hash": config.config_hash,
                }
                if not candidate.usable:
                    append_jsonl(rows, row | {"failure": candidate.failure})
                    continue
                candidate.save(store, problem.content_hash)
                began = time.monotonic()
                result = evaluate(problem, candidate.source, config, store=store)
                append_jsonl(
                    rows,
                    row
                    | {
                        "wall_s": round(time.monotonic() - began, 2),
                        "correct": result.correct,
                        "speedup": result.speedup,
                        "failure_kind": result.failure_kind,
                        "result": result.to_dict(),
                    },
                )
                log.info(
                    "[%d/%d] %s %s: %s in %.1f s",
                    number,
                    len(problems),
                    problem.key,
                    name,
                    f"{result.speedup:.2f}x"
                    if result.correct and result.speedup
                    else result.failure_kind or "wrong",
                    time.monotonic() - began,
                )
            if stopped:
                log.info("stopping before the deadline after %d problems", number - 1)
                break
    log.info("done in %.0f s", time.monotonic() - started)
    return 0


if __name__ == "__main__":
    run_main(main, log)
