"""Recording real profiles once, so that learning can replay them (``RecordedProfiler``).

``record_profiles`` profiles every (problem, group) pair once and stores it
(``Store.put_profile_record``). Problems go in chunks: for each chunk, each group is one
``Profiler.collect_many`` call (for ncu: one process, one NVTX range ``ap_<i>`` per problem, so
start-up is paid once per chunk and group). Each chunk's results are written as soon as it
finishes, so a killed run loses one chunk at most and a rerun skips what is stored. A problem that
fails is recorded in the kv space ``failures`` (key: the device; value: ``{"<group>/<problem
hash>": {"problem", "reason"}}``) and not retried unless asked. The start-up each run would have
cost a single problem is sampled into the kv space ``profile_startup`` (key: the device; value:
``{profiler: {"startup_s": median, "samples": [...]}}``).

``export_recordings`` / ``import_recordings`` move recordings through a compact ``.jsonl.gz``
file: a header line with the unit of each metric name, then one line per problem, record, and
kv entry; each record's metrics are ``{name: value}`` with units and groups stored only where
they differ from the header and the record's group.
"""

from __future__ import annotations

import gzip
import json
import logging
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoprofiler.problem import Problem
from autoprofiler.profile.base import BatchResult, MetricGroup, Profiler, ProfilerError
from autoprofiler.profile.catalogue import get_group
from autoprofiler.store import Store

log = logging.getLogger(__name__)

FAILURES_SPACE = "failures"
STARTUP_SPACE = "profile_startup"
EXPORT_KIND = "autoprofiler.recordings"
EXPORT_VERSION = 1
_MAX_STARTUP_SAMPLES = 200


@dataclass
class RecordingReport:
    """What a ``record_profiles`` call did."""

    recorded: int = 0
    skipped: int = 0
    failed: int = 0
    stopped_early: bool = False
    seconds: float = 0.0


def _failure_key(group: str, problem_hash: str) -> str:
    return f"{group}/{problem_hash}"


def recorded_startup_s(store: Store, device: str, profiler: str) -> float | None:
    """The median start-up recorded for ``profiler`` on ``device`` (None when never recorded)."""
    entry = (store.get(STARTUP_SPACE, device) or {}).get(profiler)
    return None if entry is None else float(entry["startup_s"])


def recorded_failures(store: Store, device: str) -> dict[str, dict[str, str]]:
    """``{"<group>/<problem hash>": {"problem": name, "reason": one line}}`` on ``device``."""
    return store.get(FAILURES_SPACE, device) or {}


def recorded_failure(store: Store, device: str, group: str, problem_hash: str) -> str | None:
    """Why recording ``group`` for the problem failed, or None when it did not fail."""
    entry = recorded_failures(store, device).get(_failure_key(group, problem_hash))
    return None if entry is None else entry["reason"]


def _add_failures(store: Store, device: str, group: str, failures: dict[str, tuple[str, str]]):
    """Add ``{problem hash: (name, reason)}`` to the device's failures."""
    entry = recorded_failures(store, device)
    for key, (name, reason) in failures.items():
        entry[_failure_key(group, key)] = {"problem": name, "reason": reason}
    store.put(FAILURES_SPACE, device, entry)


def add_startup(store: Store, device: str, profiler: str, seconds: float) -> None:
    """Add one start-up sample of ``profiler`` (``ncu``, ``cupti``...) on ``device``."""
    entry = store.get(STARTUP_SPACE, device) or {}
    samples = [*entry.get(profiler, {}).get("samples", []), round(seconds, 4)]
    samples = samples[-_MAX_STARTUP_SAMPLES:]
    entry[profiler] = {"startup_s": statistics.median(samples), "samples": samples}
    store.put(STARTUP_SPACE, device, entry)


def merge_recorded(target: Store, source: Store, device: str) -> int:
    """Add what ``source`` recorded on ``device`` to ``target``: problems and profile records
    (those already in ``target`` kept), failures and start-up samples (added to its own);
    returns the number of records read. Recording on several workers merges this way."""
    count = 0
    for problem_hash, record_device, group, profile in source.iter_profile_records():
        if record_device != device:
            continue
        problem = source.get_problem(problem_hash)
        if problem is not None:
            target.put_problem(problem)
        target.put_profile_record(problem_hash, device, group, profile)
        count += 1
    failures = recorded_failures(source, device)
    if failures:
        target.put(FAILURES_SPACE, device, recorded_failures(target, device) | failures)
    for profiler, entry in (source.get(STARTUP_SPACE, device) or {}).items():
        for seconds in entry.get("samples", []):
            add_startup(target, device, profiler, seconds)
    return count


