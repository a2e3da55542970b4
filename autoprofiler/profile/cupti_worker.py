"""The CUPTI profiling worker: one process per problem that builds it once, warms it up, and then
collects metrics through CUPTI's range profiler, one request at a time.

Run as ``python -m autoprofiler.profile.cupti_worker --problem FILE.json`` (``Problem.to_dict()``),
or without ``--problem`` as a standby: it imports what it needs (Python, PyTorch, torch.profiler;
no CUDA yet) and waits for ``{"op": "load", "problem": FILE, "warmup": N}`` as its first request,
so a profiler can start the next problem's worker while the current one works. Requests come as
JSON lines on stdin; each answer is one JSON line on the worker's original stdout (the problem's
own prints go to stderr, so they cannot corrupt the channel):

- once the problem is loaded, unasked: ``{"event": "ready", "device", "chip", "build_s",
  "setup_s", "launches_s", "launch_records", "launched"}``, or ``{"event": "fail", "error"}``
  and exit 2 (no GPU, no CUPTI, no permission, a broken problem). Loading runs one forward for
  the kernels' names and launch configurations, recorded by CUPTI's activity API (or, where
  that fails or ``AUTOPROFILER_CUPTI_ACTIVITY=0``, torch.profiler: ``launch_records`` says
  which; ``launches_s``);
- ``{"op": "check", "metrics": [...]}`` -> ``{"event": "checked", "unsupported": [...]}``: the
  metrics this chip's profiler host refuses;
- ``{"op": "collect", "metrics": [...], "max_ranges": N, "replay": "kernel"|"user"}`` ->
  ``{"event": "collected", "metrics", "units", "kernels": [[range name, [value per metric]],
  ...], "passes", "replay", "forwards", "dropped", "max_ranges", "replay_s", "evaluate_s",
  "launches", "launched"}``: every kernel a forward launches is a range (auto range), the range
  profiler enabled for that step alone. ``kernel`` replay (for a request that names none): one
  forward, each kernel replayed by CUPTI for the config's passes, the memory it touches saved
  and restored around each pass. ``user`` replay: the whole forward run once per pass
  (``forwards``), the L2 cache flushed before each; no memory is saved or restored, so a pass
  costs one forward, and a kernel sees the cache its predecessors left, as it does unprofiled
  (ncu, by default, flushes it before every kernel). A user-replayed step whose passes the
  forwards did not complete (a forward that launches other kernels each time) is run again with
  kernel replay: the answer's ``replay`` is then ``kernel`` and ``user_replay_failed`` says why.
  Without ``max_ranges`` the counter data holds the kernels one forward launched plus a margin
  (CUPTI's start and its counter data grow with the ranges they hold: about 1 ms per range on an
  H200); if ranges were dropped the step runs once more with room for ``DEFAULT_MAX_RANGES``.
  CUPTI names ranges by number; ``launches`` gives each range its kernel's name and launch
  configuration (empty when that forward launched another number of kernels than the ranges:
  ``launched``);
- a request that fails -> ``{"event": "error", "error"}``; the worker goes on.

End of input ends the worker.
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import sys
import time
from typing import IO, Any

DEFAULT_MAX_RANGES = 2048
STANDBY_IMPORTS = (
    "torch",
    "torch.profiler",
    "autoprofiler.problem",
    "autoprofiler.profile.cupti_api",
    "autoprofiler.profile.ncu_runner",
)
ACTIVITY_ENV = "AUTOPROFILER_CUPTI_ACTIVITY"  # "0": launch records from torch.profiler
RANGE_MARGIN = 32  # ranges beyond the kernels seen, for a forward that launches a few more
EXTRA_FORWARDS = 2  # user replay: forwards beyond the config's passes before giving up
FLUSH_BYTES = 256 * 2**20  # what is written to flush the L2 where its size is unknown


class UserReplayIncomplete(RuntimeError):
    """The forwards of a user-replayed step ended before CUPTI had every pass."""


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:400]


class _Session:
    """CUPTI set up on this process's CUDA context, and the problem built on it."""

    def __init__(self, problem_file: str, warmup: int) -> None:
        import torch

        from autoprofiler.problem import Problem
        from autoprofiler.profile.cupti_api import Cupti, CuptiError, current_context, load_cupti
        from autoprofiler.profile.ncu_runner import build, device_name

        if not torch.cuda.is_available():
            raise CuptiError("no CUDA GPU visible to this process: CUPTI needs one")
        start = time.perf_counter()
        self.device = torch.device("cuda")
        torch.zeros(1, device=self.device)  # makes the primary context current
        self.cupti = Cupti(load_cupti())
        self.cupti.initialize()
        index = torch.cuda.current_device()
        self.chip = self.cupti.chip_name(index)
        self.context = current_context()
        self.availability = self.cupti.counter_availability(self.context)
        self.setup_s = time.perf_counter() - start
        with open(problem_file, encoding="utf-8") as handle:
            problem = Problem.from_dict(json.load(handle))
        start = time.perf_counter()
        self.model, self.inputs = build(problem, self.device, warmup)
        self.build_s = time.perf_counter() - start
        self.device_name = device_name(self.device)
        self._launches: list[dict[str, Any]] | None = None
        self._flush: Any = None
        self.launch_records = ""
        start = time.perf_counter()
        self.launches()
        self.launches_s = time.perf_counter() - start

    def launches(self) -> list[dict[str, Any]]:
        """The kernels one forward launches, in order, with their launch configuration (from
        CUPTI's activity records, else torch.profiler's; one forward, run once, before the
        range profiler is enabled)."""
        if self._launches is None:
            import torch

            from autoprofiler.profile.cupti_api import reserved_shared_memory

            reserved = reserved_shared_memory(torch.cuda.current_device())
            if os.environ.get(ACTIVITY_ENV) != "0":
                try:
                    self._launches = self._activity_launches(reserved)
                    self.launch_records = "cupti"
                except Exception as exc:
                    sys.stderr.write(f"no launch records from CUPTI: {_one_line(exc)}\n")
            if self._launches is None:
                try:
                    self._launches = kernel_launches(self.model, self.inputs, reserved)
                    self.launch_records = "torch.profiler"
                except Exception as exc:  # names are a nicety: the counters still come
                    sys.stderr.write(f"no launch records from torch.profiler: {_one_line(exc)}\n")
                    self._launches = []
        return self._launches

    def _activity_launches(self, reserved: int) -> list[dict[str, Any]]:
        import torch

        from autoprofiler.profile.cupti_activity import KernelActivity

        def forward() -> None:
            with torch.no_grad():
                self.model(*self.inputs)
            torch.cuda.synchronize()

        records = KernelActivity(self.cupti, reserved).record(forward)
        if not records:
            raise RuntimeError("CUPTI recorded no kernel of the forward")
        return records

    def config(self) -> Any:
        from autoprofiler.profile.cupti_api import MetricConfig

        return MetricConfig(self.cupti, self.chip, self.availability)

    def _accepted(self, metrics: list[str]) -> bool:
        from autoprofiler.profile.cupti_api import CuptiError

        try:
            with self.config() as config:
                config.add(metrics)
                config.image()
        except CuptiError:
            return False
        return True

    def check(self, metrics: list[str]) -> list[str]:
        """The metrics to leave out for the rest to be scheduled together: each one this chip
        refuses alone, then, while the others together are still refused, the halves that
        are (bisecting)."""
        refused = [m for m in metrics if not self._accepted([m])]
        kept = [m for m in metrics if m not in refused]
        return refused + self._refused_together(kept)

    def _refused_together(self, metrics: list[str]) -> list[str]:
        if not metrics or self._accepted(metrics):
            return []
        if len(metrics) == 1:
            return metrics
        half = len(metrics) // 2
        first = self._refused_together(metrics[:half])
        kept = [m for m in metrics[:half] if m not in first]
        second = self._refused_together(metrics[half:])
        rest = [m for m in metrics[half:] if m not in second]
        return first + second + self._refused_together_with(kept, rest)

    def _refused_together_with(self, kept: list[str], rest: list[str]) -> list[str]:
        """Of ``rest``, which to drop so that ``kept + rest`` is accepted (greedy, in order)."""
        if self._accepted(kept + rest):
            return []
        dropped, accepted = [], list(kept)
        for metric in rest:
            if self._accepted([*accepted, metric]):
                accepted.append(metric)
            else:
                dropped.append(metric)
        return dropped

    def collect(
        self, metrics: list[str], max_ranges: int | None = None, replay: str = "kernel"
    ) -> dict[str, Any]:
        """One step: ``metrics`` over the forward, replayed as ``replay`` says; room for
        ``max_ranges`` kernel ranges (by default the kernels seen plus a margin, and all of
        ``DEFAULT_MAX_RANGES`` again if some were dropped)."""
        from autoprofiler.profile.cupti_api import REPLAY_MODES

        if replay not in REPLAY_MODES:
            raise ValueError(f"replay {replay!r} is not one of {', '.join(REPLAY_MODES)}")
        launches = self.launches()
        ranges = max_ranges or (len(launches) + RANGE_MARGIN if launches else DEFAULT_MAX_RANGES)
        try:
            answer = self._collect(list(dict.fromkeys(metrics)), ranges, replay)
        except UserReplayIncomplete as exc:
            if replay != "user":
                raise
            sys.stderr.write(f"{exc}: replaying the step kernel by kernel\n")
            answer = self.collect(metrics, max_ranges, "kernel")
            answer["user_replay_failed"] = str(exc)
            return answer
        if answer["dropped"] and max_ranges is None and ranges < DEFAULT_MAX_RANGES:
            first_s = sum(answer["timings"].values()) + answer["evaluate_s"]
            answer = self._collect(answer["metrics"], DEFAULT_MAX_RANGES, replay)
            answer["timings"]["dropped_first_s"] = first_s
        return answer

    def _forwards(self, profiler: Any, replay: str, passes: int) -> int:
        """The profiled forwards of one step (between the profiler's start and stop): one for
        kernel replay, one per pass for user replay; how many ran."""
        import torch

        runs = 1 if replay == "kernel" else passes + EXTRA_FORWARDS
        for run in range(1, runs + 1):
            if replay == "user":
                self.flush_l2()
            profiler.start()
            with torch.no_grad():
                self.model(*self.inputs)
            torch.cuda.synchronize()
            if profiler.stop() or replay == "kernel":
                return run
        raise UserReplayIncomplete(
            f"CUPTI still wanted passes after {runs} forwards ({passes} expected);"
            " the forward may launch other kernels each time"
        )

    def flush_l2(self) -> None:
        """Write a buffer twice the L2's size, so that a pass starts with nothing cached."""
        import torch

        if self._flush is None:
            size = getattr(torch.cuda.get_device_properties(self.device), "L2_cache_size", 0)
            nbytes = 2 * size if size else FLUSH_BYTES
            self._flush = torch.empty(nbytes, dtype=torch.uint8, device=self.device)
        self._flush.zero_()
        torch.cuda.synchronize()

    def _collect(self, metrics: list[str], max_ranges: int, replay: str) -> dict[str, Any]:
        from autoprofiler.profile.cupti_api import REPLAY_MODES, RangeProfiler

        launches = self.launches()
        marks = [time.perf_counter()]
        with self.config() as config:
            config.add(metrics)
            image = config.image()
            passes = config.passes(image)
            units = {m: config.unit(m) for m in metrics}
            marks.append(time.perf_counter())
            profiler = RangeProfiler(self.cupti, self.context)
            try:
                data = profiler.counter_data(metrics, max_ranges)
                profiler.configure(image, data, max_ranges, REPLAY_MODES[replay])
                marks.append(time.perf_counter())
                forwards = self._forwards(profiler, replay, passes)
                marks.append(time.perf_counter())
                dropped = profiler.decode()
                marks.append(time.perf_counter())
                names = profiler.ranges(data)
                values = [config.evaluate(data, i) for i in range(len(names))]
                marks.append(time.perf_counter())
            finally:
                profiler.close()
            marks.append(time.perf_counter())
        host_s, setup_s, forward_s, decode_s, evaluate_s, close_s = (
            b - a for a, b in itertools.pairwise(marks)
        )
        return {
            "event": "collected",
            "metrics": metrics,
            "units": units,
            "kernels": [[name, row] for name, row in zip(names, values, strict=True)],
            "launches": launches if len(launches) == len(names) else [],
            "launched": len(launches),
            "passes": passes,
            "replay": replay,
            "forwards": forwards,
            "dropped": dropped,
            "max_ranges": max_ranges,
            "replay_s": forward_s + decode_s,
            "evaluate_s": evaluate_s,
            "timings": {"host_s": host_s, "setup_s": setup_s, "forward_s": forward_s,
                        "decode_s": decode_s, "close_s": close_s},
        }  # fmt: skip


