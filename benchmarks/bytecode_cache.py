"""What a fresh candidate process pays to import its modules, per source of bytecode, side by side.

Each way starts fresh interpreters that import the same modules and time the import:

- ``installation``: the environment as given (the installation's own ``__pycache__``, and
  ``PYTHONDONTWRITEBYTECODE`` as the caller set it);
- ``none``: no usable bytecode (an empty ``PYTHONPYCACHEPREFIX``, writing off), every module
  compiled from source, as in an installation that ships none;
- ``evaluator's folder``: the bytecode folder candidates' processes get
  (``runner.bytecode_cache``), filled by one process first (not timed), then read.

Two module sets: the zygote's (``torch``, sympy through ``torch.fx.experimental.symbolic_shapes``,
``triton`` where installed) and torch.compile's stack, imported after them (what a
``torch.compile`` candidate's constructor imports). The ways alternate within each repeat.

    python benchmarks/bytecode_cache.py --repeats 3 --out rows.jsonl
    python benchmarks/bytecode_cache.py --report rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

from _common import run_main

log = logging.getLogger("bytecode_cache")

BASE = ("torch", "torch.fx.experimental.symbolic_shapes", "triton")
COMPILER = ("torch._dynamo", "torch._inductor.compile_fx", "torch._inductor.codecache")
WAYS = ("installation", "none", "evaluator's folder")
# Imports ``base`` (untimed beyond its own figure), then ``then``; prints both seconds.
TIMER = """
import importlib, json, sys, time
def load(names):
    began = time.perf_counter()
    for name in names:
        try:
            importlib.import_module(name)
        except ImportError:
            pass
    return time.perf_counter() - began
base, then = json.loads(sys.argv[1])
print(json.dumps([load(base), load(then)]))
"""


def _environment(way: str, scratch: Path) -> dict[str, str]:
    """The environment of a fresh process importing by ``way``."""
    from autoprofiler.evaluate.runner import bytecode_cache

    env = dict(os.environ)
    if way == "none":
        empty = Path(tempfile.mkdtemp(dir=scratch))
        env.update(PYTHONPYCACHEPREFIX=str(empty), PYTHONDONTWRITEBYTECODE="1")
    elif way == "evaluator's folder":
        env.pop("PYTHONPYCACHEPREFIX", None)
        bytecode_cache(env)
    return env


def _import_seconds(env: dict[str, str], base: tuple, then: tuple) -> tuple[float, float]:
    done = subprocess.run(
        [sys.executable, "-c", TIMER, json.dumps([list(base), list(then)])],
        env=env,
        capture_output=True,
        text=True,
        timeout=600,
        check=True,
    )
    first, second = json.loads(done.stdout.strip().splitlines()[-1])
    return first, second


def measure(repeats: int, out: Path, base: tuple = BASE, then: tuple = COMPILER) -> None:
    machine = f"{platform.node()} ({os.cpu_count()} cores), Python {platform.python_version()}"
    with tempfile.TemporaryDirectory() as scratch:
        _import_seconds(_environment("evaluator's folder", Path(scratch)), base, then)  # fill
        for repeat in range(repeats):
            for way in WAYS:
                seconds = _import_seconds(_environment(way, Path(scratch)), base, then)
                row = {"way": way, "repeat": repeat, "base_s": seconds[0],
                       "compiler_s": seconds[1], "machine": machine}  # fmt: skip
                with out.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")
                log.info("%s: %.2f s, then %.2f s", way, *seconds)


def report(rows_path: Path) -> str:
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
    machines = sorted({row["machine"] for row in rows})
    lines = [
        f"Machine: {', '.join(machines)}; medians of {max(r['repeat'] for r in rows) + 1}.",
        "",
        "| bytecode | torch, sympy, Triton s | then torch.compile's stack s | together s |"
        " against none |",
        "|---|---|---|---|---|",
    ]
    medians = {}
    for way in WAYS:
        mine = [row for row in rows if row["way"] == way]
        if mine:
            base = statistics.median(row["base_s"] for row in mine)
            compiler = statistics.median(row["compiler_s"] for row in mine)
            medians[way] = (base, compiler, base + compiler)
    for way, (base, compiler, total) in medians.items():
        ratio = total / medians["none"][2] if "none" in medians else float("nan")
        lines.append(f"| {way} | {base:.2f} | {compiler:.2f} | {total:.2f} | {ratio:.2f}x |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--out", type=Path, default=Path("bytecode_cache_rows.jsonl"))
    parser.add_argument("--report", type=Path, help="print the table of a rows file and stop")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return 0
    measure(args.repeats, args.out)
    print(report(args.out), end="")
    return 0


if __name__ == "__main__":
    run_main(main, log)
