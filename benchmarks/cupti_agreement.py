"""CUPTI against ncu on KernelBench problems: do their values agree, and what does a step cost.

On the GPU (``collect``, resumable, rows appended as they fall):

    python benchmarks/cupti_agreement.py collect KernelBench/problems.jsonl \\
        --recordings docs/results/data/kernelbench_h200.jsonl.gz --rows runs/costs/rows.jsonl

- problems: ``--count`` of those with H200 recordings of every group compared, evenly spaced
  in key order (chosen before anything is measured);
- ``cupti`` per problem, one CUPTI worker: ``examples/trees/expert.json`` run by ``run_tree``
  (its cost, start-up included), then, on the same worker, the groups of SpeedOfLight,
  Occupancy + LaunchStats and MemoryWorkloadAnalysis the tree did not collect, one step each
  (each step's wall time, replay seconds and passes, and the profile). One ``CuptiProfiler``
  serves every problem, as in a run of ``autoprofiler``: the first pays for the worker's
  imports, the others load into the standby started meanwhile. Once per ``--replay``
  (``kernel`` or ``user``, ``MODE:N`` for the first N problems only), in the order given;
- ``budget``: the expert tree again on ``--budget-problems`` of them (or those named by
  ``--budget-keys``) under each of ``--budgets`` (seconds), with ``--budget-replay``: what it
  spent, what it cut or skipped;
- ``ncu``: one ncu run over all of them with SpeedOfLight, Occupancy and LaunchStats (its
  start-up, each problem's in-range seconds and profile), then ncu alone for ``--steps`` of
  them with SpeedOfLight (a tree step of ncu, start-up included);
- ``full``: ``ncu --set full`` for ``--full`` of them, one run each (start-up included).

On any machine (``table``): the agreement per metric (median relative difference of the
problem aggregates, CUPTI against the live ncu run for SpeedOfLight, Occupancy and LaunchStats,
against the H200 recordings for MemoryWorkloadAnalysis) and the costs, into
``docs/results/profiling_costs.md``; ``--export-recordings`` writes the CUPTI profiles as
recordings:

    python benchmarks/cupti_agreement.py table \\
        --recordings docs/results/data/kernelbench_h200.jsonl.gz \\
        --rows docs/results/data/cupti_agreement_rows.jsonl.gz
"""

from __future__ import annotations

import argparse
import logging
import math
import re
import statistics
import tempfile
import time
from pathlib import Path

from _common import ROOT, append_jsonl, log_progress, read_jsonl, replace_block, run_main

from autoprofiler.problem import Problem, load_problems
from autoprofiler.profile import RecordedProfiler, export_recordings, import_recordings
from autoprofiler.profile.base import BatchResult, Profile, ProfilerError
from autoprofiler.profile.catalogue import get_group
from autoprofiler.profile.composite import CompositeProfiler
from autoprofiler.profile.cupti import COLD_TOOL, TOOL, CuptiOptions, CuptiProfiler
from autoprofiler.profile.cupti_api import REPLAY_MODES
from autoprofiler.profile.ncu import NcuProfiler
from autoprofiler.profile.recording import add_startup
from autoprofiler.profile.static import StaticProfiler
from autoprofiler.store import Store
from autoprofiler.tree import load_tree, run_tree
from autoprofiler.tree.run import STOP_GRACE_S

log = logging.getLogger("cupti_agreement")
COMPARED = ("ncu.SpeedOfLight", "ncu.Occupancy", "ncu.LaunchStats", "ncu.MemoryWorkloadAnalysis")
LIVE = COMPARED[:3]
STEPS = (
    ("ncu.SpeedOfLight",),
    ("ncu.Occupancy", "ncu.LaunchStats"),
    ("ncu.MemoryWorkloadAnalysis",),
)
EXPERT = ROOT / "examples" / "trees" / "expert.json"
KEY_MWA = (
    "dram__bytes_read.sum",
    "dram__bytes_write.sum",
    "lts__t_sector_hit_rate.pct",
    "l1tex__t_sector_hit_rate.pct",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "lts__throughput.avg.pct_of_peak_sustained_elapsed",
    "l1tex__throughput.avg.pct_of_peak_sustained_active",
)
WORKER_FIELDS = ("build_s", "setup_s", "launches_s", "launch_records", "launched", "standby")
KEY_LAUNCH = (
    "launch__grid_size",
    "launch__block_size",
    "launch__registers_per_thread",
    "launch__shared_mem_per_block",
)


