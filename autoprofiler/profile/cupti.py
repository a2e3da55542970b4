"""CuptiProfiler: ncu's metric groups through CUPTI's range profiler, one tree step at a time.

For each problem one worker process (``autoprofiler.profile.cupti_worker``) builds the model
once, warms it up and enables the range profiler; every ``collect`` then asks it for the
metrics of the groups given and pays only that step's replay passes, not a new ncu start-up.
Each kernel of the forward is a range (auto range); its passes are replayed as
``CuptiOptions.replay`` says: ``user`` (the default), the worker runs the whole forward once
per pass (no memory saved, the L2 flushed before each forward but not between its kernels), or
``kernel``, CUPTI replays each kernel (saving and restoring the memory it touches, as ncu does).
On the H200 both agree with ncu (median 0.3 % and 0.1 % on throughput percentages) and user
replay costs half as much on deep steps (``docs/results/profiling_costs.md``); a forward whose
kernels change from one run to the next cannot be user-replayed, and its step is then replayed
kernel by kernel (the profile's notes say so). The worker
stays up for the next step on the same problem and is stopped by ``release`` (``run_tree``
calls it when the walk ends) or when another problem comes. While one problem's worker works,
the next one waits as a standby with Python and PyTorch imported (``CuptiOptions.standby``), so
a problem after the first pays only for its CUDA context, its build and one forward whose
kernels CUPTI's activity API records (names, launch statistics); ``close`` (or the profiler's
end) stops it.

What a group asks for: the metrics ncu's sections of it report (``ncu_section_metrics.json``),
with ncu's names, less those ncu computes itself (``derived_*``). Which of them this chip's
profiler host refuses is read from ``cupti_refused.json`` where the chip was measured (GH100:
SASS instruction counts and NVLink bytes), else asked of the worker once per group. CUPTI
collects the rest of such a group and the profile's notes name what it lacks; with
``CuptiOptions.complete`` the group is collected by the ``fallback`` profiler (ncu) instead.
Launch statistics (grid, block, registers, shared memory per kernel) come from the kernels'
activity records; ncu's occupancy calculator figures (``launch__occupancy_limit_*``,
``sm__maximum_warps_per_active_cycle_pct``) have no CUPTI counterpart and are absent. Each
group's ``GroupCost.tool`` says which tool collected it (and ``GroupCost.replay`` how). Per-
kernel values are aggregated as the ncu path does (``ncu_report.aggregate``), so the same kind
of ``Profile`` comes out.

Time limits. Every wait on the worker (its start, each step) ends at the deadline that
``limit_s`` sets; a step that would run past it is stopped by killing the worker, charged what
it spent, and its groups are listed in ``Profile.cut``.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import selectors
import signal
import subprocess
import sys
import tempfile
import time
import weakref
from collections.abc import Sequence
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import IO, Any

from autoprofiler.problem import Problem
from autoprofiler.profile.base import (
    GroupCost,
    MetricGroup,
    Profile,
    Profiler,
    ProfilerError,
    cut_profile,
    shares,
)
from autoprofiler.profile.catalogue import (
    cupti_cost_s,
    group_yields,
    metrics_key,
    section_metrics,
    startup_s,
)
from autoprofiler.profile.cupti_api import DEFAULT_REPLAY, REPLAY_MODES
from autoprofiler.profile.devices import device_key
from autoprofiler.profile.ncu import REPO_ROOT, checkout_env
from autoprofiler.profile.ncu_report import DURATION, KernelRow, aggregate, summarize_kernels

log = logging.getLogger(__name__)

WORKER_MODULE = "autoprofiler.profile.cupti_worker"
NCU_COMPUTED_PREFIX = "derived_"  # ncu evaluates these from other metrics; CUPTI has none
TOOL = "cupti"
COLD_TOOL = "cupti_cold"  # the catalogue's start-up of a worker with nothing imported yet
REFUSED_FILE = "cupti_refused.json"
NCU_UNITS = {"percent": "%", "nanosecond": "nsecond"}  # CUPTI's unit names as ncu writes them
LAUNCH_UNITS = {
    "launch__grid_size": "",
    "launch__block_size": "",
    "launch__registers_per_thread": "register/thread",
    "launch__shared_mem_per_block": "byte",
    "launch__shared_mem_per_block_driver": "byte",
}


@dataclass(frozen=True)
class CuptiOptions:
    """How the worker runs. ``complete``: a group with metrics CUPTI refuses on this GPU is
    collected with ncu (by default CUPTI collects the rest of it, and the profile's notes name
    what it lacks). ``worker`` replaces its command (tests replay recorded answers);
    ``timeout_s`` bounds a step without a limit of its own; ``transcript``, when set, gets
    every answer of every worker appended as a JSON line (``{"problem", "op", "answer"}``);
    ``max_ranges``: kernel ranges a step holds (none: those one forward launches, plus a
    margin); ``standby``: start the next problem's worker while this one works; ``replay``:
    ``kernel`` or ``user`` (see the module's docstring)."""

    python: str = sys.executable
    complete: bool = False
    warmup: int = 3
    max_ranges: int | None = None
    standby: bool = True
    replay: str = DEFAULT_REPLAY
    timeout_s: float = 600.0
    worker: tuple[str, ...] = ()
    transcript: Path | None = None

    def __post_init__(self) -> None:
        if self.replay not in REPLAY_MODES:
            choices = ", ".join(REPLAY_MODES)
            raise ProfilerError(f"CUPTI replay {self.replay!r} is not one of {choices}")


class _Cut(Exception):
    """The deadline passed while waiting on the worker."""


class _Worker:
    """One worker process and the pipes to it: a standby until ``load`` gives it its problem."""

    def __init__(self, options: CuptiOptions) -> None:
        self.problem_hash = ""
        self._name, self._transcript = "", options.transcript
        self._warmup = options.warmup
        self._folder = tempfile.TemporaryDirectory(prefix="autoprofiler-cupti-")
        command = list(options.worker) or [options.python, "-m", WORKER_MODULE]
        # kept open for the worker's life, closed by stop()
        self._stderr = open(Path(self._folder.name) / "stderr.txt", "w+", encoding="utf-8")  # noqa: SIM115
        self.process = subprocess.Popen(
            command,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
            env=checkout_env(),
            cwd=REPO_ROOT,
            start_new_session=True,
        )
        self.ready: dict[str, Any] = {}

    @property
    def alive(self) -> bool:
        return self.process.poll() is None

    def load(self, problem: Problem, deadline: float) -> None:
        """Give the standby ``problem``; return once it is built and ready for steps."""
        log.info("loading %s in the CUPTI worker", problem.name)
        self.problem_hash, self._name = problem.content_hash, problem.name
        problem_file = Path(self._folder.name) / "problem.json"
        problem_file.write_text(json.dumps(problem.to_dict()))
        request = {"op": "load", "problem": str(problem_file), "warmup": self._warmup}
        self._write(request)
        self.ready = self._read(deadline, "start")
        if self.ready.get("event") != "ready":
            self.stop()
            raise ProfilerError(f"the CUPTI worker failed: {self.ready.get('error', self.ready)}")

    def _write(self, request: dict[str, Any]) -> None:
        stdin = self.process.stdin
        assert stdin is not None
        try:
            stdin.write(json.dumps(request) + "\n")
            stdin.flush()
        except BrokenPipeError:
            raise ProfilerError(f"the CUPTI worker died: {self._tail()}") from None

    def ask(self, request: dict[str, Any], deadline: float) -> dict[str, Any]:
        self._write(request)
        answer = self._read(deadline, str(request.get("op")))
        if answer.get("event") == "error":
            raise ProfilerError(f"the CUPTI worker: {answer.get('error')}")
        return answer

    def _read(self, deadline: float, op: str) -> dict[str, Any]:
        stdout: IO[str] | None = self.process.stdout
        assert stdout is not None
        with selectors.DefaultSelector() as selector:
            selector.register(stdout, selectors.EVENT_READ)
            if not selector.select(timeout=max(deadline - time.monotonic(), 0.0)):
                self.stop()
                raise _Cut
        line = stdout.readline()
        if not line:
            self.process.wait()
            code = self.process.returncode
            raise ProfilerError(f"the CUPTI worker died (exit {code}): {self._tail()}")
        try:
            answer = json.loads(line)
        except json.JSONDecodeError:
            raise ProfilerError(f"the CUPTI worker wrote {line[:120]!r}") from None
        if self._transcript is not None:
            with open(self._transcript, "a", encoding="utf-8") as handle:
                handle.write(json.dumps({"problem": self._name, "op": op, "answer": answer}) + "\n")
        return answer

    def _tail(self) -> str:
        self._stderr.seek(0)
        lines = [ln.strip() for ln in self._stderr.read().splitlines() if ln.strip()]
        return " | ".join(lines[-3:])[:400] or "no output"

    def stop(self) -> None:
        if self.process.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.process.pid, signal.SIGKILL)
            self.process.wait()
        for stream in (self.process.stdin, self.process.stdout):
            if stream is not None:
                with contextlib.suppress(OSError):
                    stream.close()
        self._stderr.close()
        self._folder.cleanup()


