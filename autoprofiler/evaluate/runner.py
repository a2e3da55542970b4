"""``evaluate()``: the trusted side of an evaluation.

It draws the seeds, gets the reference's timings from the trusted reference process (or the
store), runs the candidate in a process of its own under the containment supervisor with time
limits by phase, measures the candidate's timing phase with its own clock, and has trusted code
(:mod:`~autoprofiler.evaluate.verdict`) make the verdict from the raw data handed over. The
static checks run here too, where the candidate cannot reach them.
"""

from __future__ import annotations

import contextlib
import fcntl
import functools
import getpass
import json
import logging
import os
import re
import secrets
import select
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path

from autoprofiler.evaluate.checks import scan_source
from autoprofiler.evaluate.config import EVALUATOR_VERSION, EvalConfig
from autoprofiler.evaluate.containment import supervised_command
from autoprofiler.evaluate.forkserver import (
    ForkedCandidate,
    ForkServerError,
    ZygotePool,
    ZygoteRefused,
)
from autoprofiler.evaluate.inputs import TrialSeeds
from autoprofiler.evaluate.interpreter import python_command
from autoprofiler.evaluate.output_files import size_limit
from autoprofiler.evaluate.recorded import replay_evaluation
from autoprofiler.evaluate.reference import (
    ProblemReference,
    ReferenceError,
    ReferencePool,
    SlabOffer,
)
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding, TimingStats
from autoprofiler.evaluate.sandbox import exit_status, sandbox_command
from autoprofiler.evaluate.timing import LoopRecord
from autoprofiler.evaluate.verdict import (
    Verdict,
    compiled_reference_verdict,
    is_unstable,
    trial_stats,
)
from autoprofiler.problem import Problem, source_hash
from autoprofiler.store import Store, content_key

log = logging.getLogger(__name__)

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
LOG_TAIL_LINES = 6
EXIT_GRACE_S = 30.0  # how long a worker that reported its verdict may take to leave
SUPERVISOR_GRACE_S = 6.0  # the supervisor's sweep takes at most 5 s
# Check every timed call's output while they add up to no more than this; else a sample.
CHECK_ALL_TIMED_BYTES = 256 * 2**20
TIMED_SAMPLE = 4
SHARED_MEMORY = "/dev/shm"
OUTPUT_DISK_HEADROOM_BYTES = 2 * 2**30  # left free on the work folder's disk
POLL_S = 0.2
# The stage that starts at each mark of a candidate's run (its status words, and the runner's
# "began" before starting it): the stages of ``EvalResult.stages_s``.
STAGE_FROM_MARK = {
    "began": "start",  # fork or spawn, the process's set-up and its CUDA context
    "device": "problem",  # the problem's module run
    "compile": "build",  # the candidate imported and constructed
    "built": "first_call",  # its first forward (JIT compiles, autotuning, lazy set-up)
    "run": "correctness",  # the other correctness trials and their outputs handed over
    "ready": "timing",  # the timing phase, inputs pool included
    "timed": "handover",  # the asked timed outputs, the second shape, the report
    "done": "exit",  # the process gone, and every process it started
}
# Folders the worker writes to besides its work folder, by default inside it. Without a
# sandbox, variables the user set are kept and Inductor keeps its shared cache (compiles are
# reused across candidates), except that a candidate's extension folder is always its own
# (under the user's, when one is named): in one shared folder, two candidates that call their
# extensions by the same name build over each other, and the one that waits on the other's
# build lock then loads the other's library (seen on the H100: an ImportError for a library
# the other's failed build never made). In a sandbox only the work folder is writable, so
# every one of them is forced into it (torch.compile then starts cold). TMPDIR is the work
# folder's always: a candidate's temporary files are its own (Triton builds its launcher in a
# temporary folder: in /tmp, every Triton candidate on the H200 was flagged
# writes_outside_workdir).
WORK_FOLDERS = {
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TRITON_CACHE_DIR": "triton_cache",
    "TORCHINDUCTOR_CACHE_DIR": "inductor_cache",
}
TEMPORARY_FOLDER = {"TMPDIR": "tmp"}
SANDBOX_FOLDERS = {**WORK_FOLDERS, **TEMPORARY_FOLDER}
EXTENSIONS = "TORCH_EXTENSIONS_DIR"
# torch.utils.cpp_extension's baton: a file in an extension's build folder while a process
# builds it; another process that finds it waits, with no limit, until it is gone.
EXTENSION_BUILD_LOCK = "lock"
OUT_OF_MEMORY_MARKERS = ("out of memory", "memoryerror", "allocate memory")
# A correct candidate this much faster than the reference (or the torch.compile baseline)
# has it timed again (once per reference process, problem and kind; see confirm_reference).
CONFIRM_SPEEDUP = 2.0
UNSTABLE_LABELS = {"eager": "reference", "compile": "compile"}  # as EvalResult.unstable says
REFERENCES = ReferencePool()
ZYGOTES = ZygotePool()


def default_work_root() -> Path:
    """Where candidate folders and extension builds live (``AUTOPROFILER_HOME`` overrides)."""
    base = os.environ.get("AUTOPROFILER_HOME") or Path(tempfile.gettempdir()) / "autoprofiler"
    return Path(base)


def candidate_folder(root: Path, candidate_source: str) -> tuple[Path, Path]:
    """The candidate's own folder under ``root`` (its builds and caches persist there) and its
    source file, written."""
    work_dir = root / "candidates" / source_hash(candidate_source)
    work_dir.mkdir(parents=True, exist_ok=True)
    candidate_path = work_dir / "candidate.py"
    candidate_path.write_text(candidate_source, encoding="utf-8")
    return work_dir, candidate_path