class _HeldWorker(CuptiProfiler):
    """A CUPTI profiler whose worker outlives ``run_tree`` (the study collects more on it)."""

    def release(self) -> None:
        pass

    def really_release(self) -> None:
        super().release()


def _recorded(paths: list[Path], store: Store) -> RecordedProfiler:
    for path in paths:
        import_recordings(path, store)
    return RecordedProfiler(store, "H200")


def select(problems: list[Problem], recorded: RecordedProfiler, count: int) -> list[Problem]:
    """``count`` problems with every compared group and ``ncu.set.full`` recorded, evenly
    spaced in key order."""
    wanted = {*COMPARED, "ncu.set.full"}
    have = sorted(
        (p for p in problems if wanted <= set(recorded.records(p.content_hash))),
        key=lambda p: p.key,
    )
    if len(have) <= count:
        return have
    step = len(have) / count
    return [have[int(i * step)] for i in range(count)]


def _done(rows: list[dict], phase: str) -> set[str]:
    return {r["problem"] for r in rows if r["phase"] == phase}


def replay_of(row: dict) -> str:
    """The CUPTI replay a row was collected with (rows from before the choice: kernel)."""
    return str(row.get("replay", "kernel"))


def replay_plan(specs: list[str], count: int) -> list[tuple[str, int]]:
    """``--replay`` as (mode, problems): ``user`` is every problem, ``kernel:8`` the first 8."""
    plan = []
    for spec in specs:
        mode, colon, limit = spec.partition(":")
        if mode not in REPLAY_MODES or (colon and not limit.isdigit()):
            raise SystemExit(f"--replay {spec!r}: expected kernel or user, optionally :N")
        plan.append((mode, int(limit) if limit else count))
    return plan


def _cupti_phase(args: argparse.Namespace, problems: list[Problem], rows: list[dict],
                 cupti: _HeldWorker, until: float) -> None:  # fmt: skip
    replay = cupti.options.replay
    done = {r["problem"] for r in rows if r["phase"] == "cupti" and replay_of(r) == replay}
    for problem in problems:
        if problem.key in done:
            continue
        if time.monotonic() > until:
            log.info("CUPTI's share of the deadline is spent: stopping before %s", problem.key)
            return
        try:
            row = {"phase": "cupti", "problem": problem.key, "replay": replay,
                   **collect_cupti(problem, cupti, args.quick)}  # fmt: skip
        except Exception as exc:  # a problem's failure is a row; the study goes on
            cupti.really_release()
            error = f"{type(exc).__name__}: {exc}"
            row = {"phase": "cupti", "problem": problem.key, "replay": replay, "error": error}
        append_jsonl(args.rows, row)
        tree = row.get("tree") or {}
        outcome = row.get("error") or f"tree {tree.get('cost_s')} s"
        log.info("%s: cupti (%s replay) %s", problem.key, replay, outcome)


