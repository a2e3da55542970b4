"""The candidate's side of an evaluation: runs one candidate and hands over raw data only.

Started by :func:`autoprofiler.evaluate.runner.evaluate` (under the containment supervisor) as
``python -m autoprofiler.evaluate.candidate JOB.json``. This process holds no reference model
and no expected output, and decides no verdict: it builds the candidate, runs it on the inputs
made from the seeds it is given, writes each output it is judged on to a file, times it with
:func:`~autoprofiler.evaluate.timing.run_timing_loop`, and writes a report of raw times,
failures and what its watchers saw. Trusted code (:mod:`~autoprofiler.evaluate.verdict`, the
reference process) makes the verdict once this process is gone.

Talk with the runner: phases on the status pipe (``device`` once its CUDA context is made,
``compile`` until the first forward returns, with ``built`` once the candidate is constructed,
``run``, ``ready`` when it waits for the timing seed, ``timed N`` after N timed trials,
``done``); the runner writes the timing seed, then the indices of the timed trials whose
outputs it wants, as JSON lines on standard input. Nothing the candidate can see before its
timing phase tells it the timed inputs. A worker whose parent dies ends itself.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import os
import resource
import sys
import threading
import time
import traceback
import types
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import torch

from autoprofiler.evaluate.audit import AuditWatch
from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.cuda_ipc import CudaIpcError, OpenedSlab
from autoprofiler.evaluate.guard import RuntimeGuard, background_work
from autoprofiler.evaluate.inputs import (
    OutputError,
    TrialSeeds,
    clone_inputs,
    flatten,
    make_inputs,
    plain_leaves,
)
from autoprofiler.evaluate.output_files import output_path, write_output
from autoprofiler.evaluate.result import FailureKind, Finding
from autoprofiler.evaluate.settings import settings_changes, speed_settings
from autoprofiler.evaluate.shapes import other_shape
from autoprofiler.evaluate.timing import LoopSettings, pool_budget_bytes, run_timing_loop
from autoprofiler.evaluate.triton_build import (
    TritonCompiles,
    TritonPrebuild,
    parse_capability,
    prebuild_triton,
)
from autoprofiler.problem import ProblemError, exec_problem_source

log = logging.getLogger(__name__)

OUT_OF_MEMORY_MARKERS = ("out of memory", "can't allocate memory", "cannot allocate memory")
PARENT_POLL_S = 0.25
EXIT_ORPHANED = 75


class CandidateFailure(Exception):
    """Ends the evaluation with a failure kind and a short message."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


def describe_exception(exc: BaseException, candidate_file: str | None = None) -> str:
    """The first useful lines of an error: type, message, and where in the candidate it arose."""
    text = str(exc).strip()
    lines = [line for line in text.splitlines() if line.strip()]
    head = f"{type(exc).__name__}: " + " | ".join(lines[:3]) if lines else type(exc).__name__
    if candidate_file:
        frames = [
            f for f in traceback.extract_tb(exc.__traceback__) if f.filename == candidate_file
        ]
        if frames:
            head += f" (candidate line {frames[-1].lineno})"
    return head[:600]


def classify_exception(exc: BaseException) -> FailureKind:
    """Map an exception raised by candidate code to a failure kind."""
    text = f"{type(exc).__name__} {exc}".lower()
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)) or any(
        marker in text for marker in OUT_OF_MEMORY_MARKERS
    ):
        return FailureKind.OUT_OF_MEMORY
    if any(
        marker in text
        for marker in ("cuda error", "illegal memory access", "device-side assert", "cudaerror")
    ):
        return FailureKind.CUDA_ERROR
    if "error building extension" in text or "compilationerror" in text:
        return FailureKind.BUILD_ERROR
    return FailureKind.RUNTIME_ERROR


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name.startswith("cuda") and not torch.cuda.is_available():
        raise CandidateFailure(FailureKind.REFERENCE_ERROR, "device cuda asked for, none visible")
    return torch.device(name)


def device_label(device: torch.device) -> str:
    if device.type == "cuda":
        return f"cuda:{torch.cuda.get_device_name(device)}"
    return "cpu"


def _load_candidate(path: str) -> Any:
    source = Path(path).read_text(encoding="utf-8")
    try:
        compile(source, path, "exec")
    except SyntaxError as exc:
        raise CandidateFailure(FailureKind.SYNTAX_ERROR, f"line {exc.lineno}: {exc.msg}") from None
    spec = importlib.util.spec_from_file_location(f"autoprofiler_candidate_{Path(path).stem}", path)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # Triton and pickling look modules up by name
    try:
        spec.loader.exec_module(module)
    except (Exception, SystemExit) as exc:
        raise CandidateFailure(FailureKind.BUILD_ERROR, describe_exception(exc, path)) from None
    if not isinstance(getattr(module, "ModelNew", None), type):
        raise CandidateFailure(
            FailureKind.MISSING_MODELNEW, "the candidate defines no class ModelNew"
        )
    return module