@functools.cache
def cuda_arch_list() -> str | None:
    """The visible GPUs' compute capability (``"9.0"``) from ``nvidia-smi``, without a CUDA
    context here; None when it cannot be told or they differ. Builds in the build lane and
    in the timed run then compile for the same architecture (the same ninja file)."""
    try:
        done = subprocess.run(
            ["nvidia-smi", "--query-gpu=index,compute_cap", "--format=csv,noheader"],
            capture_output=True, text=True, timeout=30, check=True,
        )  # fmt: skip
    except (OSError, subprocess.SubprocessError):
        return None
    caps = dict(
        line.replace(" ", "").split(",", 1) for line in done.stdout.splitlines() if "," in line
    )
    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible and all(v.strip().isdigit() for v in visible.split(",")):
        caps = {i: c for i, c in caps.items() if i in {v.strip() for v in visible.split(",")}}
    return next(iter(caps.values())) if len(set(caps.values())) == 1 else None


_device_cache: dict[str, str] = {}


class NoGPUError(RuntimeError):
    """A CUDA evaluation asked for on a machine without a usable CUDA GPU (one line)."""


def device_name(device: str) -> str:
    """The label results are cached under: ``cuda:<GPU name>`` or ``cpu``; raises
    :class:`NoGPUError` for ``cuda`` where torch sees no CUDA GPU."""
    if device not in _device_cache:
        import torch

        if device.startswith("cuda") and not torch.cuda.is_available():
            raise NoGPUError(
                f"device {device!r} asked for, but torch sees no CUDA GPU here "
                "(use --device cpu or auto, or replay recorded evaluations)"
            )
        use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
        _device_cache[device] = f"cuda:{torch.cuda.get_device_name(0)}" if use_cuda else "cpu"
    return _device_cache[device]


def on_gpu(config: EvalConfig) -> bool:
    """Whether ``config``'s evaluations run on a CUDA GPU."""
    return device_name(config.device).startswith("cuda")


def evaluation_device(config: EvalConfig) -> str:
    """The device label ``config``'s results are (or were, when replaying) produced on."""
    return config.replay_device or device_name(config.device)


def evaluation_key(problem: Problem, candidate_hash: str, config: EvalConfig) -> str:
    """The store key of an evaluation: problem, candidate, device label (the replayed one when
    replaying: no GPU is asked for its name), configuration, torch and evaluator versions."""
    import torch

    return content_key(
        problem.content_hash,
        candidate_hash,
        evaluation_device(config),
        config.config_hash,
        torch.__version__,
        EVALUATOR_VERSION,
    )


def evaluate(
    problem: Problem,
    candidate_source: str,
    config: EvalConfig | None = None,
    *,
    store: Store | None = None,
    use_cache: bool = True,
    work_root: Path | None = None,
    retime_reference: bool = False,
) -> EvalResult:
    """Check and time ``candidate_source`` (defining ``ModelNew``) against ``problem``.

    The candidate runs in a fresh process of its own, under a supervisor that leaves none of
    its processes behind; the reference runs in a trusted process that never imports candidate
    code, kept warm across candidates of the same problem. The verdict is made by trusted code
    from the raw outputs and times the candidate's process handed over, once it is gone.
    Whatever the candidate does (raise, crash, hang, exhaust memory, forge its report) ends as
    a failed or refused ``EvalResult``; the caller never crashes or hangs. With a store, a
    result for the same problem, candidate, device, configuration and evaluator version is
    reused, and the reference's timings are stored per problem, device and settings (timed
    again with ``retime_reference``, the drift logged; and once a run after a candidate first
    beats them by more than ``CONFIRM_SPEEDUP``, the faster timing kept). A sandbox that
    cannot be used raises :class:`~autoprofiler.evaluate.sandbox.SandboxError`.

    With ``config.replay_device`` set, nothing runs: the result recorded on that device is
    returned (``autoprofiler.evaluate.recorded``), or a ``NOT_RECORDED`` failure.
    """
    config = config or EvalConfig()
    candidate_hash = source_hash(candidate_source)
    known = _known_result(problem, candidate_source, config, store, use_cache)
    if known is not None:
        return known
    began = time.perf_counter()
    root = work_root or default_work_root()
    work_dir, candidate_path = candidate_folder(root, candidate_source)
    if config.sandbox:
        sandbox_command(config.sandbox, work_dir)  # refuse an unusable sandbox before any work
    try:
        reference = REFERENCES.get(problem, config, _reference_env(config), root)
        timings = reference_timings(reference, problem, config, store, retime_reference)
    except ReferenceError as exc:
        result = EvalResult(problem_hash=problem.content_hash, candidate_hash=candidate_hash)
        result.failure_kind, result.failure_message = FailureKind.REFERENCE_ERROR, str(exc)
        result.stages_s = {"reference": time.perf_counter() - began}
    else:
        reference_s = time.perf_counter() - began
        judge = functools.partial(
            _judge_candidate,
            problem, candidate_hash, candidate_path, config, work_dir, reference, timings,
        )  # fmt: skip
        result = judge_beside_slab(judge, problem)
        result.stages_s = {"reference": reference_s, **result.stages_s}
        confirm_reference(result, reference, problem, config, store, timings)
    _merge_static_findings(result, scan_source(candidate_source, problem.source))
    return _finished(result, problem, candidate_source, config, store, began)


def _known_result(
    problem: Problem, candidate_source: str, config: EvalConfig, store: Store | None, cached: bool
) -> EvalResult | None:
    """The result that needs no run: the recorded one when replaying, else (``cached``) the
    stored one; None when the candidate must be judged."""
    if config.replay_device is not None:
        return replay_evaluation(problem, source_hash(candidate_source), config, store)
    if store is not None and cached:
        return cached_evaluation(store, problem, candidate_source, config)
    return None