def _budget_phase(args: argparse.Namespace, problems: list[Problem], cupti: _HeldWorker,
                  deadline: float) -> None:  # fmt: skip
    """The expert tree under each budget: it must spend at most the budget plus the grace."""
    profiler = CompositeProfiler({"static": StaticProfiler("H200"), "ncu": cupti})
    rows = read_jsonl(args.rows) if problems else []
    done = {(r["problem"], r["budget_s"]) for r in rows if r["phase"] == "budget"}
    for problem in problems:
        for budget in args.budgets:
            if (problem.key, budget) in done or time.monotonic() > deadline:
                continue
            start = time.perf_counter()
            try:
                tree = run_tree(load_tree(EXPERT), problem, profiler, budget_s=budget)
                saved = tree.to_dict()
                row = {"cost_s": tree.cost_s, "groups": tree.groups, "cut": tree.cut,
                       "skipped": saved.get("skipped", []), "path": tree.path}  # fmt: skip
            except Exception as exc:
                row = {"error": f"{type(exc).__name__}: {exc}"}
            finally:
                cupti.really_release()
            row |= {"phase": "budget", "problem": problem.key, "budget_s": budget,
                    "replay": cupti.options.replay,
                    "wall_s": time.perf_counter() - start}  # fmt: skip
            append_jsonl(args.rows, row)
            log.info("budget %s %.1f s: %s", problem.key, budget, row)


def collect_cupti(problem: Problem, cupti: _HeldWorker, quick: bool) -> dict:
    """The expert tree through CUPTI, then the compared groups it left, on the same worker;
    ``quick``: no tree, and of the compared groups only SpeedOfLight, Occupancy, LaunchStats."""
    profiler = CompositeProfiler({"static": StaticProfiler("H200"), "ncu": cupti})
    start = time.perf_counter()
    tree = Profile(problem_hash=problem.content_hash)
    if not quick:
        tree = run_tree(load_tree(EXPERT), problem, profiler)
    tree_wall = time.perf_counter() - start
    steps, profile = [], tree
    for groups in STEPS[:2] if quick else STEPS:
        todo = [get_group(g) for g in groups if g not in tree.groups]
        if not todo:
            continue
        step = cupti.collect(problem, todo)
        steps.append(_step(groups, step))
        profile = profile.merge(step)
    cupti.really_release()
    worker = {k: cupti.last_ready.get(k) for k in WORKER_FIELDS}
    return {
        "worker": worker,
        "quick": quick,
        "tree": None if quick else {"cost_s": tree.cost_s, "wall_s": tree_wall, "path": tree.path,
                 "startup_s": tree.startup_s, "costs": _costs(tree), "cut": tree.cut},
        "steps": steps,
        "refused": cupti.refused,
        "profile": profile.to_dict(),
    }  # fmt: skip


def _costs(profile: Profile) -> dict:
    return {g: [c.seconds, c.replay_passes, c.tool] for g, c in profile.group_costs.items()}


def _step(groups: tuple[str, ...], profile: Profile) -> dict:
    replay = sum(c.seconds for c in profile.group_costs.values())
    return {
        "groups": list(groups),
        "wall_s": profile.cost_s,
        "replay_s": replay,
        "passes": profile.replay_passes,
        "overhead_s": profile.cost_s - profile.startup_s - replay,
        "tools": sorted({c.tool for c in profile.group_costs.values()}),
        "notes": profile.notes,
    }