def _release(device: torch.device) -> None:
    """Give freed tensors back between phases, so that one phase's leftovers (and the
    allocator's cached blocks) do not crowd the next on a GPU."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _open_device(device: torch.device) -> None:
    """Make this process's CUDA context now, so that the runner's clock tells its cost apart
    from the candidate's own start-up."""
    if device.type != "cuda":
        return
    try:
        torch.zeros(1, device=device)
    except Exception as exc:  # a device that cannot be used is a failed run, not a crash
        message = f"the GPU could not be used: {exc}"
        raise CandidateFailure(classify_exception(exc), message) from None


def _mapped_bytes() -> int:
    """The address space this process maps now (``VmSize``); 0 where /proc cannot tell."""
    try:
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def _limit_address_space(limit_gb: float, device: torch.device) -> None:
    """Cap the worker's address space (``RLIMIT_AS``) at ``limit_gb`` beyond what it maps
    before the candidate runs; CPU runs only. Counted from there because the interpreter and
    torch are mapped already: a CUDA build of torch maps several GiB of libraries, so a cap
    counted from zero left an H100 machine's worker no room to read the problem."""
    if device.type != "cpu":
        log.warning("memory_limit_gb applies to CPU runs only; no limit on %s", device)
        return
    limit = _mapped_bytes() + int(limit_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def _write_atomically(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def _leave_when_orphaned(parent: int) -> None:
    """End this process at once when the process that started it is gone (a driver killed with
    SIGKILL cannot kill its worker): nobody would read the verdict, and the worker would hold
    its GPU until the candidate finished or hung forever."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(PARENT_POLL_S)
        os._exit(EXIT_ORPHANED)

    threading.Thread(target=watch, name="autoprofiler-parent-watch", daemon=True).start()


@dataclass
class Report:
    """What this process hands over: raw data and what its watchers saw, never a verdict."""

    device: str = ""
    compiled: bool = False
    failure_kind: str | None = None
    failure_message: str = ""
    stage: str = ""  # "correctness", "timing" or "other_shape" when it failed
    # item name -> {"told": what was written, into its slab slot or its file}
    outputs: dict[str, dict] = field(default_factory=dict)
    timing: dict | None = None
    findings: list[dict] = field(default_factory=list)
    settings: dict[str, str] = field(default_factory=dict)
    prebuilt: dict | None = None  # a build run's Triton kernels (TritonPrebuild)
    triton_compiles: dict | None = None  # TritonCompiles, a diagnostic


class _Channel:
    """The status pipe out, and the runner's JSON lines in."""

    def __init__(self, status_fd: int | None) -> None:
        self._fd = status_fd
        self._input = sys.stdin

    def phase(self, name: str) -> None:
        if self._fd is not None:
            os.write(self._fd, f"{name}\n".encode())

    def receive(self) -> dict:
        line = self._input.readline()
        if not line:
            raise CandidateFailure(FailureKind.RUNTIME_ERROR, "the evaluator stopped talking")
        return json.loads(line)


@dataclass
class _Run:
    """One candidate being run: its job, device, report, watchers and model."""

    job: dict
    config: EvalConfig
    device: torch.device
    report: Report
    channel: _Channel
    audit: AuditWatch
    out_dir: Path
    module: types.ModuleType | None = None
    candidate: Any = None
    guard: RuntimeGuard | None = None
    slab: OpenedSlab | None = None
    triton: TritonCompiles | None = None  # Triton's compilations, when the candidate uses it

    @property
    def candidate_file(self) -> str:
        return self.job["candidate_path"]

    def flag(self, name: str, detail: str, severity: str = "flag") -> None:
        if all(f["name"] != name for f in self.report.findings):
            self.report.findings.append(asdict(Finding(name, detail, severity)))

    def call(self, inputs: list[Any]) -> Any:
        """The candidate's forward on ``inputs``, watched, with nothing left running after."""
        with self.audit.watching(), torch.no_grad():
            output = self.candidate(*inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.check_background()
        return output

    def hand_over(self, name: str, output: Any, slot: str | None = None) -> None:
        """Hand ``output`` over as item ``name``: into its ``slot`` of the GPU slab the trusted
        side offered (``slot`` defaults to ``name``), else as a file in the output folder."""
        try:
            leaves = plain_leaves(output)
            told = self.slab.write(slot or name, leaves) if self.slab is not None else None
            if told is None:
                path = output_path(self.out_dir, name)
                told = write_output(leaves, path, self.job["output_limit_bytes"])
        except OutputError as exc:
            kind = FailureKind.CHEAT if exc.cheat else FailureKind.WRONG_SHAPE
            raise CandidateFailure(kind, str(exc)) from None
        self.report.outputs[name] = {"told": told}

    def open_slab(self) -> None:
        """Open the GPU slab the job offers, if any (on failure, files it is)."""
        offer = self.job.get("slab")
        if offer is None or self.device.type != "cuda":
            return
        try:
            self.slab = OpenedSlab(offer, self.device)
        except CudaIpcError as exc:
            log.warning("outputs go to files: %s", exc)

    def check_background(self) -> None:
        busy = background_work(self.candidate_file)
        if busy:
            detail = f"candidate code still running after forward returned ({', '.join(busy)})"
            self.flag("background_work", detail, "reject")
            raise CandidateFailure(FailureKind.CHEAT, f"background_work: {detail}")

    def check_guard(self) -> None:
        for finding in self.guard.check():
            self.flag(finding.name, finding.detail, finding.severity)
            raise CandidateFailure(FailureKind.CHEAT, f"{finding.name}: {finding.detail}")


def _build(run: _Run) -> None:
    job, device = run.job, run.device
    try:
        run.module = exec_problem_source(job["problem_source"], "autoprofiler_problem")
    except ProblemError as exc:
        raise CandidateFailure(FailureKind.REFERENCE_ERROR, str(exc)) from None
    init_inputs = list(getattr(run.module, "get_init_inputs", list)())
    run.guard = RuntimeGuard(run.module, None, vars(sys.modules[__name__]))
    run.channel.phase("compile")
    with run.audit.watching():
        candidate_module = _load_candidate(job["candidate_path"])
        compiles = TritonCompiles()
        run.triton = compiles if compiles.listen() else None
        with torch.device(device):
            torch.manual_seed(run.config.seed)
            try:
                candidate = candidate_module.ModelNew(*init_inputs)
            except (Exception, SystemExit) as exc:
                kind = classify_exception(exc)
                if kind is FailureKind.RUNTIME_ERROR:
                    kind = FailureKind.BUILD_ERROR
                message = describe_exception(exc, job["candidate_path"])
                raise CandidateFailure(kind, message) from None
            if isinstance(candidate, torch.nn.Module):
                candidate = candidate.to(device).eval()
    run.channel.phase("built")
    run.candidate = candidate
    run.report.compiled = True


def _correctness(run: _Run, seeds: TrialSeeds) -> None:
    run.report.stage = "correctness"
    for trial, seed in enumerate(seeds.correctness):
        inputs = make_inputs(run.module, seed, run.device)
        given = clone_inputs(inputs)
        pointers = {v.data_ptr() for v in given if isinstance(v, torch.Tensor)}
        output = run.call(given)
        if trial == 0:
            run.channel.phase("run")
        if any(torch.is_tensor(t) and t.data_ptr() in pointers for t in flatten(output)):
            run.flag("returns_input", "an output shares memory with an input")
        if any(
            isinstance(a, torch.Tensor) and not torch.equal(a, b) for a, b in zip(given, inputs)
        ):
            run.flag("mutates_inputs", "the candidate changed its input tensors")
        run.hand_over(f"correctness-{trial}", output)
        del inputs, given, output
    # The freed blocks stay in the allocator's cache for the timing pool: memory given back to
    # the driver just before the timed trials slowed multi-GB streaming kernels on the H200
    # (docs/results/evaluator.md, the candidate-side bias).
    gc.collect()


def _timing(run: _Run) -> None:
    """Wait for the timing seed, time the candidate on its pool, hand over the asked outputs."""
    run.report.stage = "timing"
    run.channel.phase("ready")
    seeds = TrialSeeds((), int(run.channel.receive()["timing"]), 0)
    loop = LoopSettings(**run.job["loop"])
    with run.audit.watching(), torch.no_grad():
        record, outputs = run_timing_loop(
            run.candidate,
            lambda j: make_inputs(run.module, seeds.pool_seed(j), run.device),
            run.device,
            loop,
            pool_budget_bytes(run.device),
            keep_outputs=True,
        )
    run.channel.phase(f"timed {record.trials}")
    run.check_background()
    run.report.timing = record.to_dict()
    wanted = run.channel.receive().get("save", [])
    for position, index in enumerate(wanted):
        if isinstance(index, int) and 0 <= index < len(outputs):
            run.hand_over(f"timed-{index}", outputs[index], f"timed#{position}")
    del outputs
    _release(run.device)


def _other_shape(run: _Run, seeds: TrialSeeds) -> None:
    """The candidate at a second input shape, where the problem has one; a failure there is
    reported (the trusted side decides whether the trial counts)."""
    run.report.stage = "other_shape"
    shape = other_shape(run.module) if run.config.other_shape else None
    if shape is None:
        return
    inputs = make_inputs(run.module, seeds.other_shape, run.device, shape)
    try:
        run.hand_over("other_shape", run.call(inputs))
    except CandidateFailure:
        raise
    except (Exception, SystemExit) as exc:
        raise CandidateFailure(
            classify_exception(exc), describe_exception(exc, run.candidate_file)
        ) from None


def run_candidate(job: dict, channel: _Channel, audit: AuditWatch) -> Report:
    """Run one candidate as the job says; never raises."""
    config = EvalConfig.from_dict(job["config"])
    report = Report()
    seeds = TrialSeeds(tuple(job["seeds"]["correctness"]), 0, int(job["seeds"]["other_shape"]))
    run: _Run | None = None
    try:
        device = resolve_device(config.device)
        report.device = device_label(device)
        if config.memory_limit_gb:
            _limit_address_space(config.memory_limit_gb, device)
        run = _Run(job, config, device, report, channel, audit, Path(job["output_dir"]))
        _open_device(device)
        channel.phase("device")
        _build(run)
        run.open_slab()
        try:
            run.check_guard()
            _correctness(run, seeds)
            run.check_guard()
            _timing(run)
            run.check_guard()
            # Last: a JIT (torch.compile's automatic dynamic shapes) that saw a second shape
            # recompiles for any shape, and the timed program must be the one made for these.
            _other_shape(run, seeds)
            run.check_guard()
        except CandidateFailure:
            raise
        except (Exception, SystemExit) as exc:
            raise CandidateFailure(
                classify_exception(exc), describe_exception(exc, job["candidate_path"])
            ) from None
        report.stage = ""
    except CandidateFailure as failure:
        report.failure_kind = failure.kind.value
        report.failure_message = failure.message
    for finding in [*audit.findings(), *settings_changes(job["settings"], speed_settings())]:
        report.findings.append(asdict(finding))
    report.settings = speed_settings()
    if run is not None and run.triton is not None and run.triton.kernels:
        report.triton_compiles = asdict(run.triton)
    return report


def build_candidate(job: dict, channel: _Channel, audit: AuditWatch) -> Report:
    """The build lane's run (no GPU is visible here): import the candidate and construct it on
    the job's ``build_device``, so that the CUDA extensions it compiles at import or
    construction land in its extension folder before its timed run; with a ``triton_target``,
    then run its forward once on meta tensors so that its Triton kernels compile into its
    Triton cache (:mod:`~autoprofiler.evaluate.triton_build`). Never raises."""
    config = EvalConfig.from_dict({**job["config"], "device": "cpu"})
    device = torch.device(job.get("build_device") or "cpu")
    report = Report(device=str(device))
    run = _Run(job, config, device, report, channel, audit, Path(job["output_dir"]))
    try:
        _build(run)
        if job.get("triton_target"):
            with audit.watching():
                report.prebuilt = asdict(_prebuild_triton(run, job["triton_target"]))
    except CandidateFailure as failure:
        report.failure_kind = failure.kind.value
        report.failure_message = failure.message
    except (Exception, SystemExit) as exc:
        report.failure_kind = FailureKind.BUILD_ERROR.value
        report.failure_message = describe_exception(exc, job["candidate_path"])
    return report


def _prebuild_triton(run: _Run, target: str) -> TritonPrebuild:
    """The candidate's Triton kernels compiled for ``target`` by a forward on meta tensors."""
    model = run.candidate
    if isinstance(model, torch.nn.Module):
        model = model.to("meta")
    inputs = make_inputs(run.module, 0, torch.device("meta"))  # shapes and dtypes only
    prebuilt = prebuild_triton(model, inputs, parse_capability(target))
    log.info("Triton prebuild for %s: %s", target, prebuilt)
    return prebuilt


def main(argv: list[str], status_fd: int | None = None) -> int:
    """Run the job in ``argv[1]``; ``status_fd`` overrides the job's (a forked child's)."""
    job_path = Path(argv[1])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    _leave_when_orphaned(job.get("parent_pid") or os.getppid())
    job_path.unlink(missing_ok=True)
    channel = _Channel(status_fd if status_fd is not None else job.get("status_fd"))
    audit = AuditWatch(job.get("write_roots", [str(job_path.parent)]))
    audit.install()
    run = build_candidate if job.get("build_only") else run_candidate
    report = run(job, channel, audit)
    _write_atomically(job["report_path"], asdict(report))
    channel.phase("done")
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: candidate threads or atexit hooks must not hold the report back.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
