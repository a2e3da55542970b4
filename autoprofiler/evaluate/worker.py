"""The evaluation worker: judges one candidate in a process of its own.

Started by :func:`autoprofiler.evaluate.runner.evaluate` as
``python -m autoprofiler.evaluate.worker JOB.json``. It reports its phase through a status pipe
(``compile`` until the candidate's first forward has run, then ``run``), writes the result JSON
atomically to the path named in the job, and never lets an exception escape: whatever the
candidate does becomes a failure kind in the result. A crash that kills this process outright
(a segfault, ``os._exit``) is classified by the parent.
"""

from __future__ import annotations

import importlib.util
import json
import os
import sys
import time
import traceback
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from autoprofiler.evaluate.checks import scan_source
from autoprofiler.evaluate.config import EvalConfig
from autoprofiler.evaluate.result import EvalResult, FailureKind, Finding
from autoprofiler.evaluate.timing import time_callable
from autoprofiler.problem import ProblemError, exec_problem_source

RECHECK_SEED_OFFSET = 1000


class CandidateFailure(Exception):
    """Ends the evaluation with a failure kind and a short message."""

    def __init__(self, kind: FailureKind, message: str) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message


@dataclass
class _Sides:
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
    if isinstance(exc, (torch.cuda.OutOfMemoryError, MemoryError)) or "out of memory" in text:
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
    except Exception as exc:
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


def _outputs_equal(a: Any, b: Any) -> bool:
    pairs = list(zip(_flatten(a), _flatten(b)))
    return all(
        isinstance(x, torch.Tensor)
        and isinstance(y, torch.Tensor)
        and x.shape == y.shape
        and torch.equal(x, y)
        for x, y in pairs
    )


def _inputs(sides: _Sides, seed: int, device: torch.device) -> list[Any]:
    torch.manual_seed(seed)
    with torch.device(device):
        return _to_device(list(sides.get_inputs()), device)


def _detach_copy(value: Any) -> Any:
    return [v.detach().clone() if isinstance(v, torch.Tensor) else v for v in _flatten(value)]


def _check_correctness(
    sides: _Sides, config: EvalConfig, device: torch.device, result: EvalResult, status: _StatusPipe
) -> None:
    previous: tuple[Any, Any] | None = None
    for trial in range(config.correctness_trials):
        inputs = _inputs(sides, config.seed + 1 + trial, device)
        with torch.no_grad():
            try:
                ref_out = _detach_copy(sides.reference(*_clone(inputs)))
            except Exception as exc:
                raise CandidateFailure(
                    FailureKind.REFERENCE_ERROR, describe_exception(exc)
                ) from None
            cand_inputs = _clone(inputs)
            input_ptrs = {v.data_ptr() for v in cand_inputs if isinstance(v, torch.Tensor)}
            cand_raw = sides.candidate(*cand_inputs)
            if device.type == "cuda":
                torch.cuda.synchronize(device)
            if trial == 0:
                status.phase("run")
        cand_list = _flatten(cand_raw)
        if any(isinstance(t, torch.Tensor) and t.data_ptr() in input_ptrs for t in cand_list):
            _add_finding(result, "returns_input", "an output shares memory with an input")
        if any(
            isinstance(a, torch.Tensor) and not torch.equal(a, b)
            for a, b in zip(cand_inputs, inputs)
        ):
            _add_finding(result, "mutates_inputs", "the candidate changed its input tensors")
        max_diff, mean_diff, failure = _compare(ref_out, cand_raw, config)
        result.max_abs_diff = max(result.max_abs_diff or 0.0, max_diff)
        result.mean_abs_diff = max(result.mean_abs_diff or 0.0, mean_diff)
        cand_out = _detach_copy(cand_raw)
        repeated = previous is not None and _outputs_equal(cand_out, previous[1])
        if repeated and not _outputs_equal(ref_out, previous[0]):
            _add_finding(
                result,
                "constant_output",
                "the same output for different inputs",
                severity="reject",
            )
        previous = (ref_out, cand_out)
        result.correctness_trials = trial + 1
        if failure:
            raise CandidateFailure(FailureKind.WRONG_VALUES, f"trial {trial}: {failure}")


def _add_finding(result: EvalResult, name: str, detail: str, severity: str = "flag") -> None:
    if all(f.name != name for f in result.findings):
        result.findings.append(Finding(name=name, detail=detail, severity=severity))


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


