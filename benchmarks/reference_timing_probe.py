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
``evaluate`` of the reference as a candidate (the times our workers report in this session,
with each side's trial, host and tail times and device allocations; ``--evaluate-ways`` also
with outputs on the host and with no fork). ``--hold-gib`` times our loop beside memory another
process holds; ``--churn-rounds`` times it in fresh processes: first thing, after calls like the
candidate's correctness trials (the allocator's cache emptied or kept), just after or 3 s after
memory was given back to the driver, and beside memory in holes. Each variant runs
``--rounds`` times, interleaved; each row is printed as it is measured, one table at the end
(median ms, ratio to do_bench), and everything written to ``--out``.

    python benchmarks/reference_timing_probe.py --problems PROBLEMS.jsonl --out probe.json
    python benchmarks/reference_timing_probe.py --problems P.jsonl --ids 19 24 23 --evaluate
    python benchmarks/reference_timing_probe.py --problems P.jsonl --ids 19 --rounds 0 \
        --churn-rounds 1 --evaluate
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import inspect
import json
import logging
import os
import platform
import re
import shlex
import statistics
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import _common  # puts the checkout on sys.path; its ROOT names it

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


class _TrialLog(logging.Handler):
    """Keeps the verdict's debug line of raw trial times."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


def _trials_from(line: str) -> dict[str, dict]:
    """Per side (``candidate``, ``reference``), the raw trial, host and tail times and the
    device allocations of its timed loop, from the verdict's debug line."""
    lists = [json.loads(part) for part in re.findall(r"\[[^\]]*\]", line)]
    allocs = [int(n) for n in re.findall(r"(\d+) allocations", line)]
    if len(lists) != 6 or len(allocs) != 2:
        return {}
    fields = ("trial_ms", "host_ms", "tail_ms")
    return {
        side: {**dict(zip(fields, lists[3 * i : 3 * i + 3])), "device_allocs": allocs[i]}
        for i, side in enumerate(("candidate", "reference"))
    }


def evaluate_reference(problem: Any, output_slab: bool = True, fork: bool = True) -> dict:
    """Our full ``evaluate`` of the reference as a candidate: the worker's reference and
    candidate medians and raw trials in this session; ``output_slab`` False hands the outputs
    over on the host rather than in the GPU slab the reference process holds; ``fork`` False
    starts the candidate as a fresh interpreter rather than from a warm zygote."""
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.evaluate.baselines import reference_as_candidate

    config = EvalConfig(device="cuda", output_slab=output_slab)
    handler = _TrialLog()
    verdict_log = logging.getLogger("autoprofiler.evaluate.verdict")
    verdict_log.addHandler(handler)
    level = verdict_log.level
    verdict_log.setLevel(logging.DEBUG)
    forking = os.environ.get("AUTOPROFILER_FORKSERVER")
    os.environ["AUTOPROFILER_FORKSERVER"] = "1" if fork else "0"
    try:
        result = evaluate(problem, reference_as_candidate(problem), config)
    finally:
        verdict_log.removeHandler(handler)
        verdict_log.setLevel(level)
        if forking is None:
            os.environ.pop("AUTOPROFILER_FORKSERVER", None)
        else:
            os.environ["AUTOPROFILER_FORKSERVER"] = forking
    loops = _trials_from(handler.lines[-1]) if handler.lines else {}
    return {
        "correct": result.correct,
        "failure": result.failure_message,
        "reference_ms": result.reference.median_ms if result.reference else None,
        "candidate_ms": result.candidate.median_ms if result.candidate else None,
        "reference_loop": loops.get("reference", {}),
        "candidate_loop": loops.get("candidate", {}),
    }


HOLDER = """
import json, sys, torch
from autoprofiler.evaluate.cuda_ipc import OutputSlab
size = int(float(sys.argv[1]) * 2**30)
layout = [{"dtype": "uint8", "shape": [size], "offset": 0, "nbytes": size}]
slab = OutputSlab({"held": layout}, torch.device("cuda"))
print(json.dumps(slab.offer()), flush=True)
sys.stdin.read()
slab.close()
"""


@contextlib.contextmanager
def memory_held_elsewhere(gib: float, open_here: bool) -> Iterator[None]:
    """``gib`` GiB of device memory held by another process (as the reference process holds
    an output slab), and (``open_here``) opened in this one over CUDA IPC, as a candidate
    opens its slab."""
    import torch

    from autoprofiler.evaluate.cuda_ipc import OpenedSlab

    holder = subprocess.Popen(
        [sys.executable, "-c", HOLDER, str(gib)], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
        text=True, env={**os.environ, "PYTHONPATH": str(_common.ROOT)},
    )  # fmt: skip
    opened = None
    try:
        line = holder.stdout.readline()
        if not line:
            raise RuntimeError(f"the process holding {gib:g} GiB did not start")
        if open_here:
            opened = OpenedSlab(json.loads(line), torch.device("cuda"))
        yield
    finally:
        if opened is not None:
            opened.close()
        holder.stdin.close()
        holder.wait(timeout=60)