def _finished(
    result: EvalResult,
    problem: Problem,
    candidate_source: str,
    config: EvalConfig,
    store: Store | None,
    began: float,
) -> EvalResult:
    """``result`` stamped with the evaluator's version and its wall time, and stored."""
    result.evaluator_version = EVALUATOR_VERSION
    result.wall_s = time.perf_counter() - began
    if store is not None:
        store_evaluation(store, problem, candidate_source, config, result)
    return result


def evaluate_compiled_reference(
    problem: Problem,
    candidate_source: str,
    config: EvalConfig | None = None,
    *,
    store: Store | None = None,
    use_cache: bool = True,
    work_root: Path | None = None,
    retime_reference: bool = False,
) -> EvalResult:
    """The verdict on ``candidate_source``, autoprofiler's own torch.compile of the reference
    (the rule rewriter's ``compile``), made in the trusted reference process alone: no
    candidate process runs. The compiled reference's outputs are compared there with the
    reference's on the correctness trials' inputs (``compile_check_seeds``) and it is timed
    as the ``--compile-baseline`` is, both stored per problem, device and settings, so a
    problem pays for its torch.compile once. Only for code autoprofiler writes itself: the
    source is trusted to be torch.compile of the reference, never run. Cached and replayed
    as ``evaluate``'s results are; a torch.compile that raises is a ``RUNTIME_ERROR``.
    """
    config = replace(config or EvalConfig(), time_compile_baseline=True)
    candidate_hash = source_hash(candidate_source)
    known = _known_result(problem, candidate_source, config, store, use_cache)
    if known is not None:
        return known
    began = time.perf_counter()
    root = work_root or default_work_root()
    eager_only = replace(config, time_compile_baseline=False)
    failed = (FailureKind.REFERENCE_ERROR, "the reference")  # what a ReferenceError means now
    try:
        reference = REFERENCES.get(problem, config, _reference_env(config), root)
        reference_timings(reference, problem, eager_only, store, retime_reference)
        failed = (FailureKind.RUNTIME_ERROR, "torch.compile of the reference")
        timings = reference_timings(reference, problem, config, store, retime_reference)
    except ReferenceError as exc:
        result = EvalResult(problem_hash=problem.content_hash, candidate_hash=candidate_hash)
        result.failure_kind, result.failure_message = failed[0], f"{failed[1]}: {exc}"
    else:
        device = reference.device
        result = compiled_reference_verdict(problem, candidate_hash, config, device, timings)
    return _finished(result, problem, candidate_source, config, store, began)


def cached_evaluation(
    store: Store, problem: Problem, candidate_source: str, config: EvalConfig
) -> EvalResult | None:
    """The stored result of this evaluation (``from_cache`` set), or None."""
    key = evaluation_key(problem, source_hash(candidate_source), config)
    cached = store.get_evaluation(key)
    if cached is None:
        return None
    result = EvalResult.from_dict(cached)
    result.from_cache = True
    return result


def store_evaluation(
    store: Store,
    problem: Problem,
    candidate_source: str,
    config: EvalConfig,
    result: EvalResult,
    key: str | None = None,
) -> None:
    """Write ``result`` (evaluated here or by an executor's worker, whose ``evaluation_key``
    is ``key``) with its problem and candidate, as ``evaluate`` does. (The reference's timings
    are stored by ``reference_timings``, where the evaluation had the store.)"""
    candidate_hash = source_hash(candidate_source)
    store.put_problem(problem)
    store.put_candidate(candidate_hash, problem.content_hash, candidate_source, "user")
    store.put_evaluation(
        key or evaluation_key(problem, candidate_hash, config),
        problem.content_hash,
        candidate_hash,
        result.device or device_name(config.device),
        config.config_hash,
        result.to_dict(),
    )


def _baseline_key(problem: Problem, config: EvalConfig, kind: str) -> str:
    import torch

    return content_key(
        problem.content_hash,
        device_name(config.device),
        torch.__version__,
        config.config_hash,
        EVALUATOR_VERSION,
        kind,
    )


def reference_timings(
    reference: ProblemReference,
    problem: Problem,
    config: EvalConfig,
    store: Store | None,
    retime: bool = False,
) -> dict[str, dict]:
    """The reference's timing records by kind (``eager``, and ``compile`` when the config asks
    for the torch.compile baseline): from the warm process, else the store, else timed now in
    the trusted process (once more when unstable) and stored. ``retime`` times them again,
    once per reference process (a run), and logs the drift from what was stored."""
    kinds = ["eager", *(["compile"] if config.time_compile_baseline else [])]
    timings = {}
    for kind in kinds:
        key = _baseline_key(problem, config, kind)
        stored = store.get_baseline(key) if store is not None else None
        if kind == "compile" and stored is not None and "check" not in stored:
            stored = None  # stored before torch.compile's outputs were checked: timed again
        known = reference.record(kind) or stored
        timed_now = known is None or (retime and not reference.timed_here(kind))
        if timed_now:
            log.info("%s: timing the %s reference", problem.name, kind)
            fresh = _time_reference(reference, kind, config)
            if known is not None:
                drift = fresh["stats"]["median_ms"] / known["stats"]["median_ms"]
                log.warning(
                    "%s: %s reference re-timed, %.3fx of the stored median",
                    problem.name, kind, drift,
                )  # fmt: skip
                fresh["drift"] = drift
            known = fresh
        if store is not None and (stored is None or known is not stored):
            store.put_baseline(key, problem.content_hash, reference.device, kind, known)
        reference.keep(kind, known, timed_here=timed_now)
        timings[kind] = known
    return timings