def collect(args: argparse.Namespace) -> int:
    deadline = time.monotonic() + args.deadline_s
    with Store(args.rows.with_suffix(".sqlite")) as store:
        recorded = _recorded(args.recordings, store)
        problems = select(load_problems(args.problems).problems, recorded, args.count)
    log.info("%d problems: %s", len(problems), ", ".join(p.key for p in problems))
    rows = read_jsonl(args.rows)
    ncu = NcuProfiler()
    transcript = args.rows.with_name("answers.jsonl")
    until = time.monotonic() + args.deadline_s * args.cupti_share
    profilers: dict[str, _HeldWorker] = {}  # by replay: the budget phase takes its warm one

    def profiler(replay: str) -> _HeldWorker:
        if replay not in profilers:
            options = CuptiOptions(transcript=transcript, replay=replay)
            profilers[replay] = _HeldWorker(fallback=ncu, options=options)
        return profilers[replay]

    try:
        for replay, count in replay_plan(args.replay, len(problems)):
            _cupti_phase(args, problems[:count], rows, profiler(replay), until)
        keys = args.budget_keys or [p.key for p in problems[: args.budget_problems]]
        chosen = [p for p in problems if p.key in keys]
        _budget_phase(args, chosen, profiler(args.budget_replay), deadline)
    finally:
        for cupti in profilers.values():
            cupti.close()
    todo = [p for p in problems if p.key not in _done(rows, "ncu")]
    if todo and time.monotonic() < deadline:
        try:
            batch = ncu.collect_many(todo, [get_group(g) for g in LIVE])
        except ProfilerError as exc:
            batch = BatchResult(failures={p.content_hash: str(exc) for p in todo})
        for problem in todo:
            profile = batch.profiles.get(problem.content_hash)
            append_jsonl(args.rows, {
                "phase": "ncu", "problem": problem.key, "startup_s": batch.startup_s,
                "wall_s": batch.wall_s, "profile": None if profile is None else profile.to_dict(),
                "error": batch.failures.get(problem.content_hash),
            })  # fmt: skip
        log.info(
            "ncu: %d problems in %.1f s, start-up %.1f s", len(todo), batch.wall_s, batch.startup_s
        )
    for phase, chosen, groups in (
        ("ncu_step", problems[: args.steps], ["ncu.SpeedOfLight"]),
        ("full", problems[: args.full], ["ncu.set.full"]),
    ):
        for problem in chosen:
            if problem.key in _done(read_jsonl(args.rows), phase) or time.monotonic() > deadline:
                continue
            start = time.perf_counter()
            try:
                profile = ncu.collect(problem, [get_group(g) for g in groups])
                row = {"cost_s": profile.cost_s, "startup_s": profile.startup_s,
                       "replay_s": profile.cost_s - profile.startup_s}  # fmt: skip
            except Exception as exc:
                row = {"error": f"{type(exc).__name__}: {exc}"}
            row |= {"phase": phase, "problem": problem.key, "wall_s": time.perf_counter() - start}
            append_jsonl(args.rows, row)
            log.info("%s %s: %s", phase, problem.key, row)
    return 0


# --- tables ---------------------------------------------------------------------------------

_PREFIX = {"": 1.0, "K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "m": 1e-3, "u": 1e-6, "n": 1e-9}
_UNIT = re.compile(r"([KMGTmun]?)(byte|bytes|second|seconds|s|cycle|hz|Hz)")


def base_value(value: float, unit: str) -> float:
    """``value`` in base units: ``Kbyte``, ``Gbyte/s``, ``usecond``, ``ms``, ``nsecond``..."""
    scale = 1.0
    for i, part in enumerate(unit.replace("nanosecond", "nsecond").split("/")):
        match = _UNIT.fullmatch(part)
        if not match:
            continue
        factor = _PREFIX[match.group(1)]
        scale = scale * factor if i == 0 else scale / factor
    return value * scale


def _value(profile: dict, metric: str) -> float | None:
    entry = profile.get("metrics", {}).get(metric)
    if not entry or not isinstance(entry.get("value"), (int, float)):
        return None
    value = float(entry["value"])
    return None if math.isnan(value) else base_value(value, entry.get("unit", ""))


def relative_difference(a: float, b: float) -> float:
    """|a - b| over |b|; 0 when both are 0, inf when only b is."""
    if a == b:
        return 0.0
    return abs(a - b) / abs(b) if b else math.inf


def agreement(cupti: dict[str, dict], ncu: dict[str, dict], metrics: list[str]) -> list[tuple]:
    """Per metric: problems compared and the median relative difference of CUPTI to ncu."""
    out = []
    for metric in metrics:
        pairs = [(_value(cupti[k], metric), _value(ncu[k], metric)) for k in cupti if k in ncu]
        diffs = [relative_difference(a, b) for a, b in pairs if a is not None and b is not None]
        if diffs:
            out.append((metric, len(diffs), statistics.median(diffs)))
    return out


def _agreement_table(rows: list[tuple], title: str) -> list[str]:
    lines = [f"| {title} | problems | median relative difference |", "|---|---|---|"]
    lines += [f"| `{m}` | {n} | {d * 100:.2f} % |" for m, n, d in rows]
    return lines


def table(args: argparse.Namespace) -> int:
    rows = read_jsonl(args.rows)
    earlier = [row for path in args.earlier_rows for row in read_jsonl(path)]
    live = {r["problem"]: r["profile"] for r in earlier + rows if _has(r, "ncu")}
    replays = list(dict.fromkeys(replay_of(r) for r in rows if _has(r, "cupti")))
    by_replay = {
        replay: {
            r["problem"]: r["profile"]
            for r in earlier + rows
            if _has(r, "cupti") and replay_of(r) == replay
        }
        for replay in replays
    }
    keys = {key for cupti in by_replay.values() for key in cupti}
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "rec.sqlite") as store:
        recorded = _recorded(args.recordings, store)
        found = (store.get_problem(h) for h in {r[0] for r in store.iter_profile_records()})
        problems = {p.key: p for p in found if p is not None and p.key in keys}
        mwa = {
            key: recorded.records(p.content_hash)["ncu.MemoryWorkloadAnalysis"].to_dict()
            for key, p in problems.items()
        }
    lines = []
    for replay, cupti in by_replay.items():
        mine = [r for r in rows if r["phase"] != "cupti" or replay_of(r) == replay]
        lines += [f"#### CUPTI with {replay} replay", ""]
        lines += _agreement_lines(cupti, live, mwa)
        lines += ["", *_costs_table(mine), ""]
    lines += _budget_table(rows)
    replace_block(args.markdown, "profiling_costs", "\n".join(lines).rstrip())
    if args.export_recordings:
        chosen = [r for r in rows if replay_of(r) == args.export_replay]
        count = export_cupti_recordings(chosen, problems, args.export_recordings)
        log.info("%d CUPTI records written to %s", count, args.export_recordings)
    return 0