def pending_problems(
    store: Store, device: str, group: str, problems: Sequence[Problem], retry_failed: bool
) -> list[Problem]:
    """The problems with no record of ``group`` on ``device`` (nor a failure, unless
    ``retry_failed``)."""
    failed = set() if retry_failed else set(recorded_failures(store, device))
    return [
        p
        for p in problems
        if not store.has_profile_record(p.content_hash, device, group)
        and _failure_key(group, p.content_hash) not in failed
    ]


def _write(
    store: Store, device: str, group: MetricGroup, chunk: Sequence[Problem], result: BatchResult
) -> tuple[int, int, list[Problem]]:
    """Store one batch; returns (recorded, failed, problems to retry)."""
    names = {p.content_hash: p.name for p in chunk}
    for key, profile in result.profiles.items():
        profile.device = device
        store.put_profile_record(key, device, group.name, profile.to_dict())
    failures = {k: (names.get(k, k), reason) for k, reason in result.failures.items()}
    for name, reason in failures.values():
        log.warning("%s %s failed: %s", name, group.name, reason)
    if result.profiles:
        tools = [p.group_costs[group.name].tool for p in result.profiles.values()
                 if group.name in p.group_costs]  # fmt: skip
        add_startup(store, device, next((t for t in tools if t), group.profiler), result.startup_s)
    retry = [p for p in chunk if p.content_hash in set(result.not_run)]
    if retry and not result.profiles and not failures:
        # No progress at all: charge the first problem so that the loop ends.
        first = retry.pop(0)
        reason = "the profiling run ended before this problem ran"
        failures[first.content_hash] = (first.name, reason)
    if failures:
        _add_failures(store, device, group.name, failures)
    return len(result.profiles), len(failures), retry


def _catalogue_s(group: MetricGroup) -> float:
    return group.cost_s + 1.0  # + building and warming up the problem


def _estimate_s(
    group: MetricGroup, n: int, startup: float, per_problem: float | None, slowdown: float
) -> float:
    """Rough seconds one batch of ``n`` problems will take: the catalogue cost scaled by how much
    slower than the catalogue this chunk's problems ran so far, or the last observed cost."""
    return startup + n * max(_catalogue_s(group) * slowdown, per_problem or 0.0)


def record_profiles(
    problems: Sequence[Problem],
    group_names: Sequence[str],
    store: Store,
    device: str,
    profiler: Profiler,
    chunk_size: int = 16,
    deadline_s: float | None = None,
    retry_failed: bool = False,
    groups: Sequence[MetricGroup] | None = None,
    on_progress: Callable[[str], None] | None = None,
) -> RecordingReport:
    """Record each (problem, group) once in ``store`` under ``device``; resumable.

    Chunks of ``chunk_size`` problems are profiled with every group before the next chunk starts,
    so a run stopped by ``deadline_s`` (seconds from the call) has complete profiles for the
    problems it reached. No batch is started that its estimated duration (the catalogue cost, or
    the last observed seconds per problem of that group) says would overrun the deadline; such a
    group is passed over and the next (perhaps cheaper) group tried, so a short slot still
    records what fits in it.
    ``groups`` overrides the catalogue lookup of ``group_names`` (for groups not in it).
    A ``ProfilerError`` of a whole run (ncu missing, counters not permitted) is raised.
    """
    started = time.monotonic()
    chosen = list(groups) if groups is not None else [get_group(n) for n in group_names]
    report = RecordingReport()
    for problem in problems:
        store.put_problem(problem)
    say = on_progress or log.info
    observed: dict[str, float] = {}
    for start in range(0, len(problems), chunk_size):
        chunk = problems[start : start + chunk_size]
        slowdown = 1.0
        span = f"problems {start + 1}-{start + len(chunk)} of {len(problems)}"
        for group in chosen:
            todo = pending_problems(store, device, group.name, chunk, retry_failed)
            report.skipped += len(chunk) - len(todo)
            while todo:
                if deadline_s is not None:
                    startup = profiler.estimated_startup_s()
                    needed = _estimate_s(
                        group, len(todo), startup, observed.get(group.name), slowdown
                    )
                    if time.monotonic() - started + needed > deadline_s:
                        report.stopped_early = True
                        say(f"deadline: not starting {group.name} on {span} (~{needed:.0f} s)")
                        break
                result = profiler.collect_many(todo, [group])
                observed[group.name] = result.wall_s / len(todo)
                slowdown = max(slowdown, observed[group.name] / _catalogue_s(group))
                recorded, failed, todo = _write(store, device, group, todo, result)
                report.recorded += recorded
                report.failed += failed
                say(
                    f"{group.name}: {span}: {recorded} recorded, {failed} failed,"
                    f" {len(todo)} to retry, {result.wall_s:.1f} s"
                )
    report.seconds = time.monotonic() - started
    return report


