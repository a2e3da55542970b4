"""The evaluation worker: judges one candidate in a process of its own.

Started by :func:`autoprofiler.evaluate.runner.evaluate` as
``python -m autoprofiler.evaluate.worker JOB.json``. It deletes the job file once read, reports
its phase through a status pipe (``compile`` until the candidate's first forward has run, then
``run``), writes the result JSON atomically to the path named in the job, and never lets an
exception escape: whatever the candidate does becomes a failure kind in the result. A crash
that kills this process outright (a segfault, ``os._exit``) is classified by the parent.

In every check the candidate runs before the reference, so the expected output does not exist
while candidate code runs. Correctness trials use seeds derived from the configuration; the
timing inputs and the re-check after timing use seeds drawn at run time, and the re-check
refills the very tensors that were timed, so outputs precomputed or cached during timing go
stale; a last call on the same values, the previous output overwritten with NaN in between,
shows an output handed back from a cache keyed on the input's values. The trial at a second
input shape comes after all of that, so what was timed never saw another shape.
:mod:`~autoprofiler.evaluate.guard` and :mod:`~autoprofiler.evaluate.audit` watch what
the candidate changes, leaves running, writes and inspects. A worker whose parent dies
(killed with SIGKILL) ends itself within a fraction of a second.
"""

from __future__ import annotations

import gc
import importlib.util
import json
import logging
import os
import resource
import secrets
import sys
import threading
import time
import traceback
import types
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autoprofiler.evaluate.audit import AuditWatch
from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.guard import RuntimeGuard, background_work
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding
from autoprofiler.evaluate.shapes import OtherShape, other_shape, shapes
from autoprofiler.evaluate.timing import time_callable
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


@dataclass
class _Sides:
    module: types.ModuleType
    reference: torch.nn.Module
    candidate: torch.nn.Module
    get_inputs: Any


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


class _StatusPipe:
    def __init__(self, fd: int | None) -> None:
        self._fd = fd

    def phase(self, name: str) -> None:
        if self._fd is not None:
            os.write(self._fd, f"{name}\n".encode())


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


def _flatten(value: Any) -> list[Any]:
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in _flatten(part)]
    return [value]


