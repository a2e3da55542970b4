"""Recorded evaluations: move GPU verdicts to another machine and replay them there.

An evaluation recorded on a GPU (a row of the store's evaluations table: problem hash,
candidate hash, device label such as ``cuda:NVIDIA H200``, configuration hash, result) answers
the same question anywhere. ``export_evaluations`` / ``import_evaluations`` move them through a
compact ``.jsonl.gz`` file: a header line, then one line per problem, candidate (its source),
evaluation, baseline, and cached rewriter candidate or LLM reply (so that a replay never asks a
rewriter or an LLM again for what it answered on the GPU).

Replay (``EvalConfig.replay_device``): ``evaluate`` starts no worker and returns the newest
recorded result for (problem, candidate, replay device, configuration hash) whatever the torch
version that produced it, marked ``from_cache``; when there is none, a failed result of kind
``NOT_RECORDED``. A configuration recorded with ``device="auto"`` on a GPU is the same as one
with ``device="cuda"`` (and ``auto`` on a CPU-only machine the same as ``cpu``), so either
finds the other's results.
"""

from __future__ import annotations

import gzip
import json
import logging
import os
from collections.abc import Iterable
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.result import EvalResult, FailureKind
from autoprofiler.problem import Problem
from autoprofiler.store import CANDIDATE_SPACE, Store

log = logging.getLogger(__name__)

EXPORT_KIND = "autoprofiler.evaluations"
EXPORT_VERSION = 1


class EvaluationsFileError(ValueError):
    """A file that is not a readable recorded-evaluations export; the message is one line."""


@dataclass(frozen=True)
class ImportedEvaluations:
    """What ``import_evaluations`` read: evaluations, baselines and cache entries, and the
    device labels of the evaluations."""

    evaluations: int
    baselines: int
    cached: int
    devices: tuple[str, ...]


def _cache_spaces() -> tuple[str, ...]:
    """The key-value spaces of content-keyed caches an export carries (rewriter candidates,
    LLM replies)."""
    from autoprofiler.llm.cache import LLM_SPACE

    return (CANDIDATE_SPACE, LLM_SPACE)


# The fields of each kind of exported row, in the order of the store's rows and put methods.
_FIELDS = {
    "candidate": ("candidate", "problem_hash", "source", "producer", "profile_hash", "info"),
    "evaluation": (
        "evaluation",
        "problem_hash",
        "candidate_hash",
        "device",
        "config_hash",
        "result",
    ),
    "baseline": ("baseline", "problem_hash", "device", "kind", "result"),
}


def _line(row: dict[str, Any]) -> str:
    return json.dumps(row, separators=(",", ":")) + "\n"


def _row(kind: str, values: Iterable[Any]) -> str:
    return _line(dict(zip(_FIELDS[kind], values)))


def export_evaluations(
    store: Store, path: str | Path, device: str | None = None, latest_only: bool = False
) -> int:
    """Write the evaluations (on ``device``, or all), the problems and candidate sources they
    name, the baselines of those problems, and the rewriter and LLM caches to a ``.jsonl.gz``
    file; returns the number of evaluations written.

    ``latest_only`` leaves out evaluations superseded by a newer one of the same candidate,
    problem, device and configuration (a re-measurement): the ones a replay would not use.
    The file is written beside ``path`` and then renamed onto it, so a run killed while
    exporting leaves the previous export whole.
    """
    path = Path(path)
    partial = path.with_name(f".{path.name}.partial-{os.getpid()}")
    try:
        count = _write_export(store, partial, device, latest_only)
        os.replace(partial, path)
    finally:
        partial.unlink(missing_ok=True)
    return count


def _write_export(store: Store, path: Path, device: str | None, latest_only: bool) -> int:
    evaluations = list(store.iter_evaluations(device))
    if latest_only:  # rows come oldest first: the last one of each (problem, candidate,
        # device, config) wins
        newest = {tuple(row[1:5]): row for row in evaluations}
        evaluations = [row for row in evaluations if newest[tuple(row[1:5])] is row]
    problems = dict.fromkeys(row[1] for row in evaluations)
    candidates = dict.fromkeys(row[2] for row in evaluations)
    with gzip.open(path, "wt", encoding="utf-8") as out:
        out.write(_line({"kind": EXPORT_KIND, "version": EXPORT_VERSION}))
        for problem_hash in problems:
            problem = store.get_problem(problem_hash)
            if problem is not None:
                out.write(_line({"problem": problem.to_dict()}))
        for candidate_hash in candidates:
            candidate = store.get_candidate(candidate_hash)
            if candidate is not None:
                out.write(_line({"candidate": candidate_hash, **candidate}))
        for evaluation in evaluations:
            out.write(_row("evaluation", evaluation))
        for baseline in store.iter_baselines(device):
            if baseline[1] in problems:
                out.write(_row("baseline", baseline))
        for space in _cache_spaces():
            for key, value in store.iter_space(space):
                out.write(_line({"kv": space, "key": key, "value": value}))
    return len(evaluations)