def confirm_reference(
    result: EvalResult,
    reference: ProblemReference,
    problem: Problem,
    config: EvalConfig,
    store: Store | None,
    timings: dict[str, dict],
) -> None:
    """Time the reference (and the torch.compile baseline, when it was timed) again when
    ``result`` beats it by more than ``CONFIRM_SPEEDUP``, once per reference process, problem
    and kind; keep (and store) the faster of the two timings and make ``result`` use it.

    A busy machine only ever slows a timing down. A reference timed in a busy moment, here or
    on the day it was stored, would credit every later candidate with speed it did not earn;
    the first large win of a run is where that shows, and one more timing settles it.
    """
    wins = {"eager": result.speedup, "compile": result.speedup_vs_compile}
    for kind, speedup in wins.items():
        if speedup is None or speedup <= CONFIRM_SPEEDUP or not reference.claim_confirmation(kind):
            continue
        fresh = _faster_timing(reference, problem, config, kind, timings[kind], speedup)
        if fresh is None:
            continue
        if store is not None:
            key = _baseline_key(problem, config, kind)
            store.put_baseline(key, problem.content_hash, reference.device, kind, fresh)
        timings[kind] = fresh
        label = UNSTABLE_LABELS[kind]
        if kind == "eager":
            result.reference = TimingStats(**fresh["stats"])
        else:
            result.compiled_reference = TimingStats(**fresh["stats"])
        result.unstable = [u for u in result.unstable if u != label]
        if fresh["unstable"]:
            result.unstable.insert(0, label)


def _faster_timing(
    reference: ProblemReference,
    problem: Problem,
    config: EvalConfig,
    kind: str,
    known: dict,
    speedup: float,
) -> dict | None:
    """A new timing of ``kind``, kept in the reference process, when it is faster than
    ``known``; None when it is not, or could not be made (logged either way)."""
    try:
        fresh = _time_reference(reference, kind, config)
    except ReferenceError as exc:
        log.warning("%s: the %s reference could not be timed again: %s", problem.name, kind, exc)
        return None
    drift = fresh["stats"]["median_ms"] / known["stats"]["median_ms"]
    if drift >= 1.0:
        log.info("%s: %s reference confirmed after a %.2fx win (%.3fx)",
                 problem.name, kind, speedup, drift)  # fmt: skip
        return None
    log.warning(
        "%s: after a %.2fx win the %s reference was timed again at %.3fx of the median in use;"
        " the faster one is kept",
        problem.name, speedup, kind, drift,
    )  # fmt: skip
    fresh["drift"] = drift
    reference.keep(kind, fresh, timed_here=True)
    return fresh


def compile_check_seeds(config: EvalConfig) -> list[int]:
    """The inputs torch.compile of the reference is checked on against the reference: as many
    as a candidate's correctness trials (at least one), from the configured seed."""
    return [config.seed + i for i in range(max(1, config.correctness_trials))]


def _time_reference(reference: ProblemReference, kind: str, config: EvalConfig) -> dict:
    """One trusted timing of ``kind``, timed a second time when the first was unstable."""
    limit = config.compile_timeout_s + config.run_timeout_s
    check = compile_check_seeds(config)
    for attempt in range(2):
        reply = reference.time(kind, secrets.randbits(62), config.loop_settings(), limit, check)
        stats = trial_stats(LoopRecord.from_dict(reply["record"]))
        unstable = is_unstable(stats)
        if not unstable or attempt:
            return {**reply, "stats": asdict(stats), "unstable": unstable}
        log.info("the %s reference's trials spread widely; timing it again", kind)
    raise AssertionError("unreachable")


def _merge_static_findings(result: EvalResult, findings: list[Finding]) -> None:
    """Static findings first, then the worker's; a rejecting one fails a correct result."""
    worker_findings = result.findings
    result.findings = []
    for finding in [*findings, *worker_findings]:
        result.add_finding(finding)
    result.apply_rejections()


def _user_cache(name: str) -> str | None:
    """``NAME_USER`` in the temporary folder: a cache every run of this user shares (None
    when the user id has no name)."""
    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except (KeyError, OSError):  # no name for this user id
        return None
    return str(Path(tempfile.gettempdir()) / f"{name}_{user}")


def _shared_inductor_cache() -> str | None:
    """Inductor's default cache folder (where it also keeps precompiled headers)."""
    return _user_cache("torchinductor")


def bytecode_cache(env: dict[str, str]) -> None:
    """Have the candidates' processes (its zygote, its build run, its timed run) keep the
    bytecode of what they import in a folder this user's runs share (``PYTHONPYCACHEPREFIX``,
    unless the caller names one), written even where ``PYTHONDONTWRITEBYTECODE`` is set.
    Where an installation has no usable bytecode of its own, every process compiled each
    module it imports from source: on the H200, sympy's import took 3-4 s of every Triton
    candidate's first call that way (docs/results/evaluator_throughput.md)."""
    folder = _user_cache("autoprofiler_bytecode")
    if "PYTHONPYCACHEPREFIX" not in env and folder is not None:
        env["PYTHONPYCACHEPREFIX"] = folder
        env.pop("PYTHONDONTWRITEBYTECODE", None)


# What a sandboxed candidate's fresh interpreter imports before its own code: the candidate
# side and, for torch.compile candidates, the compiler's stack.
SANDBOX_BYTECODE_MODULES = (
    "torch",
    "torch.fx.experimental.symbolic_shapes",
    "autoprofiler.evaluate.candidate",
    "triton",
    "torch._dynamo",
    "torch._inductor.compile_fx",
    "torch._inductor.codecache",
)
_FILLERS: dict[str, subprocess.Popen] = {}  # sandboxed bytecode folder -> the process filling it


