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
JSONL row per evaluation is appended as it finishes; a row whose verdict is not in the store
(nor in an export resumed from: a run killed before its export) or was made by an older
evaluator version does not count as done, so a rerun after a new version judges it again (the
rebuild of the results pages). ``--export`` writes the store's evaluations (the newest of each)
after every problem and when the run ends or is interrupted, and ``--resume-from`` loads such
exports first: a sweep spread over device slots whose stores do not outlive them carries its
verdicts on in the export. Several processes (one per GPU) share the work through ``--claims``:
each problem is taken by the first process to create its claim file. ``--exclude`` drops
transformations (``compile_max_autotune`` by default: minutes of autotuning per problem).
Progress goes to stderr.
"""

from __future__ import annotations

import argparse
import logging
import time
from dataclasses import dataclass
from pathlib import Path

from _common import (
    add_problem_arguments,
    append_jsonl,
    in_id_order,
    log_progress,
    made_by_an_older_evaluator,
    read_jsonl,
    resume_from,
    run_main,
    stored_verdicts,
    verdict_fields,
    verdict_stored,
    verdict_text,
)

from autoprofiler.evaluate import EvalConfig, evaluate, export_evaluations
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
    parser.add_argument("--export", type=Path, help="evaluations export, after every problem")
    parser.add_argument(
        "--resume-from",
        type=Path,
        nargs="*",
        default=[],
        help="evaluations exports to load first (missing ones are skipped)",
    )
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
    with Store(args.store) as store:
        resume_from(args.resume_from, store, log)
        stored = stored_verdicts(store)
        done = {
            (r["problem_hash"], r["transformation"])
            for r in read_jsonl(rows)
            if not made_by_an_older_evaluator(r) and verdict_stored(r, stored)
        }
        log.info("%d problems, %d evaluations already done", len(problems), len(done))
        sweep = _Sweep(rewriter, context, config, store, rows, started, args.deadline_s)
        try:
            for number, problem in enumerate(problems, 1):
                if not _claim(claims, problem):
                    continue
                judged, stopped = sweep.problem(problem, done, f"[{number}/{len(problems)}]")
                if judged and args.export is not None:
                    export_evaluations(store, args.export, latest_only=True)
                if stopped:
                    log.info("stopping before the deadline after %d problems", number - 1)
                    break
        finally:  # interrupted too: what was resumed from and judged, the next slot's
            if args.export is not None:
                export_evaluations(store, args.export, latest_only=True)
    log.info("done in %.0f s", time.monotonic() - started)
    return 0


@dataclass
class _Sweep:
    """What evaluating one problem's reachable candidates needs."""

    rewriter: RuleRewriter
    context: RewriteContext
    config: EvalConfig
    store: Store
    rows: Path
    started: float
    deadline_s: float | None

    def problem(self, problem: Problem, done: set[tuple[str, str]], tag: str) -> tuple[int, bool]:
        """Evaluate every reachable transformation of ``problem`` without a current row (a row
        each); how many were evaluated, and whether the deadline stopped it."""
        names = self.rewriter.reachable(problem, self.context)
        names.sort(key=EVALUATION_ORDER.index)
        judged = 0
        for name in names:
            if (problem.content_hash, name) in done:
                continue
            elapsed = time.monotonic() - self.started
            reserve = RESERVE_S.get(name, DEFAULT_RESERVE_S)
            if self.deadline_s is not None and elapsed + reserve > self.deadline_s:
                return judged, True
            candidate = self.rewriter.generate(problem, name, self.context)
            row = {
                "problem": problem.key,
                "problem_hash": problem.content_hash,
                "level": problem.level,
                "problem_id": problem.problem_id,
                "transformation": name,
                "candidate_hash": candidate.content_hash,
                "config_hash": self.config.config_hash,
            }
            if not candidate.usable:
                append_jsonl(self.rows, row | {"failure": candidate.failure})
                continue
            candidate.save(self.store, problem.content_hash)
            began = time.monotonic()
            result = evaluate(problem, candidate.source, self.config, store=self.store)
            judged += 1
            append_jsonl(self.rows, row | verdict_fields(result, began))
            log.info("%s %s %s: %s in %.1f s", tag, problem.key, name, verdict_text(result),
                     time.monotonic() - began)  # fmt: skip
        return judged, False


if __name__ == "__main__":
    run_main(main, log)
