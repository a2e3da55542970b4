"""Scaling: evaluation (and ncu recording) throughput with the LocalExecutor on 1 vs 2 GPUs.

One command runs the phases in turn: evaluate the problems with 1 worker, then with 2 workers
(each pinned to its own GPU), and with ``--record`` the same for recording profiles. Each
candidate is the reference itself (``reference_as_candidate``), evaluated with the cache off.
The first phase of a kind runs within a time box cut from ``--deadline-s``; the problems it
finished are the ones every later phase of that kind runs, so the speedup compares the same
work. Rows go to ``--out``/rows.jsonl as they finish (one per evaluation, one per phase), so a
device slot that ends never loses what was measured; a rerun skips the phases already complete.

    python benchmarks/scaling.py --problems .devdata/problems.jsonl --levels 1 2 --limit 40 \\
        --record --groups ncu.SpeedOfLight --out $OUT/scaling --deadline-s 540
    python benchmarks/scaling.py --report $OUT/scaling/rows.jsonl \\
        --markdown docs/results/scaling.md --command "..."
"""

from __future__ import annotations

import argparse
import os
import platform
import sys
import time
import uuid
from pathlib import Path

from _common import add_report_arguments, append_jsonl, read_jsonl

from autoprofiler.evaluate import EvalConfig
from autoprofiler.evaluate.baselines import reference_as_candidate
from autoprofiler.execute import LocalExecutor, evaluate_many, record_many
from autoprofiler.problem import Problem, load_problems
from autoprofiler.store import Store

RESERVE_S = 25.0  # kept back from the deadline: closing workers, writing rows
TARGET_SPEEDUP = 1.8
SLACK = 1.3  # the first phase's time box leaves later ones 1.3x their ideal time
MIN_PHASE_S = 10.0


def machine() -> dict:
    import torch

    gpus = [torch.cuda.get_device_name(i) for i in range(torch.cuda.device_count())]
    return {
        "host": platform.node(),
        "gpus": gpus,
        "cpus": os.cpu_count(),
        "torch": torch.__version__,
        "python": sys.version.split()[0],
    }


def started_executor(workers: int) -> LocalExecutor:
    """A pool of ``workers`` (pinned to GPUs where there are), every worker started."""
    executor = LocalExecutor(workers)
    executor.start()
    return executor