def sandboxed_bytecode(env: dict[str, str]) -> subprocess.Popen | None:
    """Have sandboxed candidates read bytecode from a folder of this user's that only trusted
    code writes (``PYTHONPYCACHEPREFIX``, unless the caller names one; the sandbox shows it
    read-only), and start, once per folder and process, the process that fills it: one that
    imports ``SANDBOX_BYTECODE_MODULES`` and no candidate code. Without it, each sandboxed
    candidate compiled every module from source where the installation ships no bytecode
    (13.5 s against 4.3 s on an H100 machine, ``benchmarks/bytecode_cache.py``). Returns the
    filling process (None: the caller's folder, or no name for this user)."""
    folder = _user_cache("autoprofiler_bytecode_sandboxed")
    if folder is None or "PYTHONPYCACHEPREFIX" in env:
        return None
    env["PYTHONPYCACHEPREFIX"] = folder
    filler = _FILLERS.get(folder)
    if filler is not None:
        filler.poll()  # reaped once done
    else:
        filler_env = {**os.environ, "PYTHONPYCACHEPREFIX": folder, "CUDA_VISIBLE_DEVICES": ""}
        filler_env["PYTHONPATH"] = env["PYTHONPATH"]
        filler_env.pop("PYTHONDONTWRITEBYTECODE", None)
        code = (
            "import importlib, sys\nfor name in sys.argv[1:]:\n    try:\n"
            "        importlib.import_module(name)\n    except Exception:\n        pass\n"
        )
        log.info("filling the sandboxed candidates' bytecode folder %s", folder)
        filler = subprocess.Popen(
            python_command(code, *SANDBOX_BYTECODE_MODULES),
            env=filler_env,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
            start_new_session=True,
        )
        _FILLERS[folder] = filler
    return filler