def _stop_all(workers: list[_Worker]) -> None:
    while workers:
        workers.pop().stop()


def known_refusals(chip: str) -> dict[str, list[str]]:
    """The metrics of each group CUPTI refuses on ``chip``, as measured (``cupti_refused.json``);
    empty for a chip never measured (the worker is asked instead)."""
    text = resources.files("autoprofiler.data").joinpath(REFUSED_FILE).read_text("utf-8")
    return {g: list(m) for g, m in json.loads(text).get(chip, {}).items()}


def cupti_metrics(group: MetricGroup) -> list[str]:
    """What CUPTI is asked for ``group``: its sections' metrics (ncu's names) less those ncu
    computes itself, with the kernel duration first; empty for a set (``ncu.set.*``, collected
    with ncu) or a group with no known list."""
    known = section_metrics().get(metrics_key(group))
    if group.profiler != "ncu" or known is None or group.composite_of:
        return []  # not ncu's, not known, or a set of sections (ncu takes sets whole)
    listed = sorted(m for m in known if not m.startswith(NCU_COMPUTED_PREFIX))
    return list(dict.fromkeys([DURATION, *group.metrics, *listed]))


class CuptiProfiler(Profiler):
    """Collects ncu groups through CUPTI in a per-problem worker, the rest through ``fallback``."""

    name = TOOL

    def __init__(
        self, fallback: Profiler | None = None, options: CuptiOptions | None = None
    ) -> None:
        self.fallback = fallback
        self.options = options or CuptiOptions()
        self.refused: dict[str, list[str]] = {}  # group -> metrics this GPU's CUPTI refuses
        self._worker: _Worker | None = None
        self._standby: list[_Worker] = []  # a list, so the finalizer sees the current one
        self._finalizer = weakref.finalize(self, _stop_all, self._standby)
        self.device = ""
        self.last_ready: dict[str, Any] = {}  # what the last worker said when it was ready

    def available(self) -> bool:
        """True when a CUPTI with the range profiler and a CUDA driver load here."""
        from autoprofiler.profile.cupti_api import CuptiError, driver_present, load_cupti

        try:
            load_cupti()
        except CuptiError:
            return False
        return driver_present()

    def estimated_startup_s(self) -> float:
        """A worker loaded from a ready standby (imports done), else one started cold."""
        warm = any(worker.alive for worker in self._standby)
        return startup_s(TOOL if warm else COLD_TOOL)

    def estimate_cost_s(self, problem: Problem, groups: Sequence[MetricGroup]) -> float:
        if not groups:
            return 0.0
        mine = [g for g in groups if self._served(g)]
        theirs = [g for g in groups if not self._served(g)]
        live = self._worker is not None and self._worker.problem_hash == problem.content_hash
        cost = sum(cupti_cost_s(g) for g in mine) + (
            0.0 if live or not mine else self.estimated_startup_s()
        )
        if theirs and self.fallback is not None:
            cost += self.fallback.estimate_cost_s(problem, theirs)
        return cost

    def shown(self, problem: Problem, groups: Sequence[MetricGroup], collected: Profile) -> Profile:
        mine = any(self._served(g) for g in groups)
        theirs = [g for g in groups if g.profiler == "ncu" and not self._served(g)]
        startup = self.estimated_startup_s() if mine else 0.0
        if theirs and self.fallback is not None:
            startup += self.fallback.estimated_startup_s()
        return collected.restricted(groups, startup)

    def _served(self, group: MetricGroup) -> bool:
        """Whether CUPTI collects ``group`` (as far as known before asking the GPU): any group
        with a metric list, except, with ``complete``, one with metrics CUPTI refuses here."""
        if not cupti_metrics(group):
            return False
        return not (self.options.complete and self.refused.get(group.name))

    def release(self) -> None:
        """Stop the current problem's worker (a standby for the next one stays)."""
        if self._worker is not None:
            self._worker.stop()
            self._worker = None
        if self.fallback is not None:
            self.fallback.release()

    def close(self) -> None:
        """Stop every worker this profiler started, the standby too."""
        self.release()
        _stop_all(self._standby)

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        """Collect ``groups`` for ``problem``: CUPTI's in one step of the worker, the others
        through ``fallback``; stopped at ``limit_s`` (raises ``ProfilerError``)."""
        started = time.monotonic()
        limit = self.options.timeout_s if limit_s is None else max(float(limit_s), 0.0)
        deadline = started + limit
        profile = Profile(problem_hash=problem.content_hash, device=self.device)
        if not groups:
            return profile
        candidates = [g for g in groups if self._served(g)]
        startup, mine = 0.0, []
        try:
            if candidates:
                startup = self._start(problem, deadline)
                self._check(candidates, deadline)
            mine = [g for g in candidates if self._served(g)]
            if mine:
                profile = self._step(problem, mine, deadline)
        except _Cut:
            self._worker = None
            spent = time.monotonic() - started
            log.info("CUPTI step for %s stopped at its limit of %.3g s", problem.name, limit)
            profile = cut_profile(problem, candidates, spent, TOOL)
            profile.startup_s = startup
            return profile
        theirs = [g for g in groups if g not in mine]
        profile.notes += [self._why_fallback(g) for g in theirs if g.profiler == "ncu"]
        profile.notes += [self._why_partial(g) for g in mine if self.refused.get(g.name)]
        if theirs:
            left = deadline - time.monotonic()
            limit_left = None if limit_s is None else max(left, 0.0)
            profile = profile.merge(self._fallback(problem, theirs, limit_left))
        profile.startup_s += startup
        profile.cost_s = time.monotonic() - started if mine else profile.cost_s + startup
        return profile

    def _refused_text(self, group: MetricGroup) -> str:
        refused = self.refused.get(group.name, [])
        more = f" and {len(refused) - 6} more" if len(refused) > 6 else ""
        return ", ".join(refused[:6]) + more

    def _why_fallback(self, group: MetricGroup) -> str:
        if self.refused.get(group.name):
            return (
                f"{group.name} collected with ncu: CUPTI on this GPU has no"
                f" {self._refused_text(group)}"
            )
        return f"{group.name} collected with ncu: CUPTI has no metric list for it"

    def _why_partial(self, group: MetricGroup) -> str:
        return (
            f"{group.name} collected with CUPTI, which on this GPU has no"
            f" {self._refused_text(group)} (AUTOPROFILER_CUPTI_COMPLETE=1 takes such groups to ncu)"
        )

    def _fallback(
        self, problem: Problem, groups: list[MetricGroup], left_s: float | None
    ) -> Profile:
        if self.fallback is None:
            raise ProfilerError(
                f"{', '.join(g.name for g in groups)}: not collectable through CUPTI here,"
                " and no ncu to fall back on"
            )
        return self.fallback.collect(problem, groups, limit_s=left_s)

    def _start(self, problem: Problem, deadline: float) -> float:
        """The worker for ``problem`` (the standby loaded, or one started); the seconds spent."""
        if self._worker is not None and self._worker.problem_hash == problem.content_hash:
            return 0.0
        self.release()
        start = time.monotonic()
        worker = self._standby.pop() if self._standby else None
        from_standby = worker is not None and worker.alive
        if not from_standby:
            if worker is not None:
                worker.stop()
            log.info("starting the CUPTI worker for %s", problem.name)
            worker = _Worker(self.options)
        try:
            worker.load(problem, deadline)
        except BaseException:
            worker.stop()
            raise
        self._worker = worker
        self.last_ready = {**worker.ready, "standby": from_standby}
        if self.options.standby:
            self._standby.append(_Worker(self.options))
        self.device = device_key(str(worker.ready.get("device", ""))) or self.device
        known = known_refusals(str(worker.ready.get("chip", "")))
        self.refused = known | self.refused
        return time.monotonic() - start

    def _check(self, groups: list[MetricGroup], deadline: float) -> None:
        """Ask the worker which metrics of groups not yet checked this GPU refuses."""
        assert self._worker is not None
        for group in groups:
            if group.name in self.refused:
                continue
            answer = self._worker.ask({"op": "check", "metrics": cupti_metrics(group)}, deadline)
            self.refused[group.name] = list(answer.get("unsupported", []))

    def _step(self, problem: Problem, groups: list[MetricGroup], deadline: float) -> Profile:
        assert self._worker is not None
        refused = {m for g in groups for m in self.refused.get(g.name, [])}
        metrics = [m for m in dict.fromkeys(m for g in groups for m in cupti_metrics(g))]
        metrics = [m for m in metrics if m not in refused]
        request: dict[str, Any] = {
            "op": "collect",
            "metrics": metrics,
            "replay": self.options.replay,
        }
        if self.options.max_ranges is not None:
            request["max_ranges"] = self.options.max_ranges
        answer = self._worker.ask(request, deadline)
        return profile_from_answer(problem, groups, answer, self.device)


