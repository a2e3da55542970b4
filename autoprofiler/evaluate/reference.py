"""The trusted reference process: builds the problem's ``Model``, times it, and judges outputs.

It never imports candidate code. :class:`ReferencePool` (used by the runner) starts
``python -m autoprofiler.evaluate.reference`` once per device and settings and keeps it warm
across candidates and problems (the last few problems' models stay built). It answers JSON
requests, one per line, each naming its problem:

- ``time``: the reference (``kind: "eager"``) or ``torch.compile`` of it (``"compile"``) through
  the same timing loop as the candidate (:func:`~autoprofiler.evaluate.timing.run_timing_loop`),
  with the settings it ran under; for ``compile``, first the compiled outputs compared with the
  reference's on the inputs of each of ``check_seeds`` (``check``);
- ``judge``: for each item (a seed, optionally the second shape, and the path of an output file
  the candidate's process wrote), the reference's output on the inputs made from that seed,
  compared with the file by :func:`~autoprofiler.evaluate.compare.compare_outputs`; and whether
  the candidate returned the same output for the correctness trials' different inputs.

The reference's outputs never leave this process and never touch the disk.
"""

from __future__ import annotations

import atexit
import contextlib
import gc
import itertools
import json
import logging
import math
import os
import secrets
import select
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from autoprofiler.evaluate.interpreter import main_command

log = logging.getLogger(__name__)

PACKAGE_PARENT = str(Path(__file__).resolve().parents[2])
START_TIMEOUT_S = 600.0
KEPT_PROBLEMS = 2  # reference models kept built in the server
KEPT_SLABS = 2  # output slabs alive at once (a run's is freed after its verdict)
# A slab takes at most this share of the free GPU memory, and leaves free at least the
# headroom plus a few outputs' worth for the candidate's own trials and timing pool. On the
# H200 (139 GiB) that lets the 4-6 GiB outputs of KernelBench's large L1 problems (10 slots,
# up to 60 GiB) cross on the GPU: on the host they took 156 s per candidate.
# Device memory given back to the driver slows memory-bound kernels for a moment after (on the
# H200 a 6 GiB ReLU ran 1.11x slower just after 40 GiB was given back, and as fast as ever 3 s
# later: docs/results/evaluator.md); the reference is timed that long after giving back this much.
SETTLE_AFTER_BYTES = 2**30
SETTLE_S = 3.0
SLAB_MEMORY_SHARE = 0.6
SLAB_HEADROOM_BYTES = 16 * 2**30
SLAB_HEADROOM_OUTPUTS = 3


def slab_fits(size: int, free: int, output_bytes: int) -> bool:
    """Whether a slab of ``size`` bytes leaves the candidate room, ``free`` bytes being free
    and one output taking ``output_bytes``."""
    headroom = SLAB_HEADROOM_BYTES + SLAB_HEADROOM_OUTPUTS * output_bytes
    return size <= free * SLAB_MEMORY_SHARE and free - size >= headroom


def slots_that_fit(
    wanted: dict[str, list[dict]], free: int, output_bytes: int, max_bytes: int | None = None
) -> dict[str, list[dict]]:
    """The first slots of ``wanted`` (in the order outputs are handed over) that a slab can
    hold beside the candidate (:func:`slab_fits`) within ``max_bytes``: all of them where they
    fit, else as many as fit (the rest cross on the host), else none."""
    from autoprofiler.evaluate.layout import slab_bytes

    names = list(wanted)
    while names:
        chosen = {name: wanted[name] for name in names}
        size = slab_bytes(chosen)
        if slab_fits(size, free, output_bytes) and (max_bytes is None or size <= max_bytes):
            return chosen
        names.pop()
    return {}


@dataclass(frozen=True)
class SlabOffer:
    """A slab the reference process holds for one run: its id, what the candidate opens, the
    share of free GPU memory it left, its bytes, and the bytes of the outputs it has no slot
    for (those cross on the host)."""

    slab_id: str
    offer: dict
    room: float
    size: int
    host_bytes: int


class ReferenceError(RuntimeError):
    """The reference could not be built, timed or run; the message is one line."""