class Bench:
    """The phases of one scaling run and the rows they write."""

    def __init__(self, args: argparse.Namespace, problems: list[Problem]) -> None:
        self.args = args
        self.problems = problems
        self.rows_path = args.out / "rows.jsonl"
        self.began = time.monotonic()
        self.deadline = self.began + args.deadline_s - RESERVE_S
        self.machine = machine()
        self.config = EvalConfig(device=args.device)

    def completed(self) -> dict[tuple[str, int], dict]:
        rows = read_jsonl(self.rows_path)
        first = self.args.workers[0]
        return {
            (r["kind"], r["workers"]): r
            for r in rows
            if r["row"] == "phase" and (r["workers"] == first or not r["cut_off"])
        }

    def time_box(self, kind_s: float) -> float:
        """Seconds for the first phase of a kind given ``kind_s`` for all of its phases: its
        share by 1/workers, less a margin for later phases slower than ideal scaling."""
        weights = [1 / w for w in self.args.workers]
        return kind_s * weights[0] / sum(weights) / SLACK

    def phase_row(self, kind: str, workers: int, run: str, **fields) -> dict:
        row = {"row": "phase", "kind": kind, "workers": workers, "run": run, **fields}
        row |= {"device": self.config.device, "machine": self.machine}
        append_jsonl(self.rows_path, row)
        return row

    def evaluate(self, workers: int, problems: list[Problem], stop: float) -> dict:
        run = uuid.uuid4().hex[:8]
        pairs = [(p, reference_as_candidate(p)) for p in problems]
        finished: list[str] = []
        correct = 0
        with started_executor(workers) as executor:
            t0 = time.monotonic()
            last = t0
            for done in evaluate_many(pairs, self.config, executor=executor, use_cache=False):
                last = time.monotonic()
                finished.append(done.problem.key)
                correct += done.result.correct
                append_jsonl(
                    self.rows_path,
                    {
                        "row": "job",
                        "kind": "evaluate",
                        "workers": workers,
                        "run": run,
                        "problem": done.problem.key,
                        "correct": done.result.correct,
                        "failure": done.result.failure_message[:200],
                        "at_s": round(last - t0, 3),
                        "job_wall_s": round(done.result.wall_s, 3),
                    },
                )
                print(f"evaluate w={workers}: {done.problem.key} at {last - t0:.1f} s", flush=True)
                if time.monotonic() > stop and len(finished) < len(pairs):
                    break  # out of time: the jobs in flight are stopped
        order = {p.key: i for i, p in enumerate(problems)}
        return self.phase_row(
            "evaluate",
            workers,
            run,
            cut_off=len(finished) < len(pairs),
            problems=sorted(finished, key=order.__getitem__),
            jobs=len(finished),
            correct=correct,
            wall_s=round(last - t0, 3),
        )

    def record(self, workers: int, problems: list[Problem], stop: float) -> dict:
        from autoprofiler.profile import device_key

        run = uuid.uuid4().hex[:8]
        gpus = self.machine["gpus"]
        device = device_key(gpus[0]) if gpus else "cpu"
        path = self.args.out / f"record-w{workers}.sqlite"
        for stale in path.parent.glob(path.name + "*"):
            stale.unlink()
        with started_executor(workers) as executor, Store(path) as store:
            t0 = time.monotonic()
            report = record_many(
                executor,
                store,
                problems,
                self.args.groups,
                device,
                chunk_size=self.args.chunk_size,
                stop_at=time.time() + (stop - time.monotonic()),
            )
            wall = time.monotonic() - t0
            groups = len(self.args.groups)
            whole = {
                p.key for p in problems if len(store.get_profile_records(p.content_hash)) == groups
            }
        print(f"record w={workers}: {report.recorded} records in {wall:.1f} s", flush=True)
        return self.phase_row(
            "record",
            workers,
            run,
            cut_off=report.stopped_early,
            problems=[p.key for p in problems if p.key in whole],
            jobs=report.recorded,
            failed=report.failed,
            groups=self.args.groups,
            wall_s=round(wall, 3),
        )

    def run(self) -> None:
        kinds = ["evaluate"] + (["record"] if self.args.record else [])
        measure = {"evaluate": self.evaluate, "record": self.record}
        for index, kind in enumerate(kinds):
            kind_end = time.monotonic() + (self.deadline - time.monotonic()) / (len(kinds) - index)
            chosen = self.problems
            for position, workers in enumerate(self.args.workers):
                done = self.completed().get((kind, workers))
                if done is not None:
                    print(f"{kind} w={workers}: already measured", flush=True)
                else:
                    first = time.monotonic() + self.time_box(kind_end - time.monotonic())
                    stop = first if position == 0 else kind_end
                    if stop - time.monotonic() < MIN_PHASE_S:
                        print(f"{kind} w={workers}: no time left", flush=True)
                        continue
                    done = measure[kind](workers, chosen, stop)
                if position == 0:
                    chosen = self.same_problems(done)

    def same_problems(self, row: dict) -> list[Problem]:
        keys = set(row["problems"])
        return [p for p in self.problems if p.key in keys]


def latest_phases(rows: list[dict]) -> list[dict]:
    """The last phase row of each (kind, workers), and for a phase cut off before its row,
    one made from its evaluation rows (marked incomplete)."""
    phases: dict[tuple[str, int], dict] = {}
    summarized = {r["run"] for r in rows if r["row"] == "phase"}
    for row in rows:
        if row["row"] == "phase":
            phases[(row["kind"], row["workers"])] = row
    for row in rows:
        if row["row"] != "job" or row["run"] in summarized:
            continue
        phase = phases.setdefault(
            (row["kind"], row["workers"]),
            {**row, "row": "phase", "cut_off": True, "problems": [], "jobs": 0, "correct": 0},
        )
        if phase.get("run") == row["run"]:
            phase["problems"].append(row["problem"])
            phase["jobs"] += 1
            phase["correct"] += row["correct"]
            phase["wall_s"] = row["at_s"]
    return sorted(phases.values(), key=lambda r: (r["kind"] != "evaluate", r["workers"]))


def _machine_line(phases: list[dict]) -> str:
    info = next((p["machine"] for p in phases if "machine" in p), None)
    if info is None:
        return "Machine: unknown."
    gpus = info["gpus"]
    if gpus:
        names = sorted(set(gpus))
        what = ", ".join(f"{gpus.count(n)} x {n}" for n in names)
    else:
        what = "no GPU (CPU workers)"
    return (
        f"Machine: {info['host']}, {what}, {info['cpus']} CPU cores, torch {info['torch']}, "
        f"python {info['python']}."
    )


