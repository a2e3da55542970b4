"""Reference timing probe: our timer against ``triton.testing.do_bench``, cause by cause.

On a few memory-bound KernelBench problems our reference times came out 8-12 % slower than
``do_bench``'s. This times each reference ``Model`` forward on the GPU in one process with
``do_bench(fn, return_mode="median")``, with our timer at its defaults (through
``timing_adapter``: ``autoprofiler.evaluate.timing.run_timing_loop``, formerly
``time_callable``), and with a loop of the probe's own that reproduces do_bench's method and
changes one thing at a time: autograd on or off, the L2 flush off or with do_bench's buffer,
a device synchronisation inside or before each trial, a distinct input per trial, the
output's memory (the previous one held, each copied, a fresh ``cudaMalloc``), one pair of
events around all calls, an idle GPU before timing. ``--evaluate`` adds our full
``evaluate`` of the reference as a candidate (the times our workers report in this session).
Each variant runs ``--rounds`` times, interleaved; one table is printed (median ms, ratio to
do_bench) and everything written to ``--out``.

    python benchmarks/reference_timing_probe.py --problems PROBLEMS.jsonl --out probe.json
    python benchmarks/reference_timing_probe.py --problems P.jsonl --ids 19 24 23 --evaluate
"""

from __future__ import annotations

import argparse
import gc
import inspect
import json
import platform
import shlex
import statistics
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _common  # noqa: F401  (puts the checkout on sys.path)

MB = 1024 * 1024


class ProbeError(Exception):
    """A set-up problem; the message is one line."""


def timing_adapter() -> tuple[Callable[..., tuple[float, int]], str]:
    """``time(fn, make_input, device, keep_outputs=False, **settings) -> (median ms, trials)``
    around our timer, at its defaults unless ``settings`` says otherwise, and the name of what
    it calls. ``make_input(j)`` makes input ``j`` of a pool (``-1``: the warm-up's).

    Our timer has been ``time_callable(fn, args, device, *, ..., flush_l2)`` and is now
    ``run_timing_loop(fn, make_input, device, settings, pool_bytes, keep_outputs)``; any
    other signature raises ``ProbeError`` naming it.
    """
    from autoprofiler.evaluate import timing

    loop = getattr(timing, "run_timing_loop", None)
    if loop is not None:
        signature = inspect.signature(loop)
        wanted = ["fn", "make_input", "device", "settings", "pool_bytes", "keep_outputs"]
        helpers = all(hasattr(timing, n) for n in ("LoopSettings", "pool_budget_bytes"))
        if list(signature.parameters)[: len(wanted)] != wanted or not helpers:
            raise ProbeError(
                f"autoprofiler.evaluate.timing.run_timing_loop{signature} (or its LoopSettings, "
                f"pool_budget_bytes) is not the expected ({', '.join(wanted)}): update "
                "timing_adapter"
            )

        def run(fn: Any, make_input: Any, device: Any, keep_outputs: bool = False, **kw: Any):
            settings = timing.LoopSettings(**kw)
            record, outputs = loop(
                fn, make_input, device, settings, timing.pool_budget_bytes(device), keep_outputs
            )
            del outputs
            return _median(list(record.trial_ms)), len(record.trial_ms)

        return run, f"run_timing_loop{signature}"
    legacy = getattr(timing, "time_callable", None)
    if legacy is None:
        raise ProbeError(
            "autoprofiler.evaluate.timing has neither run_timing_loop nor time_callable: "
            "update timing_adapter"
        )
    signature = inspect.signature(legacy)
    positional = [
        p.name
        for p in signature.parameters.values()
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
    ]
    if len(positional) < 3 or "flush_l2" not in signature.parameters:
        raise ProbeError(
            f"autoprofiler.evaluate.timing.time_callable{signature} is not the expected "
            "(fn, args, device, *, ..., flush_l2=...): update timing_adapter"
        )

    def run_legacy(fn: Any, make_input: Any, device: Any, keep_outputs: bool = False, **kw: Any):
        stats = legacy(fn, make_input(-1), device, **kw)
        return float(stats.median_ms), int(stats.trials)

    return run_legacy, f"time_callable{signature}"


def our_flush_bytes() -> int:
    from autoprofiler.evaluate import timing

    return int(getattr(timing, "L2_FLUSH_BYTES", 256 * MB))


def _median(times: list[float]) -> float:
    return float(statistics.median(times))


