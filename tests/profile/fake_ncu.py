"""A stand-in for the ncu executable, for testing the code around ncu on a machine without it.

It runs the profiled command for real (the runner, on the CPU) and writes a "report" made of a
real H200 capture (``FAKE_NCU_TEMPLATE``) with one copy of its kernels per NVTX range the runner
reported a profiled forward in. ``--import`` prints that report. ``FAKE_NCU_MODE`` selects a
failure: ``noperm`` (counters not permitted), ``hang`` (never finishes), ``crash`` (the target
dies at start-up), ``nokernel`` (nothing captured). ``FAKE_NCU_LOG`` names a file that gets
one line per profiling run.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path


def step_ranges(stderr: str) -> list[str]:
    """The NVTX ranges the runner reported a profiled forward in (importing nothing heavy)."""
    events = [json.loads(line[5:]) for line in stderr.splitlines() if line.startswith("@@AP ")]
    return [e["range"] for e in events if e["event"] == "step"]


def main(args: list[str]) -> int:
    if "--import" in args:
        sys.stdout.write(Path(args[args.index("--import") + 1]).read_text())
        return 0
    mode = os.environ.get("FAKE_NCU_MODE", "")
    if mode == "noperm":
        print("==ERROR== ERR_NVGPUCTRPERM - The user does not have permission to profile")
        return 1
    if mode == "hang":
        time.sleep(120)
    if mode == "crash":
        sys.stderr.write("Traceback (most recent call last):\nRuntimeError: CUDA init failed\n")
        return 1
    if "FAKE_NCU_LOG" in os.environ:  # one line per profiling run: its arguments
        with open(os.environ["FAKE_NCU_LOG"], "a", encoding="utf-8") as log:
            log.write(" ".join(args) + "\n")
    command = args[args.index("--force-overwrite") + 1 :]
    run = subprocess.run(command, capture_output=True, text=True, check=False)
    sys.stderr.write(run.stderr)
    ranges = step_ranges(run.stderr)
    if mode == "nokernel" or not ranges:
        print("==WARNING== No kernels were profiled.")
        return run.returncode
    lines = Path(os.environ["FAKE_NCU_TEMPLATE"]).read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    rows = [row.replace("ap_forward_0", name) for name in ranges for row in lines[start + 2 :]]
    report = Path(args[args.index("-o") + 1] + ".ncu-rep")
    report.write_text("\n".join([*lines[start : start + 2], *rows]) + "\n")
    return run.returncode


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
