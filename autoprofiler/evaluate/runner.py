"""``evaluate()``: judge a candidate in a spawned worker with time limits and a hard kill.

The static checks run here, in the parent, where the candidate cannot reach them; their
findings are merged into whatever verdict the worker returns.
"""

from __future__ import annotations

import contextlib
import getpass
import json
import logging
import os
import re
import select
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from autoprofiler.evaluate.checks import scan_source
from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.recorded import replay_evaluation
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding
from autoprofiler.evaluate.sandbox import exit_status, sandbox_command
from autoprofiler.problem import Problem, source_hash
from autoprofiler.store import Store, content_key

log = logging.getLogger(__name__)

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
LOG_TAIL_LINES = 6
EXIT_GRACE_S = 30.0  # how long a worker that reported its verdict may take to leave
POLL_S = 0.2
# Folders the worker writes to besides its work folder, by default inside it. Without a
# sandbox, variables the user set are kept and Inductor keeps its shared cache (compiles are
# reused across candidates). In a sandbox only the work folder is writable, so every one of
# them, and TMPDIR, is forced into it (torch.compile then starts cold).
WORK_FOLDERS = {
    "TORCH_EXTENSIONS_DIR": "torch_extensions",
    "TRITON_CACHE_DIR": "triton_cache",
    "TORCHINDUCTOR_CACHE_DIR": "inductor_cache",
}
SANDBOX_FOLDERS = {**WORK_FOLDERS, "TMPDIR": "tmp"}
OUT_OF_MEMORY_MARKERS = ("out of memory", "memoryerror", "allocate memory")


def default_work_root() -> Path:
    """Where candidate folders and extension builds live (``AUTOPROFILER_HOME`` overrides)."""
    base = os.environ.get("AUTOPROFILER_HOME") or Path(tempfile.gettempdir()) / "autoprofiler"
    return Path(base)


_device_cache: dict[str, str] = {}


def device_name(device: str) -> str:
    """The label results are cached under: ``cuda:<GPU name>`` or ``cpu``."""
    if device not in _device_cache:
        import torch

        use_cuda = device.startswith("cuda") or (device == "auto" and torch.cuda.is_available())
        _device_cache[device] = f"cuda:{torch.cuda.get_device_name(0)}" if use_cuda else "cpu"
    return _device_cache[device]


def evaluation_device(config: EvalConfig) -> str:
    """The device label ``config``'s results are (or were, when replaying) produced on."""
    return config.replay_device or device_name(config.device)


def evaluation_key(problem: Problem, candidate_hash: str, config: EvalConfig) -> str:
    """The store key of an evaluation: problem, candidate, device label (the replayed one when
    replaying: no GPU is asked for its name), configuration and torch version."""
    import torch

    return content_key(
        problem.content_hash,
        candidate_hash,
        evaluation_device(config),
        config.config_hash,
        torch.__version__,
    )