@dataclass(frozen=True)
class Loop:
    """One way of timing: each field changes one thing from do_bench's method (CUDA events
    around each call, the L2 flushed before it, the same input, the output dropped)."""

    flush: str = "ours"  # "ours" (our buffer), "do_bench" (Triton's), "none"
    sync_inside: bool = False  # a device-wide synchronisation before the end event
    sync_before: bool = False  # a device-wide synchronisation before each trial
    sync_after: bool = False  # a device-wide synchronisation after the end event
    spin_cycles: int = 0  # a GPU spin queued after the flush, before the start event
    distinct_inputs: bool = False  # a pool of inputs made beforehand, one per trial
    hold_previous: bool = False  # the previous output alive during the call
    copy_output: bool = False  # each output copied (and kept) after its trial
    fresh_malloc: bool = False  # the allocator's cache emptied: cudaMalloc inside the call
    batched: bool = False  # one pair of events around all calls (flushes subtracted)


def own_loop(
    model: Any, make_input: Callable[[int], list], loop: Loop, trials: int, flushes: dict
) -> tuple[float, int]:
    """Median (batched: mean) ms of ``trials`` calls of ``model`` timed as ``loop`` says."""
    import torch

    flush = flushes[loop.flush]
    warm = make_input(-1)
    pool = [warm]
    if loop.distinct_inputs:
        input_bytes = sum(x.numel() * x.element_size() for x in warm if torch.is_tensor(x))
        free, _ = torch.cuda.mem_get_info()
        fits = int(0.3 * free // max(input_bytes, 1))
        pool = [make_input(j) for j in range(max(2, min(trials, fits)))]
    for _ in range(3):
        model(*warm)
    torch.cuda.synchronize()
    if loop.batched:
        return _batched(model, pool, trials, flush)
    starts = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    ends = [torch.cuda.Event(enable_timing=True) for _ in range(trials)]
    held, copies = None, []
    for j, (start, end) in enumerate(zip(starts, ends)):
        args = pool[j % len(pool)]
        if loop.fresh_malloc:
            torch.cuda.synchronize()
            torch.cuda.empty_cache()
        elif loop.sync_before:
            torch.cuda.synchronize()
        if flush is not None:
            flush()
        if loop.spin_cycles:
            torch.cuda._sleep(loop.spin_cycles)
        start.record()
        out = model(*args)
        if loop.sync_inside:
            torch.cuda.synchronize()
        end.record()
        if loop.sync_after:
            torch.cuda.synchronize()
        if loop.hold_previous:  # as KernelBench's `_ = fn()`: the last output lives on
            held = out
        if loop.copy_output:  # at most two copies alive: the traffic, not the memory
            copies = [*copies[-1:], out.detach().clone() if torch.is_tensor(out) else out]
        del out
    torch.cuda.synchronize()
    del held, copies, pool
    return _median([s.elapsed_time(e) for s, e in zip(starts, ends)]), trials


def _batched(model: Any, pool: list, trials: int, flush: Any) -> tuple[float, int]:
    import torch

    def timed(body: Callable[[int], None]) -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        torch.cuda.synchronize()
        start.record()
        for j in range(trials):
            body(j)
        end.record()
        torch.cuda.synchronize()
        return start.elapsed_time(end)

    def call(j: int) -> None:
        if flush is not None:
            flush()
        model(*pool[j % len(pool)])

    total = timed(call)
    if flush is not None:
        total -= timed(lambda _j: flush())
    return total / trials, trials


def build_variants(
    model: Any, make_input: Callable[[int], list], device: Any, args: argparse.Namespace
) -> list[tuple[str, Callable[[], tuple[float, int]]]]:
    """(name, measure) for every variant; ``measure()`` returns (ms, trials; 0 if unknown)."""
    import torch
    import triton
    import triton.testing

    ours_timer, ours_name = timing_adapter()
    ours_name = ours_name.split("(")[0]
    ours_buffer = torch.empty(our_flush_bytes(), dtype=torch.int8, device=device)
    driver = triton.runtime.driver.active
    theirs_buffer = driver.get_empty_cache_for_benchmark()

    def flush_theirs() -> None:
        driver.clear_cache(theirs_buffer)

    flushes = {"ours": ours_buffer.zero_, "do_bench": flush_theirs, "none": None}
    same_input = make_input(-1)

    def fn() -> Any:
        return model(*same_input)

    def no_grad(measure: Callable[[], tuple[float, int]]) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            with torch.no_grad():
                return measure()

        return run

    def after_idle(measure: Callable[[], tuple[float, int]]) -> Callable[[], tuple[float, int]]:
        def run() -> tuple[float, int]:
            torch.cuda.synchronize()
            time.sleep(args.idle_s)
            return measure()

        return run

    def do_bench() -> tuple[float, int]:
        return float(triton.testing.do_bench(fn, return_mode="median")), 0

    def ours(**options: Any) -> Callable[[], tuple[float, int]]:
        return lambda: ours_timer(model, make_input, device, **options)

    def own(**fields: Any) -> Callable[[], tuple[float, int]]:
        return no_grad(lambda: own_loop(model, make_input, Loop(**fields), args.trials, flushes))

    ours_mb = f"{our_flush_bytes() // MB} MB int8"
    theirs_mb = f"{theirs_buffer.numel() * theirs_buffer.element_size() // MB} MB"
    idle = f"after {args.idle_s:g} s idle"
    return [
        ("do_bench median (no_grad)", no_grad(do_bench)),
        ("do_bench median (grad enabled)", do_bench),
        (f"do_bench {idle} (no_grad)", no_grad(after_idle(do_bench))),
        (f"{ours_name} defaults (no_grad)", no_grad(ours())),
        (
            f"{ours_name} keep_outputs=True, as evaluate() (no_grad)",
            no_grad(ours(keep_outputs=True)),
        ),
        (f"{ours_name} defaults (grad enabled)", ours()),
        (f"{ours_name} flush_l2=False (no_grad)", no_grad(ours(flush_l2=False))),
        (f"{ours_name} {idle} (no_grad)", no_grad(after_idle(ours()))),
        (f"own loop: do_bench's method, flush {ours_mb}", own()),
        (f"own loop: flush with do_bench's buffer ({theirs_mb})", own(flush="do_bench")),
        ("own loop: no flush", own(flush="none")),
        ("own loop: device sync before the end event", own(sync_inside=True)),
        ("own loop: device sync before each trial", own(sync_before=True)),
        (
            "own loop: device sync before each trial and after its end event",
            own(sync_before=True, sync_after=True),
        ),
        (
            "own loop: device sync before each trial, a 0.1 ms GPU spin after the flush",
            own(sync_before=True, spin_cycles=200_000),
        ),
        ("own loop: a distinct input per trial", own(distinct_inputs=True)),
        ("own loop: previous output held", own(hold_previous=True)),
        ("own loop: each output copied after its trial", own(copy_output=True)),
        ("own loop: output cudaMalloc'd fresh each call", own(fresh_malloc=True)),
        ("own loop: one event pair around all calls, no flush", own(batched=True, flush="none")),
        ("own loop: one event pair around all calls, flush subtracted", own(batched=True)),
    ]


def evaluate_reference(problem: Any, output_slab: bool = True) -> dict:
    """Our full ``evaluate`` of the reference as a candidate: the worker's reference and
    candidate medians in this session; ``output_slab`` False hands the outputs over on the
    host rather than in the GPU slab the reference process holds."""
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.evaluate.baselines import reference_as_candidate

    config = EvalConfig(device="cuda", output_slab=output_slab)
    result = evaluate(problem, reference_as_candidate(problem), config)
    return {
        "correct": result.correct,
        "failure": result.failure_message,
        "reference_ms": result.reference.median_ms if result.reference else None,
        "candidate_ms": result.candidate.median_ms if result.candidate else None,
        "trials": result.reference.trials if result.reference else 0,
    }


def _row(problem: str, round_no: int, variant: str, ms: Any, trials: int, error: str) -> dict:
    return {
        "problem": problem,
        "round": round_no,
        "variant": variant,
        "ms": ms,
        "trials": trials,
        "error": error,
    }


def probe_problem(problem: Any, args: argparse.Namespace) -> list[dict]:
    """Every variant ``args.rounds`` times on one problem; a row per measurement."""
    import torch

    device = torch.device("cuda")
    module = problem.load_module("autoprofiler_timing_probe")
    with torch.device(device):
        torch.manual_seed(42)
        model = module.Model(*module.get_init_inputs()).to(device).eval()

    def make_input(j: int) -> list:
        torch.manual_seed(43 + 1_000_003 * (j + 1))
        with torch.device(device):
            values = list(module.get_inputs())
        return [x.to(device) if isinstance(x, torch.Tensor) else x for x in values]

    rows = []
    variants = build_variants(model, make_input, device, args)
    for round_no in range(args.rounds):
        for name, measure in variants:
            try:
                ms, trials = measure()
                error = ""
            except Exception as exc:  # recorded, the probe goes on
                ms, trials, error = None, 0, f"{type(exc).__name__}: {exc}"[:300]
            rows.append(_row(problem.key, round_no, name, ms, trials, error))
    del model, variants
    gc.collect()
    torch.cuda.empty_cache()
    for slab in (True, False) if args.evaluate else ():
        label = "evaluate()" if slab else "evaluate(), outputs handed over on the host"
        try:
            result = evaluate_reference(problem, output_slab=slab)
        except Exception as exc:  # recorded, the probe goes on
            rows.append(_row(problem.key, 0, label, None, 0, f"{exc}"[:300]))
        else:
            for side in ("reference", "candidate"):
                ms = result[f"{side}_ms"]
                name = f"{label}: {side} median"
                rows.append(_row(problem.key, 0, name, ms, result["trials"], result["failure"]))
    return rows


def summarize(rows: list[dict]) -> list[dict]:
    """Per problem and variant: the median over rounds, its ratio to do_bench's, the spread."""
    summary = []
    for problem in dict.fromkeys(r["problem"] for r in rows):
        mine = [r for r in rows if r["problem"] == problem]
        by_variant: dict[str, list[float]] = {}
        for r in mine:
            by_variant.setdefault(r["variant"], [])
            if r["ms"] is not None:
                by_variant[r["variant"]].append(r["ms"])
        base = by_variant.get("do_bench median (no_grad)") or []
        base_ms = statistics.median(base) if base else None
        for variant, times in by_variant.items():
            ms = statistics.median(times) if times else None
            summary.append(
                {
                    "problem": problem,
                    "variant": variant,
                    "median_ms": ms,
                    "ratio_to_do_bench": ms / base_ms if ms and base_ms else None,
                    "spread": max(times) / min(times) if len(times) > 1 else None,
                    "errors": sorted({r["error"] for r in mine if r["variant"] == variant} - {""}),
                }
            )
    return summary


def print_table(summary: list[dict]) -> None:
    def fmt(value: float | None, digits: int) -> str:
        return "-" if value is None else f"{value:.{digits}f}"

    width = max(len(s["variant"]) for s in summary)
    print(f"{'problem':<22} {'variant':<{width}} {'median ms':>10} {'/do_bench':>9} {'spread':>7}")
    for s in summary:
        print(
            f"{s['problem'][:22]:<22} {s['variant']:<{width}} {fmt(s['median_ms'], 4):>10} "
            f"{fmt(s['ratio_to_do_bench'], 3):>9} {fmt(s['spread'], 3):>7}"
            + (f"  {s['errors'][0][:80]}" if s["errors"] else "")
        )


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problems", type=Path, required=True, help="problems JSONL or folder")
    parser.add_argument("--level", type=int, default=1)
    parser.add_argument("--ids", type=int, nargs="+", default=[19, 24, 23])
    parser.add_argument("--rounds", type=int, default=3, help="each variant this many times")
    parser.add_argument("--trials", type=int, default=30, help="trials of the probe's own loops")
    parser.add_argument("--idle-s", type=float, default=1.0, help="idle before the idle variants")
    parser.add_argument("--evaluate", action="store_true", help="also our full evaluate()")
    parser.add_argument("--out", type=Path, default=Path("reference_timing_probe.json"))
    args = parser.parse_args(argv)
    try:
        _, signature = timing_adapter()
        from autoprofiler.problem import ProblemError, load_problems

        try:
            problems = load_problems(args.problems, [args.level], args.ids).problems
        except ProblemError as exc:
            raise ProbeError(str(exc)) from None
        rank = {pid: i for i, pid in enumerate(args.ids)}
        problems.sort(key=lambda p: rank.get(p.problem_id, len(rank)))
        if not problems:
            raise ProbeError(f"{args.problems}: no level {args.level} problem with ids {args.ids}")
        import torch
        import triton

        if not torch.cuda.is_available():
            raise ProbeError("no CUDA device: this probe times on the GPU")
    except ProbeError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    began = time.monotonic()
    rows: list[dict] = []
    for problem in problems:
        rows += probe_problem(problem, args)
        print(f"{problem.key}: done at {time.monotonic() - began:.0f} s", flush=True)
    summary = summarize(rows)
    print_table(summary)
    args.out.write_text(
        json.dumps(
            {
                "gpu": torch.cuda.get_device_name(0),
                "torch": torch.__version__,
                "triton": triton.__version__,
                "python": platform.python_version(),
                "command": shlex.join(["python", *sys.argv]),
                "our_timer": signature,
                "our_flush_bytes": our_flush_bytes(),
                "wall_s": time.monotonic() - began,
                "summary": summary,
                "rows": rows,
            },
            indent=1,
        ),
        encoding="utf-8",
    )
    print(f"rows: {args.out} ({time.monotonic() - began:.0f} s)", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