def _compact(profile: dict[str, Any], group: str, units: dict[str, str]) -> dict[str, Any]:
    out = dict(profile)
    metrics = profile.get("metrics", {})
    out["metrics"] = {name: m["value"] for name, m in metrics.items()}
    odd_units = {n: m["unit"] for n, m in metrics.items() if m.get("unit", "") != units.get(n, "")}
    odd_groups = {n: m["group"] for n, m in metrics.items() if m.get("group", "") != group}
    if odd_units:
        out["metric_units"] = odd_units
    if odd_groups:
        out["metric_groups"] = odd_groups
    return out


def _expand(profile: dict[str, Any], group: str, units: dict[str, str]) -> dict[str, Any]:
    out = dict(profile)
    odd_units = out.pop("metric_units", {})
    odd_groups = out.pop("metric_groups", {})
    out["metrics"] = {
        name: {
            "value": value,
            "unit": odd_units.get(name, units.get(name, "")),
            "group": odd_groups.get(name, group),
        }
        for name, value in profile.get("metrics", {}).items()
    }
    return out


def export_recordings(store: Store, path: str | Path) -> int:
    """Write every recorded profile (and its problems, failures, start-ups) to a ``.jsonl.gz``
    file; returns the number of profile records written."""
    records = list(store.iter_profile_records())
    units: dict[str, str] = {}
    for *_, profile in records:
        for name, metric in profile.get("metrics", {}).items():
            units.setdefault(name, metric.get("unit", ""))
    hashes = sorted({r[0] for r in records})
    with gzip.open(path, "wt", encoding="utf-8") as out:
        header = {"kind": EXPORT_KIND, "version": EXPORT_VERSION, "units": units}
        out.write(json.dumps(header, separators=(",", ":")) + "\n")
        for problem_hash in hashes:
            problem = store.get_problem(problem_hash)
            if problem is not None:
                out.write(json.dumps({"problem": problem.to_dict()}, separators=(",", ":")) + "\n")
        for problem_hash, device, group, profile in records:
            line = {"hash": problem_hash, "device": device, "group": group}
            line["profile"] = _compact(profile, group, units)
            out.write(json.dumps(line, separators=(",", ":")) + "\n")
        for device in sorted({r[1] for r in records}):
            for space in (FAILURES_SPACE, STARTUP_SPACE):
                value = store.get(space, device)
                if value is not None:
                    line = {"kv": space, "key": device, "value": value}
                    out.write(json.dumps(line, separators=(",", ":")) + "\n")
    return len(records)


def import_recordings(path: str | Path, store: Store) -> int:
    """Load a file written by ``export_recordings`` into ``store`` (records already there are
    kept); returns the number of profile records read."""
    count = 0
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline())
            if header.get("kind") != EXPORT_KIND or header.get("version") != EXPORT_VERSION:
                raise ProfilerError(f"{path}: not an autoprofiler recordings file (version 1)")
            units = header.get("units", {})
            for line in handle:
                row = json.loads(line)
                if "problem" in row:
                    store.put_problem(Problem.from_dict(row["problem"]))
                elif "kv" in row:
                    store.put(row["kv"], row["key"], row["value"])
                else:
                    profile = _expand(row["profile"], row["group"], units)
                    store.put_profile_record(row["hash"], row["device"], row["group"], profile)
                    count += 1
    except KeyError as exc:
        raise ProfilerError(f"{path}: cannot read recordings: no {exc.args[0]!r} field") from None
    except (OSError, EOFError, json.JSONDecodeError) as exc:
        raise ProfilerError(f"{path}: cannot read recordings: {exc}") from None
    return count


def metric_names_by_group(store: Store, device: str | None = None) -> dict[str, list[str]]:
    """``{group: sorted metric names}`` that the recordings (on ``device``) actually hold."""
    seen: dict[str, set[str]] = {}
    for _, record_device, group, profile in store.iter_profile_records():
        if device is None or record_device == device:
            seen.setdefault(group, set()).update(profile.get("metrics", {}))
    return {group: sorted(names) for group, names in sorted(seen.items())}
