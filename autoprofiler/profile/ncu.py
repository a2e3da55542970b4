"""NcuProfiler: real hardware counters from the Nsight Compute CLI.

One ``collect`` (or one ``collect_many`` over several problems) is one ncu run over one runner
process (``autoprofiler.profile.ncu_runner``), with every requested group's sections and metrics:

    ncu --clock-control none --replay-mode kernel --nvtx --nvtx-include "regex:ap_[0-9]+/" \\
        --section ... --metrics gpu__time_duration.sum,... -o <tmp>/report --force-overwrite \\
        python -m autoprofiler.profile.ncu_runner --problems <tmp>/problems.jsonl

then ``ncu --import <tmp>/report.ncu-rep --csv --page raw`` is parsed (``ncu_report``). A lone
``ncu.set.*`` group is passed as ``--set``; otherwise the union of the groups' sections is.
Problem i runs in NVTX range ``ap_<i>`` (from 1); range ``ap_0`` holds one tiny priming kernel
that takes ncu's extra first-kernel cost into start-up, where it belongs.

Costs. ``cost_s`` of ``collect`` is the wall time of both ncu invocations; ``startup_s`` is that
minus the in-range seconds the runner measured around the profiled forwards. When several groups
share the run, the in-range seconds (and the replay passes) are split between them in proportion
to their catalogue ``cost_s`` (``replay_passes``) -- ncu cannot say which section cost what.
In ``collect_many`` each problem is charged its own in-range seconds only; the run's start-up is
estimated once (``BatchResult.startup_s``) as if the problem had been profiled alone.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from autoprofiler.problem import Problem
from autoprofiler.profile.base import (
    BatchResult,
    GroupCost,
    MetricGroup,
    Profile,
    Profiler,
    ProfilerError,
    cut_profile,
    shares,
)
from autoprofiler.profile.catalogue import group_yields, startup_s
from autoprofiler.profile.devices import device_key
from autoprofiler.profile.ncu_report import (
    DURATION,
    KernelRow,
    NcuTable,
    aggregate,
    check_output,
    kernel_passes,
    parse_events,
    parse_raw_csv,
    split_by_range,
    summarize_kernels,
)

log = logging.getLogger(__name__)

REPO_ROOT = Path(__file__).resolve().parents[2]
RUNNER_MODULE = "autoprofiler.profile.ncu_runner"
SET_PREFIX = "ncu.set."
_TAIL_LINES = 3


@dataclass(frozen=True)
class NcuOptions:
    """How ncu is run. ``timeout_s`` bounds one problem; a chunk of n problems gets n times it.

    ``launches_per_config`` > 0 samples, for models that launch hundreds of kernels per forward,
    where ncu's per-launch replay would take hours: ncu profiles only the first that many
    launches of each launch configuration (``--filter-mode per-launch-config``). A configuration
    is the grid, block and shared memory, not the kernel name: on the H200 a forward alternating
    two elementwise kernels of one shape gave 1, 3 and 4 launches for counts 1, 3 and 4. ncu also
    counts launches outside the NVTX range, so when sampling the runner runs no warm-up forward
    (after warm-ups nothing in the range was profiled) and no priming kernel, and
    ``collect_many`` gives each problem its own ncu process; kernels that build the inputs can
    still use up part of the count.
    """

    ncu: str = "ncu"
    clock_control: str = "none"
    replay_mode: str = "kernel"
    extra_args: tuple[str, ...] = ()
    timeout_s: float = 600.0
    warmup: int = 3
    repeats: int = 1
    python: str = sys.executable
    range_prefix: str = "ap_"
    launches_per_config: int = 0

    def __post_init__(self) -> None:
        if self.launches_per_config < 0:
            raise ValueError(f"launches per config {self.launches_per_config} is negative")
        if self.clock_control not in ("none", "base"):
            raise ValueError(f"clock control {self.clock_control!r} is not 'none' or 'base'")
        if self.replay_mode not in ("kernel", "application"):
            raise ValueError(f"replay mode {self.replay_mode!r} is not 'kernel' or 'application'")


@dataclass
class _Run:
    stdout: str
    stderr: str
    returncode: int | None
    timed_out: bool
    wall_s: float
    limit_s: float


LAUNCHES_PER_CONFIG_ENV = "AUTOPROFILER_NCU_LAUNCHES_PER_CONFIG"


def options_from_env(environ: Mapping[str, str] | None = None) -> NcuOptions:
    """Default options, sampling when ``AUTOPROFILER_NCU_LAUNCHES_PER_CONFIG`` is set.

    Raises ``ProfilerError`` (one line) when the variable is not a whole number >= 0.
    """
    text = (os.environ if environ is None else environ).get(LAUNCHES_PER_CONFIG_ENV, "").strip()
    if not text:
        return NcuOptions()
    if not text.isdigit():
        raise ProfilerError(f"{LAUNCHES_PER_CONFIG_ENV}={text!r} is not a whole number >= 0")
    return NcuOptions(launches_per_config=int(text))


def _tail(text: str) -> str:
    lines = [ln.strip() for ln in text.splitlines() if ln.strip() and "@@AP" not in ln]
    lines = [ln for ln in lines if not ln.startswith("==")] or lines
    return " | ".join(lines[-_TAIL_LINES:])[:400] or "no output"


def checkout_env(root: Path = REPO_ROOT) -> dict[str, str]:
    """This process's environment with ``root`` first on ``PYTHONPATH``: a child process (the
    runner, the CUPTI worker) imports this checkout's package whether installed or not."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (str(root), env.get("PYTHONPATH")) if p)
    return env