# --- the server (trusted process) ------------------------------------------------------------


class _Built:
    """One problem's module, reference model and (once asked for) its torch.compile."""

    def __init__(self, source: str, config: Any, device: Any) -> None:
        import torch

        from autoprofiler.problem import exec_problem_source

        self.module = exec_problem_source(source, "autoprofiler_reference")
        init_inputs = list(getattr(self.module, "get_init_inputs", list)())
        with torch.device(device):
            torch.manual_seed(config.seed)
            self.model = self.module.Model(*init_inputs).to(device).eval()
        self.compiled: Any = None
        # See _Server._layouts: the layouts, or why the outputs have none (asked once).
        self.layouts: tuple[list[dict], list[dict] | None] | str | None = None


class _Server:
    """The reference models of the problems asked about (the last few kept built), and the
    requests it answers."""

    def __init__(self, job: dict) -> None:
        import torch

        from autoprofiler.evaluate.config import EvalConfig

        self.torch = torch
        self.config = EvalConfig.from_dict(job["config"])
        wanted = self.config.device
        if wanted == "auto":
            wanted = "cuda" if torch.cuda.is_available() else "cpu"
        if wanted.startswith("cuda") and not torch.cuda.is_available():
            raise ReferenceError("device cuda asked for, none visible")
        self.device = torch.device(wanted)
        self.built: dict[str, _Built] = {}
        self.slabs: dict[str, Any] = {}  # slab id -> OutputSlab, the newest last
        self.gave_back_at = -math.inf  # when _release last gave much memory back

    def problem(self, request: dict) -> _Built:
        """The request's problem, built now when it is not among the last few."""
        key = request["problem_hash"]
        built = self.built.pop(key, None)
        if built is None:
            while len(self.built) >= KEPT_PROBLEMS:
                self.built.pop(next(iter(self.built)))
            self._release()
            built = _Built(request["problem_source"], self.config, self.device)
        self.built[key] = built
        return built

    def label(self) -> str:
        if self.device.type == "cuda":
            return f"cuda:{self.torch.cuda.get_device_name(self.device)}"
        return "cpu"

    def _handed_over(self, request: dict, item: dict) -> list[Any] | dict:
        """The candidate's output for ``item``: from its slot in the request's slab when the
        item has one, else from its file; an answer (``missing``, ``wrong_shape``) when there
        is none or it cannot be read as what the candidate said it wrote."""
        from autoprofiler.evaluate.inputs import OutputError
        from autoprofiler.evaluate.output_files import read_output

        if item.get("told") is None:
            return {"kind": "missing", "message": f"no output was handed over ({item['name']})"}
        slab = self.slabs.get(str(request.get("slab_id"))) if "slot" in item else None
        if "slot" in item and slab is None:
            return {"kind": "missing", "message": "its output slab is gone"}
        if slab is not None and item["slot"] in slab.slots:
            got = slab.read(item["slot"], item["told"])
            if isinstance(got, str):
                return {"max_abs_diff": 0.0, "mean_abs_diff": 0.0, "kind": "wrong_shape",
                        "message": got}  # fmt: skip
            return got
        try:
            return read_output(Path(item["path"]), item["told"], self.device)
        except OutputError as exc:
            return {"kind": "missing", "message": str(exc)}

    def slab(self, request: dict) -> dict:
        """A fresh output slab for one candidate run (``correctness`` trials, ``timed`` slots,
        the second shape), of at most ``max_bytes`` when the request says: its id, what the
        candidate needs to open it, and the bytes of the outputs left to cross on the host
        when not all of them fit; ``{"slab": None, "why": ...}`` when none does."""
        from autoprofiler.evaluate.cuda_ipc import OutputSlab, device_index
        from autoprofiler.evaluate.layout import LayoutError, layout_bytes, slab_bytes

        if self.device.type != "cuda":
            return {"slab": None, "why": "not a GPU"}
        try:
            main, other = self._layouts(self.problem(request))
        except LayoutError as exc:
            return {"slab": None, "why": str(exc)}
        wanted = {f"correctness-{i}": main for i in range(request["correctness"])}
        wanted.update({f"timed#{k}": main for k in range(request["timed"])})
        if other is not None:
            wanted["other_shape"] = other
        while len(self.slabs) >= KEPT_SLABS:
            self.slabs.pop(next(iter(self.slabs))).close()
        self._release()
        free, _ = self.torch.cuda.mem_get_info(device_index(self.device))
        layouts = slots_that_fit(wanted, free, layout_bytes(main), request.get("max_bytes"))
        if not layouts:
            return {"slab": None, "why": f"not one of its outputs fits beside the candidate "
                    f"({slab_bytes(wanted) / 2**30:.1f} GiB in all)"}  # fmt: skip
        slab = OutputSlab(layouts, self.device)
        slab_id = secrets.token_hex(8)
        self.slabs[slab_id] = slab
        left_out = sum(layout_bytes(wanted[name]) for name in wanted if name not in layouts)
        return {"slab": slab_id, "offer": slab.offer(), "room": (free - slab.size) / max(free, 1),
                "size": slab.size, "host_bytes": left_out}  # fmt: skip

    def _layouts(self, built: _Built) -> tuple[list[dict], list[dict] | None]:
        """The layout of the reference's output at the problem's shape and at the second shape
        (None without one), from one forward each, kept with the built problem; raises
        ``LayoutError`` (kept too: the reference runs once for it) when they have none."""
        from autoprofiler.evaluate.layout import LayoutError, leaf_layout

        if built.layouts is None:
            with self.torch.no_grad():
                main = self._reference_output(built, {"seed": 0})
                other = self._reference_output(built, {"seed": 0, "other_shape": True})
            try:
                built.layouts = (leaf_layout(main), None if other is None else leaf_layout(other))
            except LayoutError as exc:
                built.layouts = str(exc)
        if isinstance(built.layouts, str):
            raise LayoutError(built.layouts)
        return built.layouts

    def free(self, request: dict) -> dict:
        """Free the slab ``slab_id`` (gone already is fine)."""
        slab = self.slabs.pop(str(request.get("slab_id")), None)
        if slab is not None:
            slab.close()
        return {"freed": slab is not None}

    def _release(self) -> None:
        gc.collect()
        if self.device.type == "cuda":
            held = self.torch.cuda.memory_reserved(self.device)
            self.torch.cuda.empty_cache()
            if held - self.torch.cuda.memory_reserved(self.device) >= SETTLE_AFTER_BYTES:
                self.gave_back_at = time.monotonic()

    def _settle(self) -> None:
        """Wait until ``SETTLE_S`` have passed since this process last gave back much memory."""
        wait = self.gave_back_at + SETTLE_S - time.monotonic()
        if wait > 0:
            log.debug("waiting %.1f s after memory given back before timing", wait)
            time.sleep(wait)

    def time(self, request: dict) -> dict:
        from autoprofiler.evaluate.inputs import TrialSeeds, make_inputs
        from autoprofiler.evaluate.settings import speed_settings
        from autoprofiler.evaluate.timing import LoopSettings, pool_budget_bytes, run_timing_loop

        built = self.problem(request)
        fn, check = built.model, None
        if request["kind"] == "compile":
            if built.compiled is None:
                built.compiled = self.torch.compile(built.model)
            fn = built.compiled
            check = self._check_compiled(built, [int(s) for s in request.get("check_seeds", [])])
        seeds = TrialSeeds((), int(request["seed"]), 0)
        settings = LoopSettings(**request["loop"])
        self._settle()
        with self.torch.no_grad():
            record, _ = run_timing_loop(
                fn,
                lambda j: make_inputs(built.module, seeds.pool_seed(j), self.device),
                self.device,
                settings,
                pool_budget_bytes(self.device),
                keep_outputs=True,  # as the candidate's loop does: the same memory and copies
            )
        self._release()
        reply = {"record": record.to_dict(), "settings": speed_settings(load_inductor=True)}
        return reply if check is None else {**reply, "check": check}

    def _check_compiled(self, built: _Built, seeds: list[int]) -> dict:
        """torch.compile of the reference against the reference on the inputs of each seed:
        the comparison (``compare_outputs``) of the first seed whose outputs differ, else of
        them all (``kind`` None); ``seeds``: how many were compared."""
        from autoprofiler.evaluate.compare import compare_outputs
        from autoprofiler.evaluate.inputs import flatten, make_inputs

        verdict: dict[str, Any] = {"kind": None, "max_abs_diff": 0.0, "mean_abs_diff": 0.0}
        with self.torch.no_grad():
            for count, seed in enumerate(seeds, 1):
                inputs = make_inputs(built.module, seed, self.device)
                expected = [self._detached(v) for v in flatten(built.model(*inputs))]
                answer = compare_outputs(expected, flatten(built.compiled(*inputs)), self.config)
                for key in ("max_abs_diff", "mean_abs_diff"):
                    verdict[key] = max(verdict[key], answer[key])
                verdict["seeds"] = count
                if answer["kind"] is not None:
                    return {**answer, **verdict, "kind": answer["kind"], "seed": seed}
        return verdict

    def _reference_output(self, built: _Built, item: dict) -> list[Any] | None:
        """The reference's flattened output for ``item``'s inputs; None when the item is a
        second-shape trial the problem does not allow (no second shape, the same shapes, or
        a reference that fails there)."""
        from autoprofiler.evaluate.inputs import flatten, make_inputs
        from autoprofiler.evaluate.shapes import other_shape, shapes

        seed = int(item["seed"])
        module, model = built.module, built.model
        if not item.get("other_shape"):
            inputs = make_inputs(module, seed, self.device)
            return [self._detached(v) for v in flatten(model(*inputs))]
        shape = other_shape(module) if self.config.other_shape else None
        if shape is None:
            return None
        inputs = make_inputs(module, seed, self.device, shape)
        if shapes(inputs) == shapes(make_inputs(module, seed, self.device)):
            return None
        try:
            with shape.applied(module):
                return [self._detached(v) for v in flatten(model(*inputs))]
        except Exception as exc:
            log.info("the reference fails at %s (%s): no second-shape trial", shape.label, exc)
            return None

    def _detached(self, value: Any) -> Any:
        return value.detach().clone() if self.torch.is_tensor(value) else value

    def judge(self, request: dict) -> dict:
        from autoprofiler.evaluate.compare import compare_outputs, fingerprint, same_fingerprint

        built = self.problem(request)
        answers: dict[str, Any] = {}
        prints: list[tuple[str, Any, Any]] = []
        for item in request["items"]:
            name = item["name"]
            with self.torch.no_grad():
                try:
                    expected = self._reference_output(built, item)
                except Exception as exc:
                    message = f"the reference raises: {type(exc).__name__}: {exc}"
                    raise ReferenceError(message) from None
                if expected is None:
                    answers[name] = {"kind": "skipped"}
                    continue
                got = self._handed_over(request, item)
                if isinstance(got, dict):
                    answers[name] = got
                    continue
                try:
                    answers[name] = compare_outputs(expected, got, self.config)
                    if item.get("correctness") and answers[name]["kind"] != "wrong_shape":
                        prints.append((name, fingerprint(expected), fingerprint(got)))
                except Exception as exc:  # the candidate's data, not this process, is at fault
                    message = f"its output cannot be compared: {type(exc).__name__}"
                    answers[name] = {"kind": "wrong_values", "message": message}
                del expected, got
        constant = [
            (a[0], b[0])
            for a, b in itertools.pairwise(prints)
            if same_fingerprint(a[2], b[2]) and not same_fingerprint(a[1], b[1])
        ]
        self._release()
        return {"items": answers, "constant_output": [list(pair) for pair in constant]}