def write_report(rows_path: Path, markdown: Path, command: str) -> None:
    phases = latest_phases(read_jsonl(rows_path))
    lines = [
        "# Scaling: evaluation and recording on 1 vs 2 GPUs (LocalExecutor)",
        "",
        _machine_line(phases),
        f"Command: `{command}`",
        "",
        "Each phase starts a LocalExecutor with that many workers, one per GPU",
        "(`CUDA_VISIBLE_DEVICES`), warms them up, then times the jobs: evaluating each problem's",
        "reference as its candidate (evaluation cache off) or recording the named groups of",
        "each problem (chunks of problems per job). The 1-worker phase ran within a time box; the",
        "problems it finished are the ones the later phases ran, so *speedup* (1-worker wall",
        "seconds over this phase's) compares the same work.",
        "",
        "| kind | workers | problems | jobs | correct / failed | wall s | jobs/s | speedup |",
        "|---|---|---|---|---|---|---|---|",
    ]
    base = {p["kind"]: p for p in phases if p["workers"] == 1}
    speedups = {}
    for phase in phases:
        wall = phase.get("wall_s") or 0.0
        rate = phase["jobs"] / wall if wall else 0.0
        first = base.get(phase["kind"])
        speedup = "-"
        same = first is not None and set(phase["problems"]) == set(first["problems"])
        if first is not None and phase is not first and wall and same:
            speedups[(phase["kind"], phase["workers"])] = first["wall_s"] / wall
            speedup = f"{first['wall_s'] / wall:.2f}x"
        elif first is not None and phase is not first:
            speedup = "partial"
        outcome = (
            f"{phase.get('correct', 0)} correct"
            if phase["kind"] == "evaluate"
            else f"{phase.get('failed', 0)} failed"
        )
        cut = " (cut off)" if phase["cut_off"] else ""
        lines.append(
            f"| {phase['kind']} | {phase['workers']} | {len(phase['problems'])}{cut} | "
            f"{phase['jobs']} | {outcome} | {wall:.1f} | {rate:.3f} | {speedup} |"
        )
    lines += ["", "## Summary", ""]
    gpus = len(next((p["machine"]["gpus"] for p in phases if "machine" in p), []))
    for (kind, workers), value in sorted(speedups.items()):
        if gpus < workers:
            verdict = "CPU workers: a check of the plumbing, not the GPU figure"
        else:
            verdict = "meets" if value >= TARGET_SPEEDUP else "misses"
            verdict += f" the {TARGET_SPEEDUP}x target for 2 GPUs"
        lines.append(
            f"- {kind} with {workers} workers: {value:.2f}x the 1-worker throughput ({verdict})"
        )
    if not speedups:
        lines.append("- no speedup measured (a phase is missing or did not finish its problems)")
    lines.append("")
    markdown.parent.mkdir(parents=True, exist_ok=True)
    markdown.write_text("\n".join(lines), encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, help="file, folder, KernelBench or JSONL")
    parser.add_argument("--levels", type=int, nargs="*", help="KernelBench levels to keep")
    parser.add_argument("--ids", type=int, nargs="*", help="KernelBench problem ids to keep")
    parser.add_argument("--limit", type=int, help="only the first N problems")
    parser.add_argument("--workers", type=int, nargs="+", default=[1, 2], help="worker counts")
    parser.add_argument("--device", default="auto", help="evaluate on auto, cuda or cpu")
    parser.add_argument("--record", action="store_true", help="also time recording profiles")
    parser.add_argument("--groups", nargs="+", default=["ncu.SpeedOfLight"], help="to record")
    parser.add_argument("--chunk-size", type=int, default=2, help="problems per record job")
    parser.add_argument("--out", type=Path, default=Path("scaling"), help="rows and stores")
    parser.add_argument("--deadline-s", type=float, default=540.0, help="end cleanly before")
    add_report_arguments(parser, "docs/results/scaling.md")
    args = parser.parse_args()
    if args.report:
        write_report(args.report, args.markdown, args.command)
        return
    if args.problems is None:
        parser.error("--problems is needed to measure (or --report to write the table)")
    args.workers = sorted(set(args.workers))
    loaded = load_problems(args.problems, args.levels, args.ids)
    problems = loaded.problems[: args.limit] if args.limit else loaded.problems
    args.out.mkdir(parents=True, exist_ok=True)
    print(
        f"scaling on {platform.node()}: {len(problems)} problems ({len(loaded.errors)} rejected),"
        f" workers {args.workers}, deadline {args.deadline_s:.0f} s",
        flush=True,
    )
    Bench(args, problems).run()
    print(f"rows in {args.out / 'rows.jsonl'}", flush=True)


if __name__ == "__main__":
    main()