def held_memory_variants(
    model: Any, make_input: Callable[[int], list], device: Any, gib: float
) -> list[tuple[str, Callable[[], tuple[float, int, list[float]]]]]:
    """Our loop as ``evaluate()`` runs it (outputs kept), raw trials returned: alone, beside
    ``gib`` GiB held by another process, and with that memory opened here too."""
    import torch

    from autoprofiler.evaluate import timing

    def loop() -> tuple[float, int, list[float]]:
        with torch.no_grad():
            record, outputs = timing.run_timing_loop(
                model, make_input, device, timing.LoopSettings(),
                timing.pool_budget_bytes(device), keep_outputs=True,
            )  # fmt: skip
        del outputs
        return _median(record.trial_ms), record.trials, [round(t, 4) for t in record.trial_ms]

    def beside(open_here: bool) -> Callable[[], tuple[float, int, list[float]]]:
        def run() -> tuple[float, int, list[float]]:
            with memory_held_elsewhere(gib, open_here):
                return loop()

        return run

    return [
        ("run_timing_loop keep_outputs=True, raw trials", loop),
        (f"run_timing_loop keep_outputs=True, {gib:g} GiB held by another process", beside(False)),
        (
            f"run_timing_loop keep_outputs=True, {gib:g} GiB held elsewhere and opened here",
            beside(True),
        ),
    ]


CHURN = """
import gc, json, sys, time, torch
from autoprofiler.evaluate import timing
from autoprofiler.evaluate.inputs import clone_inputs, make_inputs
from autoprofiler.problem import exec_problem_source
calls, empty = int(sys.argv[1]), sys.argv[2] == "1"
freed_gib, pause_s = float(sys.argv[3]), float(sys.argv[4])
module = exec_problem_source(sys.stdin.read(), "autoprofiler_churn_probe")
device = torch.device("cuda")
with torch.device(device):
    torch.manual_seed(42)
    model = module.Model(*module.get_init_inputs()).to(device).eval()
with torch.no_grad():
    for call in range(calls):  # as the candidate's correctness trials: input, clone, output
        inputs = make_inputs(module, 7 + call, device)
        given = clone_inputs(inputs)
        out = model(*given)
        torch.cuda.synchronize()
        del inputs, given, out
    if freed_gib:  # memory written, then given back to the driver
        block = torch.ones(int(freed_gib * 2**30), dtype=torch.uint8, device=device)
        torch.cuda.synchronize()
        del block
    gc.collect()
    if empty or freed_gib:
        torch.cuda.empty_cache()
    time.sleep(pause_s)
    record, outputs = timing.run_timing_loop(
        model, lambda j: make_inputs(module, 1000 + j, device), device, timing.LoopSettings(),
        timing.pool_budget_bytes(device), keep_outputs=True,
    )
print(json.dumps({"trial_ms": [round(t, 4) for t in record.trial_ms],
                  "tail_ms": [round(t, 4) for t in record.tail_ms],
                  "device_allocs": record.device_allocs}))
"""

FRAGMENTER = """
import sys, torch
total, chunk = int(float(sys.argv[1]) * 2**30), int(float(sys.argv[2]) * 2**20)
blocks = [torch.empty(chunk, dtype=torch.uint8, device="cuda") for _ in range(total // chunk)]
del blocks[::2]  # every other block given back: the free memory is in holes between the rest
torch.cuda.empty_cache()
print("ready", flush=True)
sys.stdin.read()
"""


@contextlib.contextmanager
def fragmented_memory(gib: float, chunk_mib: float) -> Iterator[None]:
    """``gib`` GiB of device memory taken by another process in ``chunk_mib`` MiB blocks,
    every other one given back: free memory in holes, as a long-lived process that allocated
    and freed leaves it."""
    holder = subprocess.Popen(
        [sys.executable, "-c", FRAGMENTER, str(gib), str(chunk_mib)], stdin=subprocess.PIPE,
        stdout=subprocess.PIPE, text=True,
    )  # fmt: skip
    try:
        if holder.stdout.readline().strip() != "ready":
            raise RuntimeError(f"the process fragmenting {gib:g} GiB did not start")
        yield
    finally:
        holder.stdin.close()
        holder.wait(timeout=60)