def serve(job: dict, requests: Any, replies: Any) -> None:
    """Answer ``requests`` (JSON lines) on ``replies`` until end of input."""

    def reply(data: dict) -> None:
        replies.write(json.dumps(data) + "\n")
        replies.flush()

    try:
        server = _Server(job)
    except Exception as exc:  # a problem that does not build: every request gets the error
        reply({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:600]})
        return
    # torch and the rest imported so far stay for the process's life: frozen out of the
    # collector's sight, the gc.collect() before each slab and after each judgement walks
    # only what came later (50-90 ms less each on a 2-core CPU).
    gc.collect()
    gc.freeze()
    reply({"ready": True, "device": server.label()})
    ops = {"time": server.time, "judge": server.judge, "slab": server.slab, "free": server.free}
    try:
        for line in requests:
            try:
                request = json.loads(line)
                reply(ops[request["op"]](request))
            except Exception as exc:
                reply({"error": f"{type(exc).__name__}: {exc}".splitlines()[0][:600]})
    finally:
        gc.unfreeze()


def main() -> int:
    replies = os.fdopen(os.dup(1), "w", encoding="utf-8")
    os.dup2(2, 1)  # whatever the problem prints goes to the log, not into the replies
    job = json.loads(sys.stdin.readline())
    serve(job, sys.stdin, replies)
    return 0