def kernel_launches(model: Any, inputs: list[Any], reserved: int = 0) -> list[dict[str, Any]]:
    """The GPU kernels of one forward in start order: name, grid and block sizes, registers
    per thread and shared memory per block, as CUDA's activity records (through
    torch.profiler's trace) give them; shared memory counts the ``reserved`` bytes the driver
    keeps per block, as ncu's ``launch__shared_mem_per_block`` does."""
    import tempfile

    import torch
    from torch.profiler import ProfilerActivity, profile

    with tempfile.TemporaryDirectory(prefix="autoprofiler-trace-") as folder:
        trace = os.path.join(folder, "trace.json")
        with torch.no_grad(), profile(activities=[ProfilerActivity.CUDA]) as prof:
            model(*inputs)
            torch.cuda.synchronize()
        prof.export_chrome_trace(trace)
        with open(trace, encoding="utf-8") as handle:
            events = json.load(handle).get("traceEvents", [])
    kernels = sorted(
        (e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"),
        key=lambda e: float(e.get("ts", 0.0)),
    )
    return [_launch(e, reserved) for e in kernels]


def _launch(event: dict[str, Any], reserved: int) -> dict[str, Any]:
    args = event.get("args", {})

    def product(key: str) -> float:
        dims = args.get(key) or []
        total = 1.0
        for dim in dims:
            total *= float(dim)
        return total if dims else float("nan")

    return {
        "name": str(event.get("name", "")),
        "launch__grid_size": product("grid"),
        "launch__block_size": product("block"),
        "launch__registers_per_thread": float(args.get("registers per thread", "nan")),
        "launch__shared_mem_per_block": float(args.get("shared memory", "nan")) + reserved,
        "launch__shared_mem_per_block_driver": float(reserved),
    }


def _answer(channel: IO[str], **payload: Any) -> None:
    channel.write(json.dumps(payload, allow_nan=True) + "\n")
    channel.flush()


def _serve(session: _Session, requests: IO[str], channel: IO[str]) -> None:
    for line in requests:
        if not line.strip():
            continue
        try:
            request = json.loads(line)
            metrics = [str(m) for m in request.get("metrics", [])]
            if request.get("op") == "check":
                _answer(channel, event="checked", unsupported=session.check(metrics))
            elif request.get("op") == "collect":
                max_ranges = request.get("max_ranges")
                max_ranges = None if max_ranges is None else int(max_ranges)
                replay = str(request.get("replay", "kernel"))
                channel.write(json.dumps(session.collect(metrics, max_ranges, replay)) + "\n")
                channel.flush()
            else:
                _answer(channel, event="error", error=f"unknown request {request.get('op')!r}")
        except Exception as exc:  # a failed request is answered; the worker goes on
            _answer(channel, event="error", error=_one_line(exc))


def _load_request(requests: IO[str]) -> tuple[str, int]:
    """A standby's first request: the problem to load (``ValueError`` for anything else)."""
    line = requests.readline()
    if not line:
        raise EOFError
    request = json.loads(line)
    if request.get("op") != "load" or not request.get("problem"):
        raise ValueError(f"a standby worker's first request must load a problem, not {line[:80]!r}")
    return str(request["problem"]), int(request.get("warmup", 3))


def _prepare() -> None:
    """What a standby does before it knows its problem: the imports (no CUDA context)."""
    import importlib

    for module in STANDBY_IMPORTS:
        importlib.import_module(module)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--problem", help="JSON of the problem (Problem.to_dict); else a standby")
    parser.add_argument("--warmup", type=int, default=3)
    args = parser.parse_args(argv)
    channel = os.fdopen(os.dup(sys.stdout.fileno()), "w")
    os.dup2(sys.stderr.fileno(), sys.stdout.fileno())  # the problem's prints go to stderr
    problem, warmup = args.problem, args.warmup
    try:
        if problem is None:
            _prepare()
            problem, warmup = _load_request(sys.stdin)
        session = _Session(problem, warmup)
    except EOFError:  # a standby nobody needed
        return 0
    except Exception as exc:  # no GPU, no CUPTI, no permission, a broken problem
        _answer(channel, event="fail", error=_one_line(exc))
        return 2
    _answer(
        channel,
        event="ready",
        device=session.device_name,
        chip=session.chip,
        build_s=session.build_s,
        setup_s=session.setup_s,
        launches_s=session.launches_s,
        launch_records=session.launch_records,
        launched=len(session.launches()),
    )
    _serve(session, sys.stdin, channel)
    return 0


if __name__ == "__main__":
    sys.exit(main())