def _agreement_lines(cupti: dict[str, dict], live: dict[str, dict], mwa: dict[str, dict]) -> list:
    """CUPTI's profiles against the live ncu run (SpeedOfLight, Occupancy, LaunchStats) and
    against the recorded ncu profiles (MemoryWorkloadAnalysis)."""
    shared = [m for m in next(iter(live.values()), {}).get("metrics", {}) if m in
              next(iter(cupti.values()), {}).get("metrics", {})]  # fmt: skip
    pct = [m for m in shared if "pct" in m]
    others = [m for m in shared if "pct" not in m]
    both = len(set(cupti) & set(live))
    lines = [f"Problems: {len(cupti)} (CUPTI), {len(live)} (live ncu), {both} in both", ""]
    lines += _summary(agreement(cupti, live, pct), "throughput percentages")
    lines += _summary(agreement(cupti, live, others), "other metrics")
    lines += ["", *_by_group(cupti, live, shared)]
    lines += ["", *_agreement_table(agreement(cupti, live, [*KEY_LAUNCH,
              "sm__throughput.avg.pct_of_peak_sustained_elapsed",
              "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
              "sm__warps_active.avg.pct_of_peak_sustained_active", "gpu__time_duration.sum"]),
              "metric (live ncu)")]  # fmt: skip
    mine = {k: v for k, v in mwa.items() if k in cupti}
    return [*lines, "", *_agreement_table(agreement(cupti, mine, list(KEY_MWA)),
                                         "metric (recorded ncu)")]  # fmt: skip


def _startup_tool(row: dict, first: bool) -> str:
    """``cupti`` for a worker loaded from a standby, ``cupti_cold`` for one started with nothing
    imported (rows from before the ``standby`` flag: the file's first tree is the cold one)."""
    standby = (row.get("worker") or {}).get("standby")
    cold = first if standby is None else not standby
    return COLD_TOOL if cold else TOOL


def _has(row: dict, phase: str) -> bool:
    return row["phase"] == phase and bool(row.get("profile"))