def worker_env(work_dir: Path, config: EvalConfig) -> tuple[dict[str, str], list[str]]:
    """The worker's environment, and the folders it may write to."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    if config.sandbox:
        env.update({variable: str(work_dir / f) for variable, f in SANDBOX_FOLDERS.items()})
        sandboxed_bytecode(env)
    else:
        shared = {"TORCHINDUCTOR_CACHE_DIR": _shared_inductor_cache()}
        for variable, folder in WORK_FOLDERS.items():
            env.setdefault(variable, shared.get(variable) or str(work_dir / folder))
        if os.environ.get(EXTENSIONS):  # the user's folder: the candidate's own inside it
            env[EXTENSIONS] = str(Path(os.environ[EXTENSIONS]) / work_dir.name)
        env.update({variable: str(work_dir / f) for variable, f in TEMPORARY_FOLDER.items()})
        bytecode_cache(env)
    folders = [env[v] for v in SANDBOX_FOLDERS]
    if env.get("PYTHONPYCACHEPREFIX"):
        folders.append(env["PYTHONPYCACHEPREFIX"])
    for folder in folders:
        Path(folder).mkdir(parents=True, exist_ok=True)
    if on_gpu(config) and cuda_arch_list():
        env.setdefault("TORCH_CUDA_ARCH_LIST", cuda_arch_list())
    if device_name(config.device) == "cpu":
        # With no GPU, Triton kernels run in Triton's interpreter, and Inductor compiles in
        # the worker itself rather than in a pool of processes competing for the same cores.
        env.setdefault("TRITON_INTERPRET", "1")
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env, [str(work_dir), *folders]


@contextlib.contextmanager
def sole_run(work_dir: Path, env: dict[str, str]) -> Iterator[bool]:
    """Held around one run of the candidate in ``work_dir`` (its process started and stopped
    inside), on this host. Yields whether no other run of it was alive: then every extension
    build lock in its extension folder (``env``'s) is a dead run's, and is removed first. A
    build killed mid-way (a build run stopped at its limit or when the lane closed, a timed
    run stopped in its compile phase) leaves its lock behind, and every later run of that
    extension would otherwise wait on it until its own limit: a timeout verdict for a
    candidate that did nothing wrong. The exclusive lock that says "alone" is taken on a file
    beside the candidate's folder, and the kernel lets go of it when its holder dies."""
    with open(work_dir.with_name(f"{work_dir.name}.run-lock"), "ab") as held:
        try:
            fcntl.flock(held, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:  # another run of this candidate holds it: leave its lock be
            yield False
            return
        _remove_build_locks(Path(env[EXTENSIONS]))
        yield True  # closing the file lets go of the lock


def _remove_build_locks(extensions: Path) -> None:
    """Remove the build lock in each extension folder under ``extensions`` (symbolic links
    are not followed: the candidate may have made them)."""
    with contextlib.suppress(OSError), os.scandir(extensions) as entries:
        for entry in entries:
            if not entry.is_dir(follow_symlinks=False):
                continue
            try:
                os.unlink(os.path.join(entry.path, EXTENSION_BUILD_LOCK))
            except OSError:  # none there
                continue
            log.info("removed the build lock a stopped run left in %s", entry.path)


def _reference_env(config: EvalConfig) -> dict[str, str]:
    """The trusted reference process's environment: the caller's, CPU settings as a worker's."""
    env = dict(os.environ)
    if device_name(config.device) == "cpu":
        env.setdefault("TRITON_INTERPRET", "1")
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env


class NoRoomForOutputs(RuntimeError):
    """The candidate's outputs cannot cross on the host: no room for them (one line)."""


def _free_bytes(folder: Path) -> int:
    stats = os.statvfs(folder)
    return stats.f_bavail * stats.f_frsize


OUTPUTS_PREFIX = "autoprofiler-outputs-"  # then the pid of the process that judged the run


def sweep_abandoned_outputs(folder: Path) -> None:
    """Remove the output folders in ``folder`` left by runs whose judging process is gone
    (killed before it could clean up): in ``/dev/shm`` they hold memory until a reboot."""
    with contextlib.suppress(OSError):
        for entry in folder.iterdir():
            pid = entry.name.removeprefix(OUTPUTS_PREFIX).partition("-")[0]
            if not entry.name.startswith(OUTPUTS_PREFIX) or not pid.isdigit():
                continue
            try:
                os.kill(int(pid), 0)
            except ProcessLookupError:
                log.info("removing %s, left by a run that was killed", entry)
                shutil.rmtree(entry, ignore_errors=True)
            except PermissionError:  # another user's process, alive
                continue


def host_output_bytes(config: EvalConfig, output_bytes: int) -> int:
    """Bytes a run's outputs take when all cross on the host: the correctness trials', the
    second shape's (taken as large as the first), and the timed outputs' (all while they
    add up to ``CHECK_ALL_TIMED_BYTES``, else the sample)."""
    timed = max(CHECK_ALL_TIMED_BYTES, TIMED_SAMPLE * output_bytes)
    return (config.correctness_trials + 1) * output_bytes + timed


def _output_root(config: EvalConfig, work_dir: Path, need: int) -> Path:
    """Where the ``need`` bytes of the candidate's outputs that no GPU slab holds cross to the
    trusted side: shared memory (``/dev/shm``) when it has room for twice that, else the
    work folder (always under a sandbox, whose ``/dev/shm`` is its own). When the work
    folder's disk has no room for them either, :class:`NoRoomForOutputs`: a run that filled
    the disk would fail anyway, and take the store's disk with it."""
    shm = Path(SHARED_MEMORY)
    shm_free = 0
    if not config.sandbox and shm.is_dir() and os.access(shm, os.W_OK):
        sweep_abandoned_outputs(shm)
        shm_free = _free_bytes(shm)
        if shm_free >= 2 * need:
            return shm
    sweep_abandoned_outputs(work_dir)
    disk_free = _free_bytes(work_dir)
    if need and disk_free < need + OUTPUT_DISK_HEADROOM_BYTES:
        raise NoRoomForOutputs(
            f"its outputs ({need / 2**30:.1f} GiB) have no room to cross on the host: "
            f"{shm_free / 2**30:.1f} GiB free in {SHARED_MEMORY}, {disk_free / 2**30:.1f} GiB "
            "in the work folder"
        )
    return work_dir


def _draw_seeds(config: EvalConfig) -> TrialSeeds:
    """Fresh seeds, unpredictable to any candidate (``secrets``)."""
    draw = lambda: secrets.randbits(62)  # noqa: E731
    return TrialSeeds(tuple(draw() for _ in range(config.correctness_trials)), draw(), draw())


@dataclass
class _Exchange:
    """What the runner saw of one candidate's process: the phase that ran past its limit,
    the timing phase's wall seconds by this process's clock, the timed trials' count, and the
    timed outputs it asked for."""

    timed_out_in: str | None = None
    timing_phase_s: float | None = None
    trials: int = 0
    asked: list[int] = field(default_factory=list)
    marks: dict[str, float] = field(default_factory=dict)  # STAGE_FROM_MARK's, when first seen


def stage_seconds(marks: dict[str, float], ended: float) -> dict[str, float]:
    """Seconds per stage of a candidate's run from the times its marks were seen (by the
    runner's clock), the last stage ending at ``ended``. A diagnostic, never part of a
    verdict: the candidate writes the words, so only the clock is trusted."""
    ordered = sorted((at, name) for name, at in marks.items() if name in STAGE_FROM_MARK)
    stages: dict[str, float] = {}
    for (at, name), (until, _) in zip(ordered, [*ordered[1:], (ended, "")]):
        stage = STAGE_FROM_MARK[name]
        stages[stage] = stages.get(stage, 0.0) + max(until - at, 0.0)
    return stages


def judge_beside_slab(
    judge: Callable[[int | None], tuple[EvalResult, int]], problem: Problem
) -> EvalResult:
    """``judge(max_slab_bytes)``'s result (``judge`` returns it with the bytes of the output
    slab its run had, 0 for none). A candidate that ran out of memory beside an output slab
    (GPU memory the evaluator held for it) is judged again beside a slab of at most half
    that size, the rest of its outputs crossing on the host, and, out of memory there too,
    once more with no slab: the slab's memory is the evaluator's, not the candidate's, to
    answer for."""
    result, held = judge(None)
    earlier_s = 0.0
    for smaller in (lambda size: size // 2, lambda size: 0):
        if result.failure_kind is not FailureKind.OUT_OF_MEMORY or not held:
            break
        cap = smaller(held)
        log.info(
            "%s: the candidate ran out of GPU memory beside its %.1f GiB output slab; judging "
            "it again %s",
            problem.key,
            held / 2**30,
            f"beside one of at most {cap / 2**30:.1f} GiB" if cap else "with no slab",
        )
        earlier_s += sum(result.stages_s.values())
        result, held = judge(cap)
    if earlier_s:
        result.stages_s = {"first_run": earlier_s, **result.stages_s}
    return result


def _judge_candidate(
    problem: Problem,
    candidate_hash: str,
    candidate_path: Path,
    config: EvalConfig,
    work_dir: Path,
    reference: ProblemReference,
    timings: dict[str, dict],
    max_slab_bytes: int | None = None,
) -> tuple[EvalResult, int]:
    """The candidate's verdict from one run of its process, and the bytes of the GPU slab
    its outputs were handed over in (0: none); the slab holds at most ``max_slab_bytes``
    (0: no slab)."""
    prefix = sandbox_command(config.sandbox, work_dir) if config.sandbox else []
    run_id = f"{os.getpid()}-{time.monotonic_ns()}"  # runs of one candidate may overlap
    output_bytes = timings["eager"]["record"]["output_bytes"]
    slab = None
    offering = time.perf_counter()
    if max_slab_bytes != 0:
        slab = _offer_slab(config, reference, output_bytes, max_slab_bytes)
    offering_s = time.perf_counter() - offering
    host_bytes = host_output_bytes(config, output_bytes) if slab is None else slab.host_bytes
    try:
        root = _output_root(config, work_dir, host_bytes)
    except NoRoomForOutputs as exc:
        result = EvalResult(problem_hash=problem.content_hash, candidate_hash=candidate_hash)
        result.failure_kind, result.failure_message = FailureKind.OUT_OF_MEMORY, str(exc)
        if slab is not None:
            reference.free_slab(slab.slab_id, config.run_timeout_s)
        return result, 0
    output_dir = root / f"{OUTPUTS_PREFIX}{run_id}"
    output_dir.mkdir()
    report_path = work_dir / f"report-{run_id}.json"
    job_path = work_dir / f"job-{run_id}.json"
    env, write_roots = worker_env(work_dir, config)
    write_roots.append(str(output_dir))
    seeds = _draw_seeds(config)
    read_fd, write_fd = os.pipe()
    job = {
        "problem_source": problem.source,
        "candidate_path": str(candidate_path),
        "config": config.to_dict(),
        "seeds": {"correctness": list(seeds.correctness), "other_shape": seeds.other_shape},
        "loop": config.loop_settings(),
        "settings": timings["eager"]["settings"],
        "output_dir": str(output_dir),
        "output_limit_bytes": size_limit(output_bytes),
        "report_path": str(report_path),
        "status_fd": write_fd,
        "write_roots": write_roots,
        "parent_pid": None,  # the supervisor is its parent
    }
    if slab is not None:
        job["slab"] = slab.offer
    job_path.write_text(json.dumps(job), encoding="utf-8")
    log_path = work_dir / f"worker-{run_id}.log"
    began = time.perf_counter()
    exchange = _Exchange(marks={"began": began})
    with sole_run(work_dir, env):
        with open(log_path, "wb") as log_file:
            process = _start_candidate(prefix, job_path, work_dir, env, log_file.fileno(), write_fd)
        os.close(write_fd)
        try:
            _watch(process, read_fd, config, seeds, output_bytes, exchange)
        finally:
            os.close(read_fd)
            stop_process(process)
    gone = time.perf_counter()
    report = _read_report(report_path)
    comparing_s = freeing_s = 0.0
    try:
        if report is None:
            result = EvalResult(problem_hash=problem.content_hash, candidate_hash=candidate_hash)
            result.failure_kind, result.failure_message = _classify_death(
                exit_status(process.returncode), exchange.timed_out_in, config, _log_tail(log_path)
            )
            result.compiled = exchange.timed_out_in in ("run", "exit")
        else:
            slab_id, room = (slab.slab_id, slab.room) if slab is not None else (None, 1.0)
            verdict = Verdict(
                problem, candidate_hash, config, reference, timings, seeds, output_dir, slab_id,
                room,
            )  # fmt: skip
            result = verdict.judge(report, exchange.timing_phase_s, exchange.asked)
            comparing_s = verdict.comparing_s
    finally:
        if slab is not None:
            freeing = time.perf_counter()
            reference.free_slab(slab.slab_id, config.run_timeout_s)
            freeing_s = time.perf_counter() - freeing
        shutil.rmtree(output_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            log_path.replace(work_dir / "worker.log")  # the last run's log
    rest = time.perf_counter() - gone - comparing_s - freeing_s
    result.stages_s = {
        "slab_offer": offering_s,  # the reference process setting the output slab up
        **stage_seconds(exchange.marks, gone),
        "comparison": comparing_s,  # the reference process judging the outputs
        "slab_free": freeing_s,  # giving the output slab back
        "verdict": rest,  # the report read, the timings judged, the outputs' folder removed
    }
    return result, slab.size if slab is not None else 0


def _offer_slab(
    config: EvalConfig,
    reference: ProblemReference,
    output_bytes: int,
    max_bytes: int | None = None,
) -> SlabOffer | None:
    """A GPU slab for this run's outputs (CUDA, ``config.output_slab``, no sandbox: a sandbox's
    own process namespace keeps CUDA IPC out) of at most ``max_bytes``, with a slot per
    correctness trial, per timed output that may be asked for, and the second shape, as many
    as fit (the rest cross on the host); None: they all cross on the host."""
    if config.sandbox or not config.output_slab or not on_gpu(config):
        return None
    per_output = max(output_bytes, 1)
    timed = max(TIMED_SAMPLE, min(config.max_timing_trials, CHECK_ALL_TIMED_BYTES // per_output))
    return reference.offer_slab(config.correctness_trials, timed, config.run_timeout_s, max_bytes)


def _forking() -> bool:
    """Whether candidates are forked from warm zygotes (Linux; ``AUTOPROFILER_FORKSERVER=0``
    turns it off) rather than started afresh under the supervisor."""
    return sys.platform.startswith("linux") and os.environ.get("AUTOPROFILER_FORKSERVER") != "0"


def _start_candidate(
    prefix: list[str], job_path: Path, work_dir: Path, env: dict[str, str], log_fd: int,
    status_fd: int,
) -> subprocess.Popen | ForkedCandidate:  # fmt: skip
    """The candidate's process: forked from a warm zygote, or (under a sandbox, or with the
    fork server off) a fresh interpreter under the containment supervisor."""
    if not prefix and _forking():
        try:
            return ZYGOTES.start(job_path, work_dir, env, log_fd, status_fd)
        except ZygoteRefused as exc:  # the same refusal for every candidate: said once
            if not exc.reported:
                log.warning("%s; starting candidates afresh", exc)
                exc.reported = True
        except ForkServerError as exc:
            log.warning("%s; starting the candidate afresh", exc)
    command = [*prefix, sys.executable, "-m", "autoprofiler.evaluate.candidate", str(job_path)]
    return subprocess.Popen(
        supervised_command(command, (status_fd,)),
        cwd=work_dir,
        stdin=subprocess.PIPE,
        stdout=log_fd,
        stderr=subprocess.STDOUT,
        pass_fds=(status_fd,),
        env=env,
        start_new_session=True,
    )


def _watch(
    process: subprocess.Popen | ForkedCandidate,
    read_fd: int,
    config: EvalConfig,
    seeds: TrialSeeds,
    output_bytes: int,
    exchange: _Exchange,
) -> None:
    """Follow the candidate's phases until it exits, answering its two questions, and note in
    ``exchange`` what it saw (each mark's time as it arrived).

    The phases are ``compile``, ``run`` and ``exit`` (after it said ``done``, a short grace).
    On ``ready`` the timing seed is written to it, and the clock of its timing phase starts;
    on ``timed N`` the clock stops and the indices of the timed trials whose outputs are to be
    checked are chosen and written. Nothing the process writes or closes makes this wait
    beyond the current limit.
    """
    phase = "compile"
    deadline = time.monotonic() + config.compile_timeout_s
    buffer = b""
    reading = True
    timing_began: float | None = None
    while process.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            log.warning("candidate timed out in phase %s; stopping it", phase)
            exchange.timed_out_in = phase
            return
        if not reading:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=min(remaining, POLL_S))
            continue
        ready, _, _ = select.select([read_fd], [], [], min(remaining, POLL_S))
        if not ready:
            continue
        chunk = os.read(read_fd, 4096)
        if not chunk:  # every writer closed the pipe; wait for the process itself
            reading = False
            continue
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            word, _, rest = line.decode(errors="replace").partition(" ")
            if word in STAGE_FROM_MARK:
                exchange.marks.setdefault(word, time.perf_counter())
            if word == "run" and phase == "compile":
                phase = "run"
                deadline = time.monotonic() + config.run_timeout_s
            elif word == "ready" and phase == "run" and timing_began is None:
                timing_began = time.perf_counter()
                _tell(process, {"timing": seeds.timing})
            elif word == "timed" and timing_began is not None and not exchange.asked:
                exchange.timing_phase_s = time.perf_counter() - timing_began
                exchange.trials = int(rest) if rest.isdigit() else 0
                exchange.asked = _timed_sample(exchange.trials, output_bytes)
                _tell(process, {"save": exchange.asked})
            elif word == "done" and phase != "exit":
                phase = "exit"
                deadline = time.monotonic() + _exit_grace_s(config)


def _tell(process: subprocess.Popen | ForkedCandidate, message: dict) -> None:
    with contextlib.suppress(BrokenPipeError, OSError):
        process.stdin.write((json.dumps(message) + "\n").encode())
        process.stdin.flush()


def _timed_sample(trials: int, output_bytes: int) -> list[int]:
    """Every timed trial while their outputs are small, else a sample chosen now, after the
    run, by a generator the candidate cannot predict."""
    if trials <= 0:
        return []
    if trials * output_bytes <= CHECK_ALL_TIMED_BYTES:
        return list(range(trials))
    return sorted(secrets.SystemRandom().sample(range(trials), min(trials, TIMED_SAMPLE)))


def _exit_grace_s(config: EvalConfig) -> float:
    return min(EXIT_GRACE_S, config.run_timeout_s)


def stop_process(process: subprocess.Popen | ForkedCandidate) -> None:
    """End the supervisor, which ends every process the candidate started: SIGTERM and its
    sweep first, then SIGKILL of its group should it not be done in time."""
    with contextlib.suppress(OSError):
        process.stdin.close()
    if process.poll() is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            process.send_signal(signal.SIGTERM)
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=SUPERVISOR_GRACE_S)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read_report(path: Path) -> dict | None:
    """The candidate process's report (untrusted: checked field by field later), or None."""
    try:
        report = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    finally:
        path.unlink(missing_ok=True)
    return report if isinstance(report, dict) else None


def _log_tail(path: Path) -> str:
    try:
        lines = path.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    return " | ".join(line.strip() for line in lines[-LOG_TAIL_LINES:] if line.strip())[:600]


def _classify_death(
    returncode: int | None, timed_out_in: str | None, config: EvalConfig, tail: str
) -> tuple[FailureKind, str]:
    if timed_out_in == "exit":
        grace = _exit_grace_s(config)
        return FailureKind.TIMEOUT, f"the worker did not exit within {grace:g} s of 'done'"
    if timed_out_in is not None:
        limit = config.compile_timeout_s if timed_out_in == "compile" else config.run_timeout_s
        return FailureKind.TIMEOUT, f"no progress in the {timed_out_in} phase within {limit:g} s"
    lowered = tail.lower()
    if any(marker in lowered for marker in OUT_OF_MEMORY_MARKERS):
        return FailureKind.OUT_OF_MEMORY, tail or "the worker ran out of memory"
    if returncode is not None and returncode < 0:
        try:
            name = signal.Signals(-returncode).name
        except ValueError:
            name = f"signal {-returncode}"
        if name == "SIGKILL":
            name += " (not by the evaluator: the kernel's out-of-memory killer?)"
        return FailureKind.KILLED_BY_SIGNAL, f"worker killed by {name}" + (
            f": {tail}" if tail else ""
        )
    if "cuda error" in lowered or "illegal memory access" in lowered:
        return FailureKind.CUDA_ERROR, tail
    return (
        FailureKind.RUNTIME_ERROR,
        f"worker exited with code {returncode} before giving a verdict"
        + (f": {tail}" if tail else ""),
    )