# --- the client (the runner's side) ----------------------------------------------------------


def _python_path(env: dict[str, str]) -> str:
    return os.pathsep.join(p for p in (PACKAGE_PARENT, env.get("PYTHONPATH")) if p)


class ReferenceProcess:
    """A warm trusted reference process for one configuration (any number of problems)."""

    def __init__(self, config: Any, env: dict[str, str], log_path: Path):
        self._log = open(log_path, "ab")  # noqa: SIM115 (closed in close())
        self._process = subprocess.Popen(
            main_command(__name__),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._log,
            env={**env, "PYTHONPATH": _python_path(env)},
            start_new_session=True,
        )
        self._buffer = b""
        self._lock = threading.Lock()  # one request at a time, whichever thread asks
        self.confirm_lock = threading.Lock()  # guards ``confirmed``
        self.records: dict[tuple[str, str], dict] = {}  # (problem, kind) -> a "time" reply
        self.timed_here: set[tuple[str, str]] = set()  # those this process timed, not a store
        self.confirmed: set[tuple[str, str]] = set()  # (problem, kind) timed again after a win
        job = {"config": config.to_dict()}
        hello = self._exchange(job, START_TIMEOUT_S)
        self.device = hello["device"]

    def _exchange(self, data: dict, timeout_s: float) -> dict:
        with self._lock:
            return self._exchange_unlocked(data, timeout_s)

    def _exchange_unlocked(self, data: dict, timeout_s: float) -> dict:
        if self._process.poll() is not None:
            raise ReferenceError(f"the reference process exited ({self._process.returncode})")
        try:
            self._process.stdin.write((json.dumps(data) + "\n").encode())
            self._process.stdin.flush()
        except (BrokenPipeError, OSError):
            raise ReferenceError("the reference process is gone") from None
        deadline = time.monotonic() + timeout_s
        fd = self._process.stdout.fileno()
        while b"\n" not in self._buffer:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self.close()
                raise ReferenceError(f"the reference did not answer within {timeout_s:g} s")
            ready, _, _ = select.select([fd], [], [], remaining)
            if ready:
                chunk = os.read(fd, 1 << 16)
                if not chunk:
                    self.close()
                    raise ReferenceError("the reference process exited before answering")
                self._buffer += chunk
        line, self._buffer = self._buffer.split(b"\n", 1)
        reply = json.loads(line)
        if "error" in reply:
            raise ReferenceError(reply["error"])
        return reply

    def request(self, data: dict, timeout_s: float) -> dict:
        """The reply to one request (``ReferenceError`` when there is none in time)."""
        return self._exchange(data, timeout_s)

    @property
    def alive(self) -> bool:
        return self._process.poll() is None

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self._process.stdin.close()
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(self._process.pid, 9)
        self._process.wait()
        self._log.close()