def _timing_phase(
    sides: _Sides, config: EvalConfig, device: torch.device, result: EvalResult, job: dict
) -> None:
    inputs = _inputs(sides, config.seed + 1, device)
    began = time.perf_counter()
    result.reference = _time(sides.reference, inputs, device, config)
    result.candidate = _time(sides.candidate, inputs, device, config)
    if job.get("time_compile_baseline"):
        compiled = torch.compile(sides.reference)
        with torch.no_grad():
            compiled(*inputs)  # compile outside the timed trials
        result.compiled_reference = _time(compiled, inputs, device, config)
    result.timed_s = time.perf_counter() - began


def _recheck(sides: _Sides, config: EvalConfig, device: torch.device) -> None:
    inputs = _inputs(sides, config.seed + RECHECK_SEED_OFFSET, device)
    with torch.no_grad():
        ref_out = _detach_copy(sides.reference(*_clone(inputs)))
        cand_out = sides.candidate(*_clone(inputs))
    _, _, failure = _compare(ref_out, cand_out, config)
    if failure:
        raise CandidateFailure(FailureKind.CHEAT, f"wrong after the timing loop: {failure}")


def _build(job: dict, device: torch.device, status: _StatusPipe) -> _Sides:
    try:
        reference_module = exec_problem_source(job["problem_source"], "autoprofiler_reference")
    except ProblemError as exc:
        raise CandidateFailure(FailureKind.REFERENCE_ERROR, str(exc)) from None
    status.phase("compile")
    candidate_module = _load_candidate(job["candidate_path"])
    seed = job["config"]["seed"]
    init_inputs = list(getattr(reference_module, "get_init_inputs", list)())
    with torch.device(device):
        torch.manual_seed(seed)
        reference = reference_module.Model(*init_inputs).to(device).eval()
        torch.manual_seed(seed)
        try:
            candidate = candidate_module.ModelNew(*init_inputs)
        except Exception as exc:
            kind = classify_exception(exc)
            if kind is FailureKind.RUNTIME_ERROR:
                kind = FailureKind.BUILD_ERROR
            raise CandidateFailure(kind, describe_exception(exc, job["candidate_path"])) from None
        if isinstance(candidate, torch.nn.Module):
            candidate = candidate.to(device).eval()
    return _Sides(reference, candidate, reference_module.get_inputs)


def judge(job: dict, status: _StatusPipe) -> EvalResult:
    """Build, check and time one candidate as the job says; never raises."""
    began = time.perf_counter()
    config = EvalConfig.from_dict(job["config"])
    result = EvalResult(
        problem_hash=job["problem_hash"],
        candidate_hash=job["candidate_hash"],
        torch_version=torch.__version__,
    )
    for finding in scan_source(Path(job["candidate_path"]).read_text(encoding="utf-8")):
        result.findings.append(finding)
    try:
        device = resolve_device(config.device)
        result.device = device_label(device)
        result.timer = "cuda_events" if device.type == "cuda" else "perf_counter"
        atol, rtol = config.tolerance_for("float32")
        result.atol, result.rtol = atol, rtol
        sides = _build(job, device, status)
        result.compiled = True
        try:
            _check_correctness(sides, config, device, result, status)
            _timing_phase(sides, config, device, result, job)
            _recheck(sides, config, device)
        except CandidateFailure:
            raise
        except Exception as exc:
            raise CandidateFailure(
                classify_exception(exc), describe_exception(exc, job["candidate_path"])
            ) from None
        rejected = [f for f in result.findings if f.severity == "reject"]
        if rejected:
            raise CandidateFailure(FailureKind.CHEAT, f"{rejected[0].name}: {rejected[0].detail}")
        result.correct = True
    except CandidateFailure as failure:
        result.correct = False
        result.failure_kind = failure.kind
        result.failure_message = failure.message
    result.wall_s = time.perf_counter() - began
    return result


def _write_atomically(path: str, data: dict) -> None:
    tmp = f"{path}.tmp"
    with open(tmp, "w", encoding="utf-8") as handle:
        json.dump(data, handle)
    os.replace(tmp, path)


def main(argv: list[str]) -> int:
    job = json.loads(Path(argv[1]).read_text(encoding="utf-8"))
    status = _StatusPipe(job.get("status_fd"))
    result = judge(job, status)
    _write_atomically(job["result_path"], result.to_dict())
    status.phase("done")
    sys.stdout.flush()
    sys.stderr.flush()
    # Leave at once: candidate threads or atexit hooks must not hold the verdict back.
    os._exit(0)


if __name__ == "__main__":
    sys.exit(main(sys.argv))