def evaluate(
    problem: Problem,
    candidate_source: str,
    config: EvalConfig | None = None,
    *,
    store: Store | None = None,
    use_cache: bool = True,
    work_root: Path | None = None,
) -> EvalResult:
    """Check and time ``candidate_source`` (defining ``ModelNew``) against ``problem``.

    The candidate runs in a fresh worker process. Whatever it does (raise, crash, hang, exhaust
    memory) ends as a failed ``EvalResult``; the caller never crashes or hangs. With a store,
    a result for the same problem, candidate, device and configuration is reused. A sandbox
    that cannot be used raises :class:`~autoprofiler.evaluate.sandbox.SandboxError`.

    With ``config.replay_device`` set, nothing runs: the result recorded on that device is
    returned (``autoprofiler.evaluate.recorded``), or a ``NOT_RECORDED`` failure.
    """
    config = config or EvalConfig()
    candidate_hash = source_hash(candidate_source)
    if config.replay_device is not None:
        return replay_evaluation(problem, candidate_hash, config, store)
    if store is not None and use_cache:
        cached = cached_evaluation(store, problem, candidate_source, config)
        if cached is not None:
            return cached
    work_dir = (work_root or default_work_root()) / "candidates" / candidate_hash
    work_dir.mkdir(parents=True, exist_ok=True)
    candidate_path = work_dir / "candidate.py"
    candidate_path.write_text(candidate_source, encoding="utf-8")
    compile_baseline = _cached_compile_baseline(store, problem, config)
    result = _run_worker(
        problem, candidate_hash, candidate_path, config, work_dir, compile_baseline is None
    )
    _merge_static_findings(result, scan_source(candidate_source, problem.source))
    if compile_baseline is not None:
        result.compiled_reference = compile_baseline
    if store is not None:
        store_evaluation(store, problem, candidate_source, config, result)
    return result


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
    is ``key``) with its problem, candidate and baselines, as ``evaluate`` does."""
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
    _store_baselines(store, problem, config, result)


def _baseline_key(problem: Problem, config: EvalConfig, kind: str) -> str:
    import torch

    return content_key(
        problem.content_hash,
        device_name(config.device),
        torch.__version__,
        config.config_hash,
        kind,
    )


def _cached_compile_baseline(store: Store | None, problem: Problem, config: EvalConfig):
    if store is None or not config.time_compile_baseline:
        return None
    cached = store.get_baseline(_baseline_key(problem, config, "compile"))
    if cached is None:
        return None
    from autoprofiler.evaluate.result import TimingStats

    return TimingStats(**cached)


def _store_baselines(store: Store, problem: Problem, config: EvalConfig, result: EvalResult):
    from dataclasses import asdict

    device = result.device or device_name(config.device)
    for kind, stats in (("eager", result.reference), ("compile", result.compiled_reference)):
        if stats is not None:
            store.put_baseline(
                _baseline_key(problem, config, kind),
                problem.content_hash,
                device,
                kind,
                asdict(stats),
            )


def _merge_static_findings(result: EvalResult, findings: list[Finding]) -> None:
    """Static findings first, then the worker's; a rejecting one fails a correct result."""
    worker_findings = result.findings
    result.findings = []
    for finding in [*findings, *worker_findings]:
        result.add_finding(finding)
    result.apply_rejections()


def _shared_inductor_cache() -> str | None:
    """Inductor's default cache folder (where it also keeps precompiled headers)."""
    try:
        user = re.sub(r'[\\/:*?"<>|]', "_", getpass.getuser())
    except (KeyError, OSError):  # no name for this user id
        return None
    return str(Path(tempfile.gettempdir()) / f"torchinductor_{user}")