def export_cupti_recordings(rows: list[dict], problems: dict[str, Problem], path: Path) -> int:
    """The CUPTI profiles of the rows as recordings (one record per group, the worker's
    start-up as a ``cupti`` or ``cupti_cold`` start-up sample), replayable like ncu's."""
    first = True
    with tempfile.TemporaryDirectory() as folder, Store(Path(folder) / "rec.sqlite") as store:
        for row in rows:
            if row["phase"] != "cupti" or "profile" not in row or row["problem"] not in problems:
                continue
            problem, profile = problems[row["problem"]], Profile.from_dict(row["profile"])
            store.put_problem(problem)
            for name in profile.groups:
                if profile.group_costs.get(name) and profile.group_costs[name].tool == "cupti":
                    part = profile.restricted([get_group(name)])
                    part.device = "H200"
                    store.put_profile_record(problem.content_hash, "H200", name, part.to_dict())
            if row.get("tree"):
                add_startup(store, "H200", _startup_tool(row, first), row["tree"]["startup_s"])
                first = False
        return export_recordings(store, path)


def _by_group(cupti: dict[str, dict], ncu: dict[str, dict], metrics: list[str]) -> list[str]:
    """Per group of the CUPTI profile: its metrics compared, how many within 5 %, the worst."""
    first = next(iter(cupti.values()))["metrics"]
    groups: dict[str, list[str]] = {}
    for metric in metrics:
        groups.setdefault(first[metric]["group"], []).append(metric)
    lines = [
        "| group (as the CUPTI profile files them) | compared with live ncu | within 5 % "
        "| median | the three farthest |",
        "|---|---|---|---|---|",
    ]
    for group, names in sorted(groups.items()):
        rows = sorted(agreement(cupti, ncu, names), key=lambda r: -r[2])
        medians = [d for _, _, d in rows]
        worst = ", ".join(f"`{m}` {d * 100:.1f} %" for m, _, d in rows[:3])
        lines.append(
            f"| {group} | {len(rows)} | {sum(d <= 0.05 for d in medians)} | "
            f"{statistics.median(medians) * 100:.2f} % | {worst} |"
        )
    return lines


def _summary(rows: list[tuple], what: str) -> list[str]:
    if not rows:
        return [f"- {what}: none compared"]
    medians = sorted(d for _, _, d in rows)
    within = sum(d <= 0.05 for d in medians)
    return [
        f"- {what}: {len(rows)} metrics; median of their median relative differences "
        f"{statistics.median(medians) * 100:.2f} %, {within} of {len(rows)} within 5 %"
    ]


def _costs_table(rows: list[dict]) -> list[str]:
    cupti = [r for r in rows if r["phase"] == "cupti" and r.get("tree")]
    steps = [s for r in cupti for s in r["steps"]]
    full = {r["problem"]: r for r in rows if r["phase"] == "full" and "cost_s" in r}
    ncu_steps = [r for r in rows if r["phase"] == "ncu_step" and "cost_s" in r]

    def med(values: list[float]) -> str:
        return f"{statistics.median(values):.2f}" if values else "-"

    tree_costs = {r["problem"]: r["tree"]["cost_s"] for r in cupti}
    ratios = [tree_costs[k] / full[k]["cost_s"] for k in full if k in tree_costs]
    startups = [r["tree"]["startup_s"] for r in cupti]
    workers = [r.get("worker") or {} for r in cupti]
    launches = [w["launches_s"] for w in workers if w.get("launches_s") is not None]
    measures = [
        ("CUPTI worker start-up (to ready), s", startups),
        ("CUPTI worker start-up, the first problem (imports included), s", startups[:1]),
        ("CUPTI worker start-up, the later problems (loaded into the standby), s", startups[1:]),
        ("of which the launch-record forward, s", launches),
        ("CUPTI step overhead beyond replay, s", [s["overhead_s"] for s in steps]),
        ("CUPTI step replay, s", [s["replay_s"] for s in steps]),
        ("ncu step (SpeedOfLight alone), s", [r["cost_s"] for r in ncu_steps]),
        ("ncu step overhead beyond replay, s", [r["startup_s"] for r in ncu_steps]),
        ("expert tree through CUPTI, s", list(tree_costs.values())),
        ("`ncu --set full`, s", [r["cost_s"] for r in full.values()]),
        ("expert tree / `--set full`, same problem", ratios),
    ]
    return ["| measure | median | n |", "|---|---|---|"] + [
        f"| {label} | {med(values)} | {len(values)} |" for label, values in measures
    ]


