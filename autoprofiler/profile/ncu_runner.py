"""The target program ncu profiles: builds problems and runs their forwards in NVTX ranges.

Run as ``python -m autoprofiler.profile.ncu_runner --problems FILE.jsonl`` from the repository
root (the package need not be installed). Each JSONL line is a problem (``Problem.to_dict()``)
plus ``"range"``: the NVTX range name its profiled forwards run in. For each problem it seeds
``torch.manual_seed(0)``, builds ``Model(*get_init_inputs())`` and the inputs directly on the GPU
(inside a ``torch.device`` context: no large CPU tensors to copy), runs ``--warmup`` forwards,
then ``--repeats`` profiled forwards, each in its own NVTX push/pop range, synchronized and
timed. A failing problem is reported and the next one runs; GPU memory is freed between
problems. Without CUDA it runs on the CPU with no NVTX ranges (for tests).

``--prime-range NAME`` first runs one tiny kernel in the range NAME, so that the extra cost of
ncu's first profiled kernel in a process lands in start-up, not on the first problem.

Progress goes to stderr as lines ``@@AP {json}`` with ``event`` one of ``ready`` (``device``: its
name), ``primed``, ``begin``, ``built`` (``build_s``: construction and warm-up), ``step``
(``seconds``: one profiled forward), ``fail`` (``error``: one line), ``end``, and ``abort`` when
the CUDA context is unusable and the remaining problems cannot run (read by
``ncu_report.parse_events``).
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

from autoprofiler.profile.ncu_report import EVENT_PREFIX


def emit(event: str, **fields: Any) -> None:
    """Write one progress event line to stderr."""
    sys.stderr.write(EVENT_PREFIX + json.dumps({"event": event, **fields}) + "\n")
    sys.stderr.flush()


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def _read_jsonl(path: str) -> Iterator[dict[str, Any]]:
    with open(path, encoding="utf-8") as handle:
        for line in handle:
            if line.strip():
                yield json.loads(line)


def _to_device(value: Any, device: Any) -> Any:
    import torch

    if isinstance(value, torch.Tensor):
        return value.to(device)
    if isinstance(value, (list, tuple)):
        return type(value)(_to_device(v, device) for v in value)
    return value


def build(problem: Any, device: Any, warmup: int) -> tuple[Any, list[Any]]:
    """``problem``'s model and inputs on ``device`` (seed 0, built inside a ``torch.device``
    context), after ``warmup`` forwards without gradients, synchronized."""
    import torch

    module = problem.load_module()
    torch.manual_seed(0)
    with torch.device(device):
        init = module.get_init_inputs() if hasattr(module, "get_init_inputs") else []
        model = module.Model(*init).to(device).eval()
        inputs = _to_device(list(module.get_inputs()), device)
    with torch.no_grad():
        for _ in range(warmup):
            model(*inputs)
    if device.type == "cuda":
        torch.cuda.synchronize()
    return model, inputs


def _run_problem(row: dict[str, Any], device: Any, warmup: int, repeats: int) -> None:
    import torch

    from autoprofiler.problem import Problem

    cuda = device.type == "cuda"
    t0 = time.perf_counter()
    model, inputs = build(Problem.from_dict(row), device, warmup)
    emit("built", range=row["range"], build_s=time.perf_counter() - t0)
    with torch.no_grad():
        for step in range(repeats):
            start = time.perf_counter()
            if cuda:
                torch.cuda.nvtx.range_push(row["range"])
            model(*inputs)
            if cuda:
                torch.cuda.nvtx.range_pop()
                torch.cuda.synchronize()
            emit("step", range=row["range"], step=step, seconds=time.perf_counter() - start)


def _prime(device: Any, name: str) -> None:
    import torch

    if device.type != "cuda":
        return
    start = time.perf_counter()
    torch.cuda.nvtx.range_push(name)
    torch.ones(1, device=device).add_(1)
    torch.cuda.nvtx.range_pop()
    torch.cuda.synchronize()
    emit("primed", range=name, seconds=time.perf_counter() - start)


def _free(device: Any) -> bool:
    """Release the last problem's memory; False when the CUDA context is no longer usable."""
    import torch

    gc.collect()
    if device.type != "cuda":
        return True
    try:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
    except Exception:  # a sticky CUDA error: the context is lost
        return False
    return True


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", required=True, help="JSONL of problems with 'range'")
    parser.add_argument("--warmup", type=int, default=3)
    parser.add_argument("--repeats", type=int, default=1)
    parser.add_argument("--prime-range", help="NVTX range of one tiny kernel run first")
    args = parser.parse_args(argv)

    import torch

    device = torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if device.type == "cuda":
        torch.cuda.init()
    emit("ready", device=device_name(device))
    if args.prime_range:
        _prime(device, args.prime_range)
    for row in _read_jsonl(args.problems):
        emit("begin", range=row["range"], name=row.get("name", ""))
        try:
            _run_problem(row, device, args.warmup, args.repeats)
        except Exception as exc:  # any failure of the problem is reported
            emit("fail", range=row["range"], error=_one_line(exc))
        if not _free(device):
            emit("abort", range=row["range"], error="CUDA context unusable after this problem")
            return 3
        emit("end", range=row["range"])
    return 0


def device_name(device: Any) -> str:
    import platform

    import torch

    if device.type == "cuda":
        return torch.cuda.get_device_name(device)
    return f"cpu:{platform.machine()}"


if __name__ == "__main__":
    sys.exit(main())