def _worker_env(work_dir: Path, config: EvalConfig) -> tuple[dict[str, str], list[str]]:
    """The worker's environment, and the folders it may write to."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)
    if config.sandbox:
        env.update({variable: str(work_dir / f) for variable, f in SANDBOX_FOLDERS.items()})
    else:
        shared = {"TORCHINDUCTOR_CACHE_DIR": _shared_inductor_cache()}
        for variable, folder in WORK_FOLDERS.items():
            env.setdefault(variable, shared.get(variable) or str(work_dir / folder))
    folders = [env[v] for v in (SANDBOX_FOLDERS if config.sandbox else WORK_FOLDERS)]
    for folder in folders:
        Path(folder).mkdir(parents=True, exist_ok=True)
    if device_name(config.device) == "cpu":
        # With no GPU, Triton kernels run in Triton's interpreter, and Inductor compiles in
        # the worker itself rather than in a pool of processes competing for the same cores.
        env.setdefault("TRITON_INTERPRET", "1")
        env.setdefault("TORCHINDUCTOR_COMPILE_THREADS", "1")
    return env, [str(work_dir), *folders]


def _run_worker(
    problem: Problem,
    candidate_hash: str,
    candidate_path: Path,
    config: EvalConfig,
    work_dir: Path,
    time_compile_baseline: bool,
) -> EvalResult:
    began = time.perf_counter()
    prefix = sandbox_command(config.sandbox, work_dir) if config.sandbox else []
    run_id = f"{os.getpid()}-{time.monotonic_ns()}"  # runs of one candidate may overlap
    result_path = work_dir / f"result-{run_id}.json"
    job_path = work_dir / f"job-{run_id}.json"
    env, write_roots = _worker_env(work_dir, config)
    read_fd, write_fd = os.pipe()
    job = {
        "problem_source": problem.source,
        "problem_hash": problem.content_hash,
        "candidate_hash": candidate_hash,
        "candidate_path": str(candidate_path),
        "config": config.to_dict(),
        "result_path": str(result_path),
        "status_fd": write_fd,
        "time_compile_baseline": time_compile_baseline and config.time_compile_baseline,
        "write_roots": write_roots,
        "parent_pid": None if prefix else os.getpid(),
    }
    job_path.write_text(json.dumps(job), encoding="utf-8")
    log_path = work_dir / f"worker-{run_id}.log"
    with open(log_path, "wb") as log_file:
        process = subprocess.Popen(
            [*prefix, sys.executable, "-m", "autoprofiler.evaluate.worker", str(job_path)],
            cwd=work_dir,
            stdin=subprocess.DEVNULL,
            stdout=log_file,
            stderr=subprocess.STDOUT,
            pass_fds=(write_fd,),
            env=env,
            start_new_session=True,
        )
    os.close(write_fd)
    try:
        timed_out_in = _watch(process, read_fd, config)
    finally:
        os.close(read_fd)
        _kill_group(process)
    result = _read_result(result_path, problem, candidate_hash)
    if result is None:
        result = EvalResult(problem_hash=problem.content_hash, candidate_hash=candidate_hash)
        returncode = exit_status(process.returncode) if prefix else process.returncode
        result.failure_kind, result.failure_message = _classify_death(
            returncode, timed_out_in, config, _log_tail(log_path)
        )
        result.compiled = timed_out_in in ("run", "exit")
    with contextlib.suppress(OSError):
        log_path.replace(work_dir / "worker.log")  # the last run's log
    result.wall_s = time.perf_counter() - began
    return result


def _watch(process: subprocess.Popen, read_fd: int, config: EvalConfig) -> str | None:
    """Follow the worker's phases until it exits; return the phase that ran past its limit.

    The phases are ``compile``, ``run`` and ``exit`` (after the worker said ``done``, a short
    grace). Nothing the worker writes or closes makes this wait beyond the current limit.
    """
    phase = "compile"
    deadline = time.monotonic() + config.compile_timeout_s
    buffer = b""
    reading = True
    while process.poll() is None:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            log.warning("candidate timed out in phase %s; killing the worker", phase)
            return phase
        if not reading:
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(timeout=min(remaining, POLL_S))
            continue
        ready, _, _ = select.select([read_fd], [], [], min(remaining, POLL_S))
        if not ready:
            continue
        chunk = os.read(read_fd, 4096)
        if not chunk:  # every writer closed the pipe; wait for the worker itself
            reading = False
            continue
        buffer += chunk
        *lines, buffer = buffer.split(b"\n")
        for line in lines:
            if line == b"run" and phase == "compile":
                phase = "run"
                deadline = time.monotonic() + config.run_timeout_s
            elif line == b"done" and phase != "exit":
                phase = "exit"
                deadline = time.monotonic() + _exit_grace_s(config)
    return None


def _exit_grace_s(config: EvalConfig) -> float:
    return min(EXIT_GRACE_S, config.run_timeout_s)


def _kill_group(process: subprocess.Popen) -> None:
    """Kill the worker's whole session: the worker and anything the candidate started."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
    process.wait()


def _read_result(path: Path, problem: Problem, candidate_hash: str) -> EvalResult | None:
    """The worker's verdict, or None when it left none (or one about something else)."""
    try:
        result = EvalResult.from_dict(json.loads(path.read_text(encoding="utf-8")))
    except (OSError, ValueError, TypeError, AttributeError):
        return None
    finally:
        path.unlink(missing_ok=True)
    if (result.problem_hash, result.candidate_hash) != (problem.content_hash, candidate_hash):
        log.warning("the worker's result names another problem or candidate; ignored")
        return None
    return result


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