def _budget_table(rows: list[dict]) -> list[str]:
    budget = [r for r in rows if r["phase"] == "budget"]
    if not budget:
        return []
    lines = ["| problem | budget s | spent s | within budget + grace | cut | skipped |",
             "|---|---|---|---|---|---|"]  # fmt: skip
    for r in budget:
        if "error" in r:
            lines.append(f"| {r['problem']} | {r['budget_s']:g} | {r['error'][:80]} | | | |")
            continue
        held = r["cost_s"] <= r["budget_s"] + STOP_GRACE_S
        skipped = ", ".join(s["group"] for s in r["skipped"]) or "-"
        lines.append(
            f"| {r['problem']} | {r['budget_s']:g} | {r['cost_s']:.2f} | {'yes' if held else 'NO'}"
            f" | {', '.join(r['cut']) or '-'} | {skipped} |"
        )
    return lines


def main(argv: list[str] | None = None) -> int:
    log_progress()
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("mode", choices=("collect", "table"))
    parser.add_argument("problems", nargs="?", help="collect: KernelBench (JSONL or checkout)")
    parser.add_argument("--recordings", type=Path, nargs="+", required=True)
    parser.add_argument("--rows", type=Path, default=Path("runs/profiling-costs/rows.jsonl"))
    parser.add_argument(
        "--earlier-rows", type=Path, nargs="*", default=[],
        help="table: rows of earlier runs, compared for agreement only",
    )  # fmt: skip
    parser.add_argument("--count", type=int, default=24)
    parser.add_argument("--steps", type=int, default=3, help="problems timed with a lone ncu step")
    parser.add_argument("--full", type=int, default=6, help="problems timed with --set full")
    parser.add_argument("--deadline-s", type=float, default=math.inf)
    parser.add_argument(
        "--budgets",
        type=float,
        nargs="*",
        default=[3.0, 8.0],
        help="budgets (s) the expert tree runs under, on --budget-problems",
    )
    parser.add_argument("--budget-problems", type=int, default=3)
    parser.add_argument("--budget-keys", nargs="*", default=[],
                        help="the problems of the budget phase, by key")  # fmt: skip
    parser.add_argument("--budget-replay", choices=tuple(REPLAY_MODES), default="kernel")
    parser.add_argument(
        "--replay", nargs="+", default=["kernel"],
        help="CUPTI phases, in order: kernel or user, MODE:N for the first N problems only",
    )  # fmt: skip
    parser.add_argument(
        "--export-replay", choices=tuple(REPLAY_MODES), default="kernel",
        help="table: the replay whose profiles --export-recordings writes",
    )  # fmt: skip
    parser.add_argument(
        "--quick",
        action="store_true",
        help="CUPTI phase: SpeedOfLight, Occupancy, LaunchStats only, no tree",
    )
    parser.add_argument("--cupti-share", type=float, default=0.5,
                        help="the part of the deadline the CUPTI phase may use")  # fmt: skip
    parser.add_argument("--markdown", type=Path, default=ROOT / "docs/results/profiling_costs.md")
    parser.add_argument(
        "--export-recordings", type=Path, help="table: the CUPTI profiles, as recordings"
    )
    args = parser.parse_args(argv)
    replay_plan(args.replay, args.count)  # a bad --replay is refused before anything runs
    if args.mode == "table":
        return table(args)
    if not args.problems:
        parser.error("collect needs the KernelBench problems")
    args.rows.parent.mkdir(parents=True, exist_ok=True)
    return collect(args)


if __name__ == "__main__":
    run_main(main, log)