def _run(command: list[str], timeout_s: float, cwd: Path) -> _Run:
    env = checkout_env(cwd)
    start = time.perf_counter()
    log.info("running %s", " ".join(command))
    proc = subprocess.Popen(
        command,
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        errors="replace",
        start_new_session=True,
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
        timed_out = False
    except subprocess.TimeoutExpired:
        os.killpg(proc.pid, signal.SIGKILL)
        out, err = proc.communicate()
        timed_out = True
    return _Run(out, err, proc.returncode, timed_out, time.perf_counter() - start, timeout_s)


class NcuProfiler(Profiler):
    """Collects ncu groups (``MetricGroup.profiler == "ncu"``) on the local GPU."""

    name = "ncu"

    def __init__(self, options: NcuOptions | None = None, device: str = "") -> None:
        self.options = options or NcuOptions()
        self.device = device

    def available(self) -> bool:
        """True when the ncu executable is on PATH."""
        return shutil.which(self.options.ncu) is not None

    def estimated_startup_s(self) -> float:
        return startup_s("ncu")

    def command(
        self, groups: Sequence[MetricGroup], nvtx_include: str, problems_file: Path, report: Path
    ) -> list[str]:
        """The ncu command line that profiles ``groups`` over the runner."""
        opts = self.options
        args = [opts.ncu, "--clock-control", opts.clock_control, "--replay-mode", opts.replay_mode]
        args += ["--nvtx", "--nvtx-include", nvtx_include]
        if len(groups) == 1 and groups[0].name.startswith(SET_PREFIX):
            args += ["--set", groups[0].name.removeprefix(SET_PREFIX)]
        else:
            sections = dict.fromkeys(s for g in groups for s in g.sections)
            for section in sections:
                args += ["--section", section]
        metrics = dict.fromkeys([DURATION, *(m for g in groups for m in g.metrics)])
        args += ["--metrics", ",".join(metrics)]
        if opts.launches_per_config:
            args += ["--filter-mode", "per-launch-config"]
            args += ["--launch-count", str(opts.launches_per_config)]
        args += [*opts.extra_args, "-o", str(report.with_suffix("")), "--force-overwrite"]
        args += [opts.python, "-m", RUNNER_MODULE, "--problems", str(problems_file)]
        if opts.launches_per_config:  # warm-ups and a priming kernel would use up the count
            return [*args, "--warmup", "0", "--repeats", str(opts.repeats)]
        args += ["--prime-range", f"{opts.range_prefix}0"]
        return [*args, "--warmup", str(opts.warmup), "--repeats", str(opts.repeats)]

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        """Profile ``problem`` with ``groups`` in one ncu run (raises ``ProfilerError``).

        With ``limit_s`` the run is killed when it takes longer; the groups are then in
        ``Profile.cut`` and the seconds spent are charged.
        """
        if not groups:
            return Profile(problem_hash=problem.content_hash, device=self.device)
        timeout_s = self.options.timeout_s if limit_s is None else max(float(limit_s), 0.0)
        started = time.perf_counter()
        try:
            result = self._batch([problem], groups, timeout_s)
        except ProfilerError:
            if limit_s is None or time.perf_counter() - started < timeout_s:
                raise
            result = BatchResult(failures={problem.content_hash: "timed out"})
        key = problem.content_hash
        spent = time.perf_counter() - started
        if key in result.failures and limit_s is not None and spent >= timeout_s:
            log.info("ncu on %s stopped at its limit of %.3g s", problem.name, timeout_s)
            return cut_profile(problem, groups, spent, self.name)
        if key in result.failures:
            raise ProfilerError(f"ncu on {problem.name}: {result.failures[key]}")
        if key not in result.profiles:
            raise ProfilerError(f"ncu on {problem.name}: the profiled program did not run")
        profile = result.profiles[key]
        profile.startup_s = max(result.wall_s - profile.cost_s, 0.0)
        profile.cost_s = result.wall_s
        return profile

    def collect_many(
        self, problems: Sequence[Problem], groups: Sequence[MetricGroup]
    ) -> BatchResult:
        """Profile several problems in one ncu run, each in its own NVTX range.

        Raises ``ProfilerError`` only when the run as a whole cannot work (ncu missing, counters
        not permitted, the runner failing before any problem); a problem's own failure lands in
        ``BatchResult.failures``.
        """
        unique = list({p.content_hash: p for p in problems}.values())
        return self._batch(unique, groups, self.options.timeout_s * len(unique))

    def _batch(
        self, unique: list[Problem], groups: Sequence[MetricGroup], timeout_s: float
    ) -> BatchResult:
        """One ncu run over ``unique`` problems, killed after ``timeout_s``."""
        self._check_groups(groups)
        if shutil.which(self.options.ncu) is None:
            raise ProfilerError(
                f"ncu (Nsight Compute) not found as {self.options.ncu!r}: install it or fix PATH"
            )
        if self.options.launches_per_config and len(unique) > 1:
            # ncu's launch count spans the process: a second problem's launches of a shape the
            # first one used would be past it. One run per problem.
            per = timeout_s / len(unique)
            return _combine([self._batch([p], groups, per) for p in unique])
        prefix = self.options.range_prefix
        ranges = {f"{prefix}{i}": p for i, p in enumerate(unique, start=1)}
        include = f"regex:{prefix}[0-9]+/"  # the problems' ranges and the priming range 0
        with tempfile.TemporaryDirectory(prefix="autoprofiler-ncu-") as tmp:
            problems_file = Path(tmp) / "problems.jsonl"
            problems_file.write_text(
                "".join(json.dumps({**p.to_dict(), "range": r}) + "\n" for r, p in ranges.items())
            )
            report = Path(tmp) / "report.ncu-rep"
            run = _run(self.command(groups, include, problems_file, report), timeout_s, REPO_ROOT)
            table, import_s = self._import(report, run)
        return self._result(ranges, groups, run, table, import_s)

    def _check_groups(self, groups: Sequence[MetricGroup]) -> None:
        foreign = [g.name for g in groups if g.profiler != self.name]
        if foreign:
            raise ProfilerError(f"ncu cannot collect {', '.join(foreign)}: not ncu groups")

    def _import(self, report: Path, run: _Run) -> tuple[NcuTable | None, float]:
        """Read the report ncu wrote; None when there is none (nothing captured, or killed)."""
        _check_run(run)
        if not report.exists():
            return None, 0.0
        command = [self.options.ncu, "--import", str(report), "--csv", "--page", "raw"]
        imported = _run(command, self.options.timeout_s, REPO_ROOT)
        if imported.returncode != 0 or imported.timed_out:
            raise ProfilerError(f"ncu --import failed: {_tail(imported.stderr + imported.stdout)}")
        return parse_raw_csv(imported.stdout), imported.wall_s

    def _result(
        self,
        ranges: dict[str, Problem],
        groups: Sequence[MetricGroup],
        run: _Run,
        table: NcuTable | None,
        import_s: float,
    ) -> BatchResult:
        events = parse_events(run.stderr)
        ready = next(e for e in events if e.get("event") == "ready")
        result = BatchResult(
            wall_s=run.wall_s + import_s,
            device=self.device or device_key(str(ready.get("device", ""))),
        )
        kernels_of = split_by_range(table, ranges) if table else {r: [] for r in ranges}
        passes: dict[int, int] = {}
        if table:
            log_text = run.stdout + run.stderr
            counts = kernel_passes(table.kernels, log_text)
            passes = {id(k): n for k, n in zip(table.kernels, counts, strict=True)}
        seen: dict[str, dict[str, list[dict]]] = {r: {} for r in ranges}
        for event in events:
            if event.get("range") in seen:
                seen[event["range"]].setdefault(event["event"], []).append(event)
        for name, problem in ranges.items():
            key, events_of = problem.content_hash, seen[name]
            outcome = _outcome(events_of, run, table is not None, bool(kernels_of[name]))
            if outcome == "not_run":
                result.not_run.append(key)
            elif outcome != "ok":
                result.failures[key] = outcome
            else:
                in_range = sum(float(e.get("seconds", 0.0)) for e in events_of["step"])
                kernels = kernels_of[name]
                profile = self._profile(
                    problem, groups, kernels, table, in_range, sum(passes[id(k)] for k in kernels)
                )
                profile.device = result.device
                result.profiles[key] = profile
        in_range_total = sum(
            float(e.get("seconds", 0.0)) for e in events if e.get("event") == "step"
        )
        build_times = [float(e.get("build_s", 0.0)) for e in events if e.get("event") == "built"]
        overhead = max(result.wall_s - in_range_total - sum(build_times), 0.0)
        result.startup_s = overhead + (statistics.median(build_times) if build_times else 0.0)
        return result

    def _profile(
        self,
        problem: Problem,
        groups: Sequence[MetricGroup],
        kernels: list[KernelRow],
        table: NcuTable,
        in_range_s: float,
        passes: int,
    ) -> Profile:
        def group_of(metric: str) -> str:
            owner = next((g for g in groups if group_yields(g, metric)), groups[0])
            return owner.name

        forwards = self.options.repeats
        seconds = shares(in_range_s, [g.cost_s for g in groups])
        group_passes = shares(float(passes), [g.replay_passes for g in groups])
        notes = []
        if self.options.launches_per_config:
            notes.append(
                f"ncu sampled the first {self.options.launches_per_config} launches of each"
                f" launch configuration ({len(kernels)} launches profiled): kernel counts and"
                " aggregates cover those launches, not the whole forward"
            )
        return Profile(
            problem_hash=problem.content_hash,
            metrics=aggregate(kernels, table.units, group_of, forwards),
            kernels=summarize_kernels(kernels, table.units, forwards=forwards),
            groups=[g.name for g in groups],
            group_costs={
                g.name: GroupCost(seconds=s, replay_passes=round(p))
                for g, s, p in zip(groups, seconds, group_passes, strict=True)
            },
            cost_s=in_range_s,
            replay_passes=passes,
            notes=notes,
        )


def _combine(results: Sequence[BatchResult]) -> BatchResult:
    """One result of several runs: their profiles, failures and seconds; the median start-up."""
    combined = BatchResult(
        wall_s=sum(r.wall_s for r in results),
        startup_s=statistics.median(r.startup_s for r in results),
        device=next((r.device for r in results if r.device), ""),
    )
    for result in results:
        combined.profiles.update(result.profiles)
        combined.failures.update(result.failures)
        combined.not_run.extend(result.not_run)
    return combined


def _died(run: _Run) -> str:
    return f"the runner died (exit {run.returncode}): {_tail(run.stderr)}"


def _check_run(run: _Run) -> None:
    """Raise for failures of the run as a whole: no counter permission, or no program started."""
    text = run.stdout + run.stderr
    if "ERR_NVGPUCTRPERM" in text:
        check_output(text)
    if any(e.get("event") == "ready" for e in parse_events(run.stderr)):
        return
    if run.timed_out:
        raise ProfilerError(f"ncu timed out after {run.limit_s:.0f} s before the program started")
    check_output(text)
    raise ProfilerError(f"the profiled program failed before any problem ran: {_tail(text)}")


def _outcome(events: dict[str, list[dict]], run: _Run, has_table: bool, has_kernels: bool) -> str:
    """``ok``, ``not_run`` or a one-line failure reason for one problem of a run."""
    if "fail" in events:
        return str(events["fail"][0].get("error", "failed"))
    if "begin" not in events:
        return "not_run"
    if "step" not in events or ("end" not in events and run.timed_out):
        return f"timed out after {run.limit_s:.0f} s" if run.timed_out else _died(run)
    if not has_table and run.returncode != 0:
        return "not_run"  # the report was lost to a crash elsewhere in the run: retry
    if not has_kernels:
        return "no CUDA kernel captured in its NVTX range (the forward ran no GPU kernel)"
    return "ok"