def import_evaluations(path: str | Path, store: Store) -> ImportedEvaluations:
    """Load a file written by ``export_evaluations`` into ``store``. Raises
    ``EvaluationsFileError`` (one line) when the file cannot be read."""
    counts = {"evaluation": 0, "baseline": 0, "kv": 0}
    devices: dict[str, None] = {}
    try:
        with gzip.open(path, "rt", encoding="utf-8") as handle:
            header = json.loads(handle.readline() or "{}")
            if header.get("kind") != EXPORT_KIND or header.get("version") != EXPORT_VERSION:
                raise EvaluationsFileError(
                    f"{path}: not an autoprofiler evaluations file (version {EXPORT_VERSION})"
                )
            for line in handle:
                row = json.loads(line)
                kind = _import_row(row, store)
                counts[kind] = counts.get(kind, 0) + 1
                if kind == "evaluation":
                    devices[row["device"]] = None
    except (OSError, EOFError, json.JSONDecodeError, KeyError, TypeError) as exc:
        raise EvaluationsFileError(f"{path}: cannot read recorded evaluations: {exc}") from None
    return ImportedEvaluations(counts["evaluation"], counts["baseline"], counts["kv"], (*devices,))


def _import_row(row: dict[str, Any], store: Store) -> str:
    """Write one exported line into ``store``; returns what it was."""
    if "problem" in row:
        store.put_problem(Problem.from_dict(row["problem"]))
        return "problem"
    put = {
        "candidate": store.put_candidate,
        "evaluation": store.put_evaluation,
        "baseline": store.put_baseline,
    }
    for kind, fields in _FIELDS.items():
        if kind in row:
            put[kind](*(row[f] for f in fields))
            return kind
    store.put(row["kv"], row["key"], row["value"])
    return "kv"


def evaluated_devices(store: Store) -> list[str]:
    """The device labels that ``store`` holds evaluations of, sorted."""
    return sorted({row[3] for row in store.iter_evaluations()})


def _equivalent_hashes(config: EvalConfig, device: str) -> Iterable[str]:
    """``config``'s hash, then those of the device settings that mean the same on ``device``
    (``auto`` is ``cuda`` on a GPU and ``cpu`` elsewhere)."""
    same = ("cuda", "auto") if device.startswith("cuda") else ("cpu", "auto")
    yield config.config_hash
    if config.device in same:
        for other in same:
            if other != config.device:
                yield replace(config, device=other).config_hash


def recorded_evaluation(
    store: Store, problem_hash: str, candidate_hash: str, config: EvalConfig, device: str
) -> EvalResult | None:
    """The newest result recorded for the pair on ``device`` under ``config`` (or a device
    setting equivalent there), whatever torch produced it; None when there is none."""
    for config_hash in dict.fromkeys(_equivalent_hashes(config, device)):
        found = store.find_evaluation(problem_hash, candidate_hash, device, config_hash)
        if found is not None:
            result = EvalResult.from_dict(found)
            result.from_cache = True
            return result
    return None


def replay_evaluation(
    problem: Problem, candidate_hash: str, config: EvalConfig, store: Store | None
) -> EvalResult:
    """The recorded result on ``config.replay_device``, or a ``NOT_RECORDED`` failure."""
    device = config.replay_device or ""
    found = None
    if store is not None:
        found = recorded_evaluation(store, problem.content_hash, candidate_hash, config, device)
    if found is not None:
        return found
    where = "in the store" if store is not None else "(no store to replay from)"
    log.info("%s: candidate %s was not evaluated on %s", problem.key, candidate_hash, device)
    return EvalResult(
        problem_hash=problem.content_hash,
        candidate_hash=candidate_hash,
        device=device,
        failure_kind=FailureKind.NOT_RECORDED,
        failure_message=(
            f"no evaluation of candidate {candidate_hash} recorded on {device} "
            f"under configuration {config.config_hash} {where}"
        ),
    )
