"""Evaluate every recorded LLM reply: one candidate per (problem, profile configuration).

The committed data set (``docs/results/data/llm_requests.jsonl.gz`` and
``llm_replies.jsonl.gz``) holds one reply per exported request. This script rebuilds each
request exactly as ``prompts export`` made it (recorded profiles replayed, one ``--recordings``
per export command, so every custom_id must come out the same, or it stops with the ones that
did not), imports the replies, lets the
LLM rewriter replay them (``recorded:MODEL``: no server), and judges each candidate on this
machine's GPU through ``evaluate_many`` (CUDA extensions built in the build lane meanwhile),
problem by problem in the order of their content hashes, all configurations of a problem
together. Then ``bench``/``learn`` replay
those verdicts anywhere with ``--evaluations``.

    python3 benchmarks/llm_sweep.py --requests docs/results/data/llm_requests.jsonl.gz \\
        --replies docs/results/data/llm_replies.jsonl.gz \\
        --recordings docs/results/data/kernelbench_h200.jsonl.gz \\
        --recordings docs/results/data/kernelbench_h200.jsonl.gz \\
            docs/results/data/kernelbench_h200_more.jsonl.gz \\
        --store $OUT/llm.sqlite --rows $OUT/llm_rows.jsonl --export $OUT/llm_evals.jsonl.gz \\
        --deadline-s 540

Resumable: ``--resume-from`` imports an earlier ``--export`` first (its verdicts are reused,
from the store, without judging again), one JSONL row per candidate is appended as it is
judged, and the export is rewritten after every problem and when the run ends or is interrupted
(SIGINT or SIGTERM), so a run cut by its slot keeps what finished; ``--deadline-s`` stops between
candidates. A candidate with a row whose verdict the store holds (a run killed before its
export left rows without one) is not judged again (its verdict, made by an earlier evaluator
version, stays in the export), except where ``--rejudge TEXT`` names its failure (the rows of a
verdict a fix changed) or, with ``--rejudge-older``, where an older evaluator version made its
verdict: the rebuild of the results pages after a new version, resumable the same way (a row
judged again has a newer row, and the last row of a request wins). ``--shard I/N`` takes every
N-th problem from the I-th (one process per GPU, each with its own store, rows and export;
merge the exports with ``benchmarks/merge_evaluations.py``). ``--dry-run`` stops before
judging: it checks that every request is rebuilt and every reply turns into a candidate (runs
on a CPU).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import time
from pathlib import Path

from _common import (
    append_jsonl,
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

from autoprofiler.evaluate import EvalConfig, export_evaluations
from autoprofiler.execute import evaluate_many
from autoprofiler.llm import LLMConfig, SamplingParams, make_client
from autoprofiler.llm.batch import BatchRequest, export_requests, import_replies
from autoprofiler.problem import Problem
from autoprofiler.profile import ProfilerError, RecordedProfiler, import_recordings
from autoprofiler.rewrite.base import Candidate, RewriteContext
from autoprofiler.rewrite.llm_rewriter import LLMRewriter, build_messages
from autoprofiler.store import Store
from autoprofiler.tree import resolve_tree

log = logging.getLogger("llm_sweep")
CONFIGS = (
    "none",
    "static",
    "SpeedOfLight",
    "SpeedOfLight+Occupancy+LaunchStats",
    "SpeedOfLight+MemoryWorkloadAnalysis",
    "full",
)
MODEL_ID = "anthropic:claude"


def sweep_config(device: str = "cuda") -> EvalConfig:
    """The evaluation settings of the sweep: the GPU, torch.compile of the reference timed
    (replays with ``--device cuda`` find these verdicts: the config hash leaves that out)."""
    return EvalConfig(device=device, time_compile_baseline=True)


def target_context(device_key: str) -> RewriteContext:
    """What the rewriter was told when the requests were exported: a CUDA target, that GPU."""
    return RewriteContext.for_target("cuda", device_key, EvalConfig(device="cuda"))


def reply_kind(source: str) -> str:
    """What a candidate is written in: a CUDA C++ extension, Triton, or neither."""
    if "load_inline" in source:
        return "load_inline"
    return "triton" if "triton" in source else "torch"


def _requested(path: Path) -> dict[str, dict]:
    """custom_id -> request line of a committed request file."""
    with gzip.open(path, "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle if line.strip()]
    return {line["custom_id"]: line for line in lines}


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=Path, required=True)
    parser.add_argument("--replies", type=Path, required=True)
    parser.add_argument(
        "--recordings",
        type=Path,
        nargs="+",
        action="append",
        required=True,
        help="recordings files the requests were exported with; once per export",
    )
    parser.add_argument("--profile-device", default="H200")
    parser.add_argument("--store", required=True, help="SQLite store to evaluate into")
    parser.add_argument("--rows", type=Path, required=True, help="JSONL, a row per candidate")
    parser.add_argument("--export", type=Path, help="evaluations export, after every problem")
    parser.add_argument("--resume-from", type=Path, nargs="*", default=[])
    parser.add_argument("--deadline-s", type=float, help="stop cleanly before this many seconds")
    parser.add_argument(
        "--rejudge",
        nargs="*",
        default=[],
        help="judge again the rows whose failure message holds one of these texts",
    )
    parser.add_argument(
        "--rejudge-older",
        action="store_true",
        help="judge again every row whose verdict an older evaluator version made",
    )
    parser.add_argument(
        "--shard",
        type=_shard,
        default=(0, 1),
        help="I/N: judge only the problems at positions I, I+N, ... of the content-hash order "
        "(one process per GPU, each with CUDA_VISIBLE_DEVICES of its own)",
    )
    parser.add_argument("--device", default="cuda", help="cuda, or cpu to try the script")
    parser.add_argument("--dry-run", action="store_true", help="build candidates, judge none")
    return parser.parse_args(argv)


def _shard(text: str) -> tuple[int, int]:
    """``I/N`` as (I, N), with 0 <= I < N."""
    index, _, count = text.partition("/")
    try:
        shard = int(index), int(count)
    except ValueError:
        raise argparse.ArgumentTypeError(f"a shard is I/N, not {text!r}") from None
    if not 0 <= shard[0] < shard[1]:
        raise argparse.ArgumentTypeError(f"a shard I/N has 0 <= I < N, not {text!r}")
    return shard


def rebuilt_requests(
    recordings: list[list[Path]], wanted: dict[str, dict], device_key: str
) -> dict[str, tuple[Problem, str, BatchRequest, object]]:
    """custom_id -> (problem, configuration, request, profile) for every wanted request,
    rebuilt from each set of recordings files in turn (as the requests were exported);
    raises ``SystemExit`` naming those that were not."""
    found: dict[str, tuple[Problem, str, BatchRequest, object]] = {}
    for paths in recordings:
        with Store(":memory:") as store:
            for path in paths:
                import_recordings(path, store)
            found.update(_rebuilt(store, wanted, device_key, set(found)))
    missing = sorted(set(wanted) - set(found))
    if missing:
        raise SystemExit(f"{len(missing)} requests not rebuilt, first: {missing[:3]}")
    return found


def _rebuilt(
    store: Store, wanted: dict[str, dict], device_key: str, known: set[str]
) -> dict[str, tuple[Problem, str, BatchRequest, object]]:
    profiler = RecordedProfiler(store, device_key)
    context = target_context(device_key)
    hashes = dict.fromkeys(h for h, d, _, _ in store.iter_profile_records() if d == device_key)
    problems = [p for h in hashes if (p := store.get_problem(h)) is not None]
    trees = {name: resolve_tree(name).validate() for name in CONFIGS}
    found: dict[str, tuple[Problem, str, BatchRequest, object]] = {}
    for problem in sorted(problems, key=lambda p: (p.level or 0, p.problem_id or 0, p.key)):
        for name, tree in trees.items():
            try:
                profile = tree.run(problem, profiler, None)
            except ProfilerError:
                continue  # a group this problem lacks: none of its requests needs it
            messages = tuple(build_messages(problem, profile, context))
            request = BatchRequest(problem.key, name, MODEL_ID, messages, SamplingParams())
            if request.custom_id in wanted and request.custom_id not in known:
                found[request.custom_id] = (problem, name, request, profile)
    return found


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    log_progress()
    args = _parse_args(argv)
    config = sweep_config(args.device)
    done = {row["custom_id"]: row for row in read_jsonl(args.rows) if "result" in row}
    with Store(args.store) as store:
        for path in dict.fromkeys(p for paths in args.recordings for p in paths):
            import_recordings(path, store)
        resume_from(args.resume_from, store, log)
        wanted = _requested(args.requests)
        found = rebuilt_requests(args.recordings, wanted, args.profile_device)
        scratch = Path(args.store).with_suffix(".requests.jsonl")
        export_requests([entry[2] for entry in found.values()], scratch, store, "anthropic")
        log.info("%d requests rebuilt; %d replies", len(found), import_replies(args.replies, store))
        client = make_client(LLMConfig.from_spec(f"recorded:{MODEL_ID}"), store)
        rewriter = LLMRewriter(client)
        context = target_context(args.profile_device)
        by_problem: dict[str, list[tuple[str, str, Candidate, Problem]]] = {}
        for custom_id, (problem, name, _, profile) in found.items():
            candidate = rewriter.rewrite(problem, profile, context)
            if candidate.usable:
                candidate.save(store, problem.content_hash)
            entry = (custom_id, name, candidate, problem)
            by_problem.setdefault(problem.content_hash, []).append(entry)
        usable = sum(e[2].usable for entries in by_problem.values() for e in entries)
        log.info("%d problems, %d candidates usable, %d judged already",
                 len(by_problem), usable, len(done))  # fmt: skip
        # By content hash: a run its slot cuts short has judged no level or kind of problem
        # first (no result is looked at to order them).
        index, count = args.shard
        groups = sorted(by_problem.items())[index::count]
        entries = [e for _, group in groups for e in group]
        _sweep(entries, done, config, store, args, started)
    log.info("done in %.0f s", time.monotonic() - started)
    return 0


def _sweep(
    entries: list[tuple[str, str, Candidate]],
    done: dict[str, dict],
    config: EvalConfig,
    store: Store,
    args: argparse.Namespace,
    started: float,
) -> None:
    """Judge every candidate without a row (and those whose row ``--rejudge`` or
    ``--rejudge-older`` names; with ``--dry-run``, count them only) in one
    ``evaluate_many``, so that the build lane compiles later problems' extensions while
    earlier ones are timed; a row per candidate, the export rewritten whenever a problem is
    finished, stopping between candidates at the deadline."""
    meta: dict[str, tuple[str, str, Candidate, Problem]] = {}
    left: dict[str, int] = {}
    stored = stored_verdicts(store)
    for custom_id, name, candidate, problem in entries:
        row = done.get(custom_id)
        kept = row is not None and verdict_stored(row, stored)
        if kept and not _rejudged(row, args.rejudge, args.rejudge_older):
            continue
        if not candidate.usable:
            if not args.dry_run:
                append_jsonl(args.rows, _row(problem, custom_id, name, candidate) | {
                    "failure": candidate.failure, "result": None})  # fmt: skip
            continue
        meta[candidate.source] = (custom_id, name, candidate, problem)
        left[problem.content_hash] = left.get(problem.content_hash, 0) + 1
    log.info("%d candidates to judge", len(meta))
    if args.dry_run:
        return
    stop_at = started + args.deadline_s if args.deadline_s is not None else None
    began = time.monotonic()
    pairs = [(problem, source) for source, (_, _, _, problem) in meta.items()]
    try:
        for evaluated in evaluate_many(pairs, config, store=store, use_cache=not args.rejudge):
            custom_id, name, candidate, problem = meta[evaluated.source]
            result = evaluated.result
            append_jsonl(args.rows, _row(problem, custom_id, name, candidate) | verdict_fields(
                result, began))  # fmt: skip
            log.info("%s %s: %s", problem.key, name, verdict_text(result))
            left[problem.content_hash] -= 1
            if not left[problem.content_hash] and args.export is not None:
                export_evaluations(store, args.export, latest_only=True)
                log.info("%s done at %.0f s", problem.key, time.monotonic() - started)
            began = time.monotonic()
            if stop_at is not None and began > stop_at:
                log.info("stopping at the deadline")
                break
    finally:  # interrupted too (a slot's end): the verdicts of an unfinished problem last
        if args.export is not None:
            export_evaluations(store, args.export, latest_only=True)


def _rejudged(row: dict, findings: list[str], older: bool = False) -> bool:
    """Whether a row's verdict is to be judged again: its failure names one of ``findings``
    (a fix changed how those are decided), or (``older``) an older evaluator made it."""
    if older and made_by_an_older_evaluator(row):
        return True
    message = (row.get("result") or {}).get("failure_message") or ""
    return any(finding in message for finding in findings)


def _row(problem: Problem, custom_id: str, name: str, candidate: Candidate) -> dict:
    return {
        "custom_id": custom_id,
        "problem": problem.key,
        "problem_hash": problem.content_hash,
        "level": problem.level,
        "problem_id": problem.problem_id,
        "configuration": name,
        "candidate_hash": candidate.content_hash,
        "kind": reply_kind(candidate.source),
    }


if __name__ == "__main__":
    run_main(main, log)