class ProblemReference:
    """One problem as the reference process of its configuration knows it."""

    def __init__(self, process: ReferenceProcess, problem: Any) -> None:
        self.process = process
        self.device = process.device
        self._problem = {"problem_hash": problem.content_hash, "problem_source": problem.source}
        self._hash = problem.content_hash

    def record(self, kind: str) -> dict | None:
        """This process's timing of ``kind`` for the problem, if it made one."""
        return self.process.records.get((self._hash, kind))

    def keep(self, kind: str, record: dict, timed_here: bool = False) -> None:
        """Keep ``record`` as this process's timing of ``kind`` (``timed_here``: it timed it
        in this run, not read from a store)."""
        self.process.records[(self._hash, kind)] = record
        if timed_here:
            self.process.timed_here.add((self._hash, kind))

    def claim_confirmation(self, kind: str) -> bool:
        """True the first time it is asked for this problem and ``kind`` in this process (the
        caller then times it again, see ``runner.confirm_reference``), False after."""
        with self.process.confirm_lock:
            if (self._hash, kind) in self.process.confirmed:
                return False
            self.process.confirmed.add((self._hash, kind))
            return True

    def timed_here(self, kind: str) -> bool:
        """Whether this process timed ``kind`` for the problem itself."""
        return (self._hash, kind) in self.process.timed_here

    def time(
        self, kind: str, seed: int, loop: dict, timeout_s: float, check_seeds: Sequence[int] = ()
    ) -> dict:
        """The reply of a ``time`` request (``record`` and ``settings``; ``check`` for
        ``compile``: its outputs against the reference's on ``check_seeds``' inputs)."""
        request = {"op": "time", "kind": kind, "seed": seed, "loop": loop, **self._problem}
        if kind == "compile":
            request["check_seeds"] = list(check_seeds)
        return self.process.request(request, timeout_s)

    def judge(self, items: list[dict], timeout_s: float, slab_id: str | None = None) -> dict:
        request = {"op": "judge", "items": items, "slab_id": slab_id, **self._problem}
        return self.process.request(request, timeout_s)

    def offer_slab(
        self, correctness: int, timed: int, timeout_s: float, max_bytes: int | None = None
    ) -> SlabOffer | None:
        """A fresh output slab on the GPU for one run, of at most ``max_bytes``, holding as
        many of its outputs as fit; None when none does and they all cross on the host (why
        is logged)."""
        request = {"op": "slab", "correctness": correctness, "timed": timed,
                   "max_bytes": max_bytes, **self._problem}  # fmt: skip
        try:
            reply = self.process.request(request, timeout_s)
        except ReferenceError as exc:  # a fault here, not a choice: say so
            log.warning("outputs cross on the host: %s", exc)
            return None
        if reply.get("slab") is None:
            log.info("outputs cross on the host: %s", reply.get("why"))
            return None
        offered = SlabOffer(reply["slab"], reply["offer"], float(reply["room"]),
                            int(reply["size"]), int(reply["host_bytes"]))  # fmt: skip
        if offered.host_bytes:
            log.info("a %.1f GiB output slab holds %d of the run's outputs; %.1f GiB cross on "
                     "the host", offered.size / 2**30, len(offered.offer["slots"]),
                     offered.host_bytes / 2**30)  # fmt: skip
        return offered

    def free_slab(self, slab_id: str, timeout_s: float) -> None:
        with contextlib.suppress(ReferenceError):
            self.process.request({"op": "free", "slab_id": slab_id}, timeout_s)


class ReferencePool:
    """Warm reference processes, one per configuration and device, the least recently used
    closed beyond ``size``; all closed when the interpreter exits."""

    def __init__(self, size: int = 2) -> None:
        self.size = size
        self._processes: dict[tuple, ReferenceProcess] = {}
        self._lock = threading.Lock()
        atexit.register(self.close)

    def get(self, problem: Any, config: Any, env: dict[str, str], root: Path) -> ProblemReference:
        with self._lock:
            return ProblemReference(self._get(config, env, root), problem)

    def _get(self, config: Any, env: dict[str, str], root: Path) -> ReferenceProcess:
        key = (config.config_hash, config.device)
        process = self._processes.pop(key, None)
        if process is not None and not process.alive:
            process = None
        if process is None:
            folder = root / "references"
            folder.mkdir(parents=True, exist_ok=True)
            process = ReferenceProcess(config, env, folder / f"{config.config_hash}.log")
        self._processes[key] = process
        while len(self._processes) > self.size:
            oldest = next(iter(self._processes))
            self._processes.pop(oldest).close()  # a request in flight there ends as an error
        return process

    def close(self) -> None:
        while self._processes:
            self._processes.popitem()[1].close()


if __name__ == "__main__":
    sys.exit(main())