def churn_variants(problem: Any) -> list[tuple[str, Callable[[], tuple]]]:
    """Our loop as ``evaluate()`` runs it, each in a fresh process: first thing; after five
    calls as the candidate's correctness trials make them (inputs, their copies, outputs),
    the allocator's cache emptied after them or kept; after 40 GiB written and given back to
    the driver, at once or 3 s later; beside another process that just gave back every other
    block of 60 GiB, at once or 3 s later."""

    def fresh(calls: int, empty: bool, freed_gib: float = 0, pause_s: float = 0) -> Callable:
        def run() -> tuple:
            argv = [str(calls), "1" if empty else "0", str(freed_gib), str(pause_s)]
            done = subprocess.run(
                [sys.executable, "-c", CHURN, *argv],
                input=problem.source, capture_output=True, text=True, timeout=300, check=False,
                env={**os.environ, "PYTHONPATH": str(_common.ROOT)},
            )  # fmt: skip
            if done.returncode != 0:
                raise RuntimeError(done.stderr.strip().splitlines()[-1][:200])
            loop = json.loads(done.stdout.strip().splitlines()[-1])
            trial_ms = loop["trial_ms"]
            return _median(trial_ms), len(trial_ms), trial_ms, loop

        return run

    def beside_holes(pause_s: float) -> Callable[[], tuple]:
        def run() -> tuple:
            with fragmented_memory(60, 64):
                return fresh(0, False, 0, pause_s)()

        return run

    return [
        ("fresh process: our loop first", fresh(0, False)),
        ("fresh process: our loop after 5 correctness-like calls, cache emptied", fresh(5, True)),
        ("fresh process: our loop after 5 correctness-like calls, cache kept", fresh(5, False)),
        ("fresh process: our loop just after 40 GiB given back", fresh(0, False, 40)),
        ("fresh process: our loop 3 s after 40 GiB given back", fresh(0, False, 40, 3)),
        ("fresh process: our loop beside 60 GiB in 64 MiB holes just made", beside_holes(0)),
        ("fresh process: our loop beside 60 GiB in 64 MiB holes made 3 s before", beside_holes(3)),
    ]


def _row(
    problem: str, round_no: int, variant: str, ms: Any, trials: int, error: str,
    trial_ms: list[float] | None = None,
) -> dict:  # fmt: skip
    row = {
        "problem": problem,
        "round": round_no,
        "variant": variant,
        "ms": ms,
        "trials": trials,
        "error": error,
    }
    if trial_ms is not None:
        row["trial_ms"] = trial_ms
    return row


def _measured(problem: str, rounds: int, variants: list[tuple[str, Callable]]) -> list[dict]:
    """A row per variant and round, the variants interleaved; ``measure()`` returns (ms,
    trials), (ms, trials, raw trial ms) or (ms, trials, raw trial ms, the loop's record)."""
    rows = []
    for round_no in range(rounds):
        for name, measure in variants:
            try:
                ms, trials, *raw = measure()
                error = ""
            except Exception as exc:  # recorded, the probe goes on
                ms, trials, raw, error = None, 0, [], f"{type(exc).__name__}: {exc}"[:300]
            row = _row(problem, round_no, name, ms, trials, error, *raw[:1])
            rows.append({**row, "loop": raw[1]} if len(raw) > 1 else row)
            print(json.dumps(rows[-1]), flush=True)  # a probe cut short keeps what it measured
    return rows


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

    variants = build_variants(model, make_input, device, args)
    rows = _measured(problem.key, args.rounds, variants)
    held = held_memory_variants(model, make_input, device, args.hold_gib) if args.hold_gib else []
    rows += _measured(problem.key, args.hold_rounds, held)
    rows += _measured(problem.key, args.churn_rounds, churn_variants(problem))
    del model, variants, held
    gc.collect()
    torch.cuda.empty_cache()
    ways = [(True, True)] if args.evaluate else []
    ways += [(False, True), (True, False)] if args.evaluate_ways else []
    for slab, fork in ways:
        label = "evaluate()" + ("" if slab else ", outputs handed over on the host")
        label += "" if fork else ", candidate not forked"
        try:
            result = evaluate_reference(problem, output_slab=slab, fork=fork)
        except Exception as exc:  # recorded, the probe goes on
            rows.append(_row(problem.key, 0, label, None, 0, f"{exc}"[:300]))
        else:
            for side in ("reference", "candidate"):
                loop = result[f"{side}_loop"]
                trial_ms = loop.get("trial_ms", [])
                row = _row(
                    problem.key, 0, f"{label}: {side} median", result[f"{side}_ms"],
                    len(trial_ms), result["failure"], trial_ms,
                )  # fmt: skip
                rows.append({**row, "loop": loop})
                print(json.dumps(rows[-1]), flush=True)
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
    parser.add_argument(
        "--evaluate-ways", action="store_true",
        help="with --evaluate, also with outputs handed over on the host and with no fork",
    )  # fmt: skip
    parser.add_argument(
        "--hold-gib", type=float, default=0.0,
        help="also our loop beside this much device memory held (and opened) by another process",
    )  # fmt: skip
    parser.add_argument("--hold-rounds", type=int, default=3, help="rounds of the --hold-gib loops")
    parser.add_argument(
        "--churn-rounds", type=int, default=0,
        help="rounds of our loop in fresh processes, first and after correctness-like calls",
    )  # fmt: skip
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