def _to_device(values: list[Any], device: torch.device) -> list[Any]:
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def _clone(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


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


def _compare(ref_out: Any, cand_out: Any, config: EvalConfig) -> tuple[float, float, str | None]:
    """(max abs diff, mean abs diff, failure message or None) over all output tensors."""
    refs, cands = _flatten(ref_out), _flatten(cand_out)
    if len(refs) != len(cands):
        raise CandidateFailure(
            FailureKind.WRONG_SHAPE, f"{len(cands)} outputs where the reference has {len(refs)}"
        )
    max_diff = mean_diff = 0.0
    failure = None
    for index, (ref, cand) in enumerate(zip(refs, cands)):
        if not isinstance(ref, torch.Tensor):
            ref = torch.as_tensor(ref)
        if not isinstance(cand, torch.Tensor):
            raise CandidateFailure(
                FailureKind.WRONG_SHAPE, f"output {index} is {type(cand).__name__}, not a tensor"
            )
        if type(cand) is not torch.Tensor and not isinstance(cand, torch.nn.Parameter):
            raise CandidateFailure(
                FailureKind.CHEAT, f"output {index} is a tensor subclass {type(cand).__name__}"
            )
        if tuple(cand.shape) != tuple(ref.shape):
            raise CandidateFailure(
                FailureKind.WRONG_SHAPE,
                f"output {index} has shape {tuple(cand.shape)}, expected {tuple(ref.shape)}",
            )
        atol, rtol = config.tolerance_for(str(ref.dtype).removeprefix("torch."))
        # Compare where the outputs live (a GPU's outputs can be gigabytes), in >= fp32.
        work_dtype = torch.promote_types(ref.dtype, torch.float32)
        ref_w = ref.detach().to(work_dtype)
        cand_w = cand.detach().to(ref_w.device, work_dtype)
        if not bool(torch.isfinite(cand_w).all()) and bool(torch.isfinite(ref_w).all()):
            failure = f"output {index} has NaN or inf where the reference is finite"
        diff = (ref_w - cand_w).abs().nan_to_num(nan=float("inf"))
        if diff.numel():
            max_diff = max(max_diff, float(diff.max()))
            mean_diff = max(mean_diff, float(diff.double().mean()))
        close = torch.allclose(cand_w, ref_w, atol=atol, rtol=rtol, equal_nan=True)
        if failure is None and not close:
            failure = (
                f"output {index} differs: max abs diff {float(diff.max()):.3g} (atol=rtol={atol:g})"
            )
        del ref_w, cand_w, diff
    return max_diff, mean_diff, failure


FINGERPRINT_SAMPLES = 4096


def _fingerprint(value: Any) -> list[tuple[Any, ...] | None]:
    """A small stand-in for each output tensor (shape, dtype, float64 sum and an evenly spread
    sample of its elements), so that outputs of earlier trials need not be kept: on a GPU a
    KernelBench output can be gigabytes. Equal outputs give equal fingerprints; different
    ones, in practice, never do. A non-tensor output gives None (never equal)."""
    prints: list[tuple[Any, ...] | None] = []
    for out in _flatten(value):
        if not isinstance(out, torch.Tensor):
            prints.append(None)
            continue
        flat = out.detach().reshape(-1)
        step = max(1, flat.numel() // FINGERPRINT_SAMPLES)
        total = float(torch.sum(flat, dtype=torch.float64)) if flat.numel() else 0.0
        prints.append((tuple(out.shape), out.dtype, total, flat[::step].clone()))
    return prints


def _fingerprints_equal(a: list[tuple[Any, ...] | None], b: list[tuple[Any, ...] | None]) -> bool:
    return len(a) == len(b) and all(
        x is not None
        and y is not None
        and x[:3] == y[:3]
        and x[3].shape == y[3].shape
        and torch.equal(x[3], y[3])
        for x, y in zip(a, b)
    )


def _release(device: torch.device) -> None:
    """Give freed tensors back between phases, so that one phase's leftovers (and the
    allocator's cached blocks) do not crowd the next on a GPU."""
    gc.collect()
    if device.type == "cuda":
        torch.cuda.empty_cache()


def _inputs(make: Any, seed: int, device: torch.device) -> list[Any]:
    torch.manual_seed(seed)
    with torch.device(device):
        return _to_device(list(make()), device)


def _detach_copy(value: Any) -> list[Any]:
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in _flatten(value)]


def _refill(timed: Any, fresh: Any) -> Any:
    """``fresh``'s values in ``timed``'s storage (so caches keyed on ``timed`` go stale)."""
    if (
        isinstance(timed, torch.Tensor)
        and isinstance(fresh, torch.Tensor)
        and (timed.shape, timed.dtype, timed.device) == (fresh.shape, fresh.dtype, fresh.device)
    ):
        try:
            with torch.no_grad():
                return timed.copy_(fresh)
        except RuntimeError:  # an expanded or otherwise unwritable input
            pass
    return fresh


@dataclass
class _Run:
    """One evaluation in progress: its settings, result, watchers and the two models."""

    job: dict
    config: EvalConfig
    device: torch.device
    result: EvalResult
    status: _StatusPipe
    audit: AuditWatch
    sides: _Sides | None = None
    guard: RuntimeGuard | None = None

    @property
    def candidate_file(self) -> str:
        return self.job["candidate_path"]

    def reject(self, finding: Finding) -> None:
        """Record a rejecting finding and end the evaluation as a cheat."""
        self.result.add_finding(finding)
        raise CandidateFailure(FailureKind.CHEAT, f"{finding.name}: {finding.detail}")

    def flag(self, name: str, detail: str, severity: str = "flag") -> None:
        self.result.add_finding(Finding(name, detail, severity))

    def call_candidate(self, inputs: list[Any]) -> Any:
        """The candidate's forward on ``inputs``, watched, with nothing left running after."""
        with self.audit.watching():
            output = self.sides.candidate(*inputs)
        if self.device.type == "cuda":
            torch.cuda.synchronize(self.device)
        self.check_background()
        return output

    def call_reference(self, inputs: list[Any]) -> list[Any]:
        try:
            return _detach_copy(self.sides.reference(*inputs))
        except Exception as exc:
            raise CandidateFailure(FailureKind.REFERENCE_ERROR, describe_exception(exc)) from None

    def check_background(self) -> None:
        busy = background_work(self.candidate_file)
        if busy:
            detail = f"candidate code still running after forward returned ({', '.join(busy)})"
            self.reject(Finding("background_work", detail, "reject"))

    def check_guard(self) -> None:
        for finding in self.guard.check():
            self.reject(finding)


def _check_correctness(run: _Run) -> None:
    config, result = run.config, run.result
    previous: tuple[Any, Any] | None = None
    for trial in range(config.correctness_trials):
        inputs = _inputs(run.sides.get_inputs, config.seed + 1 + trial, run.device)
        cand_inputs = _clone(inputs)
        input_ptrs = {v.data_ptr() for v in cand_inputs if isinstance(v, torch.Tensor)}
        with torch.no_grad():
            cand_raw = run.call_candidate(cand_inputs)
            if trial == 0:
                run.status.phase("run")
            ref_out = run.call_reference(_clone(inputs))
        cand_list = _flatten(cand_raw)
        if any(isinstance(t, torch.Tensor) and t.data_ptr() in input_ptrs for t in cand_list):
            run.flag("returns_input", "an output shares memory with an input")
        if any(
            isinstance(a, torch.Tensor) and not torch.equal(a, b)
            for a, b in zip(cand_inputs, inputs)
        ):
            run.flag("mutates_inputs", "the candidate changed its input tensors")
        max_diff, mean_diff, failure = _compare(ref_out, cand_raw, config)
        result.max_abs_diff = max(result.max_abs_diff or 0.0, max_diff)
        result.mean_abs_diff = max(result.mean_abs_diff or 0.0, mean_diff)
        current = (_fingerprint(ref_out), _fingerprint(cand_raw))
        repeated = previous is not None and _fingerprints_equal(current[1], previous[1])
        if repeated and not _fingerprints_equal(current[0], previous[0]):
            run.flag("constant_output", "the same output for different inputs", "reject")
        previous = current
        result.correctness_trials = trial + 1
        if failure:
            raise CandidateFailure(FailureKind.WRONG_VALUES, f"trial {trial}: {failure}")


def _check_other_shape(run: _Run) -> None:
    """One more trial at a second input shape, where the problem allows one."""
    module = run.sides.module
    shape = other_shape(module) if run.config.other_shape else None
    if shape is None:
        return
    seed = run.config.seed + 1 + run.config.correctness_trials
    inputs = _inputs(lambda: shape.inputs(module), seed, run.device)
    usual = _inputs(run.sides.get_inputs, seed, run.device)
    if shapes(inputs) == shapes(usual):
        log.info("%s leaves the input shapes as they are: no second-shape trial", shape.label)
        return
    with torch.no_grad():
        try:
            cand_out, cand_error = run.call_candidate(_clone(inputs)), None
        except CandidateFailure:
            raise
        except (Exception, SystemExit) as exc:
            cand_out, cand_error = None, exc
        with shape.applied(module):
            try:
                ref_out = _detach_copy(run.sides.reference(*_clone(inputs)))
            except Exception as exc:
                log.info("the reference fails at %s (%s): no second-shape trial", shape.label, exc)
                return
    if cand_error is not None:
        failure = CandidateFailure(
            classify_exception(cand_error), describe_exception(cand_error, run.candidate_file)
        )
    else:
        failure = _other_shape_mismatch(ref_out, cand_out, run.config)
    if failure is not None:
        _fail_at_other_shape(run, shape, failure)


def _other_shape_mismatch(
    ref_out: Any, cand_out: Any, config: EvalConfig
) -> CandidateFailure | None:
    try:
        _, _, message = _compare(ref_out, cand_out, config)
    except CandidateFailure as failure:
        return failure
    return CandidateFailure(FailureKind.WRONG_VALUES, message) if message else None


def _fail_at_other_shape(run: _Run, shape: OtherShape, failure: CandidateFailure) -> None:
    detail = f"correct at the problem's shapes, not at {shape.label}"
    run.flag("shape_specialized", detail, "reject")
    message = f"at another input shape ({shape.label}): {failure.message}"
    raise CandidateFailure(failure.kind, message)


def _time(fn, inputs, device, config: EvalConfig):
    with torch.no_grad():
        return time_callable(
            fn,
            inputs,
            device,
            warmup_ms=config.warmup_ms,
            budget_ms=config.timing_budget_ms,
            min_trials=config.min_timing_trials,
            max_trials=config.max_timing_trials,
            flush_l2=config.flush_l2,
        )


def _timing_phase(run: _Run) -> list[Any]:
    """Time reference and candidate on the same inputs (from a seed drawn now); return them."""
    config, result, sides, device = run.config, run.result, run.sides, run.device
    inputs = _inputs(sides.get_inputs, secrets.randbits(32), device)
    began = time.perf_counter()
    result.reference = _time(sides.reference, inputs, device, config)
    with run.audit.watching():
        result.candidate = _time(sides.candidate, inputs, device, config)
    run.check_background()
    if run.job.get("time_compile_baseline"):
        compiled = torch.compile(sides.reference)
        with torch.no_grad():
            compiled(*inputs)  # compile outside the timed trials
        result.compiled_reference = _time(compiled, inputs, device, config)
    result.timed_s = time.perf_counter() - began
    return inputs


def _recheck(run: _Run, timed_inputs: list[Any]) -> None:
    """The candidate again on the timed tensors, refilled with fresh values; then once more on
    the same values, its first output overwritten in between (``_repeat_check``)."""
    fresh = _inputs(run.sides.get_inputs, secrets.randbits(32), run.device)
    inputs = [_refill(t, f) for t, f in zip(timed_inputs, fresh)]
    if len(inputs) != len(fresh) or any(a is b for a, b in zip(inputs, fresh)):
        inputs = _clone(fresh)  # ``fresh`` stays untouched for the reference and the repeat
    with torch.no_grad():
        cand_out = run.call_candidate(inputs)
        ref_out = run.call_reference(_clone(fresh))
    _, _, failure = _compare(ref_out, cand_out, run.config)
    if failure:
        message = f"wrong after the timing loop, on fresh values in the timed tensors: {failure}"
        raise CandidateFailure(FailureKind.CHEAT, message)
    _repeat_check(run, inputs, fresh, cand_out, ref_out)


def _poison(outputs: Any, inputs: list[Any]) -> bool:
    """Overwrite with NaN each floating-point output tensor that is not stored in an input;
    whether any was."""
    taken = {t.untyped_storage().data_ptr() for t in _flatten(inputs) if torch.is_tensor(t)}
    poisoned = False
    for out in _flatten(outputs):
        if (
            torch.is_tensor(out)
            and (out.is_floating_point() or out.is_complex())
            and out.untyped_storage().data_ptr() not in taken
        ):
            try:
                with torch.no_grad():
                    out.fill_(float("nan"))
                poisoned = True
            except RuntimeError:  # an expanded or otherwise unwritable output
                pass
    return poisoned


def _repeat_check(
    run: _Run, inputs: list[Any], values: list[Any], first: Any, expected: Any
) -> None:
    """The candidate once more on the values it was just called with, its output of that call
    overwritten with NaN in between: a computed output is whole again, while a cache keyed on
    the input's values (which timing, repeating its inputs, would reward) hands back what it
    remembered, NaN and all."""
    if not _poison(first, inputs):
        return
    inputs = [_refill(t, v) for t, v in zip(inputs, values)]
    with torch.no_grad():
        again = run.call_candidate(inputs)
    _, _, failure = _compare(expected, again, run.config)
    if failure:
        message = f"a second call on the same values returned the first call's output: {failure}"
        raise CandidateFailure(FailureKind.CHEAT, message)


def _build(run: _Run) -> _Sides:
    job, device = run.job, run.device
    try:
        reference_module = exec_problem_source(job["problem_source"], "autoprofiler_reference")
    except ProblemError as exc:
        raise CandidateFailure(FailureKind.REFERENCE_ERROR, str(exc)) from None
    seed = job["config"]["seed"]
    init_inputs = list(getattr(reference_module, "get_init_inputs", list)())
    with torch.device(device):
        torch.manual_seed(seed)
        reference = reference_module.Model(*init_inputs).to(device).eval()
    run.guard = RuntimeGuard(reference_module, reference, vars(sys.modules[__name__]))
    run.status.phase("compile")
    with run.audit.watching():
        candidate_module = _load_candidate(job["candidate_path"])
        with torch.device(device):
            torch.manual_seed(seed)
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
    return _Sides(reference_module, reference, candidate, reference_module.get_inputs)


def _limit_address_space(limit_gb: float, device: torch.device) -> None:
    """Cap the worker's address space (``RLIMIT_AS``); CPU runs only."""
    if device.type != "cpu":
        log.warning("memory_limit_gb applies to CPU runs only; no limit on %s", device)
        return
    limit = int(limit_gb * 2**30)
    resource.setrlimit(resource.RLIMIT_AS, (limit, limit))


def judge(job: dict, status: _StatusPipe, audit: AuditWatch) -> EvalResult:
    """Build, check and time one candidate as the job says; never raises."""
    began = time.perf_counter()
    config = EvalConfig.from_dict(job["config"])
    result = EvalResult(
        problem_hash=job["problem_hash"],
        candidate_hash=job["candidate_hash"],
        torch_version=torch.__version__,
    )
    try:
        device = resolve_device(config.device)
        result.device = device_label(device)
        result.timer = "cuda_events" if device.type == "cuda" else "perf_counter"
        result.atol, result.rtol = config.tolerance_for("float32")
        if config.memory_limit_gb:
            _limit_address_space(config.memory_limit_gb, device)
        run = _Run(job, config, device, result, status, audit)
        run.sides = _build(run)
        result.compiled = True
        try:
            run.check_guard()
            _check_correctness(run)
            _release(device)
            run.check_guard()
            timed_inputs = _timing_phase(run)
            run.check_guard()
            _release(device)
            _recheck(run, timed_inputs)
            del timed_inputs
            _release(device)
            # Last: a JIT (torch.compile's automatic dynamic shapes) that saw a second shape
            # recompiles for any shape, and the timed program must be the one it made for these.
            _check_other_shape(run)
            run.check_guard()
        except CandidateFailure:
            raise
        except (Exception, SystemExit) as exc:
            raise CandidateFailure(
                classify_exception(exc), describe_exception(exc, job["candidate_path"])
            ) from None
        result.correct = True
    except CandidateFailure as failure:
        result.correct = False
        result.failure_kind = failure.kind
        result.failure_message = failure.message
    for finding in audit.findings():
        result.add_finding(finding)
    result.apply_rejections()
    result.wall_s = time.perf_counter() - began
    return result


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


def main(argv: list[str]) -> int:
    job_path = Path(argv[1])
    job = json.loads(job_path.read_text(encoding="utf-8"))
    # The caller's pid (absent under a sandbox, whose own process is the parent): a caller
    # killed while this process was starting is noticed too.
    _leave_when_orphaned(job.get("parent_pid") or os.getppid())
    job_path.unlink(missing_ok=True)  # the result path and seeds are not left on disk
    status = _StatusPipe(job.get("status_fd"))
    audit = AuditWatch(job.get("write_roots", [str(job_path.parent)]))
    audit.install()
    result = judge(job, status, audit)
    _write_atomically(job["result_path"], result.to_dict())
    status.phase("done")
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: candidate threads or atexit hooks must not hold the verdict back.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