def profile_from_answer(
    problem: Problem, groups: Sequence[MetricGroup], answer: dict[str, Any], device: str = ""
) -> Profile:
    """The ``Profile`` of one ``collected`` answer of the worker: per-kernel values aggregated
    as ncu's are, the step's replay seconds and passes split over the groups by catalogue cost."""
    metrics = list(answer["metrics"])
    launches = list(answer.get("launches") or [])
    rows = []
    for index, (name, values) in enumerate(answer.get("kernels", [])):
        row = KernelRow(name=f"kernel {name}", values=dict(zip(metrics, map(float, values))))
        if launches:
            launch = dict(launches[index])
            row.name = str(launch.pop("name"))
            row.values.update({k: float(v) for k, v in launch.items()})
        rows.append(row)
    units = {m: NCU_UNITS.get(str(u), str(u)) for m, u in answer.get("units", {}).items()}
    units |= LAUNCH_UNITS

    def group_of(metric: str) -> str:
        owner = next((g for g in groups if group_yields(g, metric)), groups[0])
        return owner.name

    seconds = float(answer.get("replay_s", 0.0))
    passes = int(answer.get("passes", 0))
    replay = str(answer.get("replay", "kernel"))
    seconds_of = shares(seconds, [cupti_cost_s(g) for g in groups])
    notes = []
    if answer.get("user_replay_failed"):
        notes.append(
            f"user replay gave up ({answer['user_replay_failed']}): this step was replayed"
            " kernel by kernel"
        )
    if rows and not launches:
        notes.append(
            f"kernel names and launch statistics missing: CUPTI profiled {len(rows)} kernels,"
            f" torch.profiler saw {answer.get('launched', 0)} launches"
        )
    if answer.get("dropped"):
        notes.append(f"CUPTI dropped {answer['dropped']} kernel ranges (more than it could hold)")
    return Profile(
        problem_hash=problem.content_hash,
        device=device,
        metrics=aggregate(rows, units, group_of, 1),
        kernels=summarize_kernels(rows, units, forwards=1),
        groups=[g.name for g in groups],
        group_costs={
            g.name: GroupCost(seconds=share, replay_passes=passes, tool=TOOL, replay=replay)
            for g, share in zip(groups, seconds_of, strict=True)
        },
        cost_s=seconds,
        replay_passes=passes,
        notes=notes,
    )
