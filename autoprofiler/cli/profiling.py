"""How a command profiles: the tree asked for, the device whose profiles are used, live or
recorded profilers, and which problems have recordings to replay."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from autoprofiler.cli.console import fail, warn
from autoprofiler.cli.selection import asked, load_or_fail, selected

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.profile import Profiler, RecordedProfiler
    from autoprofiler.store import Store
    from autoprofiler.tree import ProfilingTree


def profiling_tree(tree: str | None, groups: list[str]) -> ProfilingTree:
    """The tree ``--tree`` names, else one node collecting ``groups`` (both checked as they
    were parsed)."""
    from autoprofiler.tree import Node, ProfilingTree, resolve_tree

    if tree:
        return resolve_tree(tree).validate()
    return ProfilingTree(Node("n0", tuple(groups)), description="collect the given groups")


def current_device_key(fallback: str) -> str:
    """This machine's GPU as the recordings name it (``H200``), else ``fallback``."""
    import torch

    from autoprofiler.profile import device_key

    return device_key(torch.cuda.get_device_name()) if torch.cuda.is_available() else fallback


def recorded_devices(db: Store) -> list[str]:
    """The devices with profiles recorded in ``db``."""
    return sorted({device for _, device, _, _ in db.iter_profile_records()})


def recorded_device(db: Store, wanted: str) -> str:
    """The device whose recordings are replayed: ``wanted`` (it must be recorded), else the
    only one in the store; or one error line."""
    devices = recorded_devices(db)
    if not devices:
        fail("the store holds no recorded profiles: pass --recordings FILE")
    if wanted and wanted not in devices:
        fail(f"no recordings of {wanted!r} in the store (recorded: {', '.join(devices)})")
    if not wanted and len(devices) > 1:
        fail(f"choose the recordings with --profile-device (recorded: {', '.join(devices)})")
    return wanted or devices[0]


def profile_device(db: Store, wanted: str, replay: bool, fallback: str = "H200") -> str:
    """The device whose profiles are used: replaying, ``recorded_device``; profiling live,
    ``wanted`` or this GPU (``fallback`` on a machine without one: the roofline assumed)."""
    if replay:
        return recorded_device(db, wanted)
    return wanted or current_device_key(fallback)


def profiler_for(db: Store, device_key: str, replay: bool) -> Profiler:
    """Recorded profiles from the store when replaying, else the live profilers."""
    from autoprofiler.profile import ProfilerError, RecordedProfiler, default_profiler

    if replay:
        return RecordedProfiler(db, device_key)
    try:
        return default_profiler(device_key)
    except ProfilerError as exc:  # AUTOPROFILER_HARDWARE asks for what is not here
        fail(str(exc))


def with_recordings(problems: list[Problem], profiler: RecordedProfiler) -> list[Problem]:
    """The problems with recordings on the profiler's device; each other one is one warning
    line (nothing to replay for it), and none at all is an error."""
    recorded = [p for p in problems if profiler.records(p.content_hash)]
    for problem in problems:
        if problem not in recorded:
            warn(f"skipped {problem.key}: no recordings on {profiler.device} to replay")
    if not recorded:
        fail(f"none of the {len(problems)} problems has recordings on {profiler.device}")
    return recorded


def recorded_problems(
    db: Store,
    path: Path | None,
    profiler: RecordedProfiler,
    levels: str | None = None,
    ids: str | None = None,
) -> list[Problem]:
    """The problems to learn from: those in ``path`` (else every one recorded) with recordings
    on the profiler's device, ``levels`` and ``ids`` selecting among them."""
    if path is not None:
        return with_recordings(load_or_fail(path, levels, ids).problems, profiler)
    hashes = dict.fromkeys(h for h, d, _, _ in db.iter_profile_records() if d == profiler.device)
    problems = selected([p for h in hashes if (p := db.get_problem(h)) is not None], levels, ids)
    if not problems:
        selection = f" with {asked(levels, ids)}" if levels or ids else ""
        fail(f"no problems with recordings on {profiler.device}{selection}")
    return problems
