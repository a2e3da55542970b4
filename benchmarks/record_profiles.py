"""Record real profiles of problems with every catalogue group on this machine's GPU.

Runs from the repository root without installing the package:

    python3 benchmarks/record_profiles.py .devdata/problems.jsonl --store $OUT/store.sqlite \\
        --out $OUT --deadline-s 540

Each (problem, group) pair is profiled once and stored (resumable: a rerun on the same store, or
one started with ``--resume-from`` an earlier ``recordings.jsonl.gz``, skips what is recorded).
It stops cleanly before ``--deadline-s``, then writes into ``--out``: ``recordings.jsonl.gz``
(every recording, for committing), ``ncu_metrics_seen.json`` (``{group: metric names}``, the
input of ``benchmarks/build_catalogue.py``) and ``summary.json``. Progress goes to stderr.
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

import argparse
import json
import logging
import time

from _common import add_problem_arguments, in_id_order, log_progress

from autoprofiler.problem import ProblemError, load_problems
from autoprofiler.profile import (
    GROUPS,
    CompositeProfiler,
    NcuOptions,
    NcuProfiler,
    ProfilerError,
    StaticProfiler,
    TorchProfiler,
    device_key,
    export_recordings,
    get_group,
    import_recordings,
    record_profiles,
)
from autoprofiler.profile.recording import metric_names_by_group, recorded_failures
from autoprofiler.store import Store

log = logging.getLogger("record_profiles")
EXPORT_RESERVE_S = 20.0


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_problem_arguments(parser)
    parser.add_argument("--limit", type=int, help="record only the first N problems")
    parser.add_argument("--store", required=True, help="SQLite store to record into")
    parser.add_argument("--out", help="folder for the exports (default: the store's folder)")
    parser.add_argument("--resume-from", help="recordings.jsonl.gz to import before recording")
    parser.add_argument("--groups", nargs="*", help="groups to record (default: all)")
    parser.add_argument("--device", help="device name to record under (default: this GPU)")
    parser.add_argument("--chunk-size", type=int, default=4, help="problems per ncu process")
    parser.add_argument("--deadline-s", type=float, help="stop cleanly before this many seconds")
    parser.add_argument("--timeout-s", type=float, default=300.0, help="ncu limit per problem")
    parser.add_argument("--ncu", default="ncu", help="the ncu executable")
    parser.add_argument("--retry-failed", action="store_true", help="retry recorded failures")
    parser.add_argument(
        "--launches-per-config",
        type=int,
        default=0,
        help="ncu samples the first N launches of each launch configuration (0: all launches)",
    )
    args = parser.parse_args(argv)
    if args.launches_per_config < 0:
        parser.error("--launches-per-config must be 0 (all launches) or more")
    return args


def _device(requested: str | None) -> str:
    if requested:
        return requested
    import torch

    if not torch.cuda.is_available():
        raise ProfilerError("no CUDA GPU here: pass --device to record CPU-only groups under")
    return device_key(torch.cuda.get_device_name())


def _export(store: Store, out: Path, device: str, summary: dict) -> None:
    out.mkdir(parents=True, exist_ok=True)
    count = export_recordings(store, out / "recordings.jsonl.gz")
    seen = metric_names_by_group(store, device)
    (out / "ncu_metrics_seen.json").write_text(json.dumps(seen, indent=0) + "\n")
    failures = recorded_failures(store, device)
    summary |= {"records": count, "failures": failures}
    (out / "summary.json").write_text(json.dumps(summary, indent=1) + "\n")
    log.info("exported %d records, %d failures to %s", count, len(failures), out)


def main(argv: list[str] | None = None) -> int:
    started = time.monotonic()
    log_progress()
    args = _parse_args(argv)
    try:
        loaded = load_problems(args.problems, levels=args.levels, ids=args.ids)
        ordered = in_id_order(loaded.problems, args.ids)
        problems = ordered[: args.limit] if args.limit else ordered
        groups = [get_group(g) for g in args.groups] if args.groups else list(GROUPS.values())
        device = _device(args.device)
    except (ProblemError, ProfilerError, ValueError) as exc:
        log.error("%s", exc)
        return 2
    log.info(
        "%d problems (%d rejected), %d groups, device %s",
        len(problems),
        len(loaded.errors),
        len(groups),
        device,
    )
    store = Store(args.store)
    if args.resume_from:
        log.info(
            "imported %d records from %s",
            import_recordings(args.resume_from, store),
            args.resume_from,
        )
    options = NcuOptions(
        ncu=args.ncu,
        timeout_s=args.timeout_s,
        python=sys.executable,
        launches_per_config=args.launches_per_config,
    )
    profiler = CompositeProfiler(
        {
            "static": StaticProfiler(device),
            "torch": TorchProfiler(),
            "ncu": NcuProfiler(options, device=device),
        }
    )
    deadline = None if args.deadline_s is None else args.deadline_s - EXPORT_RESERVE_S
    summary: dict = {
        "device": device,
        "problems": len(problems),
        "groups": [g.name for g in groups],
    }
    status = 0
    try:
        report = record_profiles(
            problems,
            [g.name for g in groups],
            store,
            device,
            profiler,
            chunk_size=args.chunk_size,
            deadline_s=deadline,
            retry_failed=args.retry_failed,
            groups=groups,
        )
        summary |= {
            "recorded": report.recorded,
            "skipped": report.skipped,
            "failed": report.failed,
            "stopped_early": report.stopped_early,
        }
        log.info(
            "recorded %d, skipped %d, failed %d%s in %.0f s",
            report.recorded,
            report.skipped,
            report.failed,
            " (stopped at the deadline)" if report.stopped_early else "",
            report.seconds,
        )
    except ProfilerError as exc:
        log.error("%s", exc)
        summary["error"] = str(exc)
        status = 2
    except KeyboardInterrupt:
        log.error("interrupted: exporting what is recorded")
        status = 130
    summary["seconds"] = round(time.monotonic() - started, 1)
    _export(store, Path(args.out) if args.out else Path(args.store).parent, device, summary)
    store.close()
    return status


if __name__ == "__main__":
    sys.exit(main())
