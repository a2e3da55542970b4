"""The trusted comparison of a candidate's outputs, whole tensors against slices, side by side.

``whole``: the comparison as it was until session 35, on whole tensors (a difference, its
float64 copy and ``torch.allclose``'s temporaries, each as large as the output, and five waits
for the device); ``sliced``: ``compare.compare_outputs`` (a slice of ``CHUNK_ELEMENTS`` at a
time, one wait). Both on the same pair of outputs of ``--elements`` float32 values, which
differ by a little everywhere, alternating within each repeat; the seconds of each and the
peak memory the comparison allocated on a GPU.

    python benchmarks/output_comparison.py --elements 268435456 --repeats 5 --out rows.jsonl
    python benchmarks/output_comparison.py --report rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import statistics
import time
from pathlib import Path

import torch
from _common import run_main

from autoprofiler.evaluate import EvalConfig
from autoprofiler.evaluate.compare import compare_outputs

log = logging.getLogger("output_comparison")


def whole_comparison(reference: torch.Tensor, candidate: torch.Tensor, config: EvalConfig) -> dict:
    """One output pair compared as until session 35, on whole tensors."""
    atol, rtol = config.tolerance_for(str(reference.dtype).removeprefix("torch."))
    work = torch.promote_types(reference.dtype, torch.float32)
    ref_w = reference.detach().to(work)
    cand_w = candidate.detach().to(ref_w.device, work)
    diff = (ref_w - cand_w).abs().nan_to_num(nan=float("inf"))
    finite_where_ref = bool(torch.isfinite(ref_w).all()) and not bool(torch.isfinite(cand_w).all())
    close = torch.allclose(cand_w, ref_w, atol=atol, rtol=rtol, equal_nan=True)
    return {
        "max_abs_diff": float(diff.max()) if diff.numel() else 0.0,
        "mean_abs_diff": float(diff.double().mean()) if diff.numel() else 0.0,
        "wrong": finite_where_ref or not close,
    }


WAYS = {
    "whole": lambda ref, cand, config: whole_comparison(ref, cand, config),
    "sliced": lambda ref, cand, config: compare_outputs([ref], [cand], config),
}


def _timed(way: str, ref: torch.Tensor, cand: torch.Tensor, config: EvalConfig) -> dict:
    on_gpu = ref.device.type == "cuda"
    if on_gpu:
        torch.cuda.synchronize()
        torch.cuda.empty_cache()
        torch.cuda.reset_peak_memory_stats()
        held = torch.cuda.memory_allocated()
    began = time.perf_counter()
    WAYS[way](ref, cand, config)  # each way waits for the device before answering
    seconds = time.perf_counter() - began
    peak = torch.cuda.max_memory_allocated() - held if on_gpu else None
    return {"seconds": seconds, "peak_bytes": peak}


def measure(args: argparse.Namespace) -> None:
    device = torch.device(args.device)
    config = EvalConfig(device=args.device)
    generator = torch.Generator(device=device).manual_seed(0)
    ref = torch.randn(args.elements, generator=generator, device=device)
    cand = ref + 1e-6
    name = torch.cuda.get_device_name(device) if device.type == "cuda" else platform.processor()
    machine = f"{name or platform.machine()} ({os.cpu_count()} cores), torch {torch.__version__}"
    for repeat in range(args.repeats):
        for way in WAYS:
            row = {"way": way, "repeat": repeat, "elements": args.elements,
                   "device": args.device, "machine": machine,
                   **_timed(way, ref, cand, config)}  # fmt: skip
            with Path(args.out).open("a", encoding="utf-8") as handle:
                handle.write(json.dumps(row) + "\n")
            log.info("%s: %.3f s", way, row["seconds"])


def report(rows_path: Path) -> str:
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
    lines = [
        "| machine | elements | way | repeats | median s | against whole | peak GiB |",
        "|---|---|---|---|---|---|---|",
    ]
    for machine, elements in dict.fromkeys((r["machine"], r["elements"]) for r in rows):
        mine = [r for r in rows if r["machine"] == machine and r["elements"] == elements]
        medians = {
            way: statistics.median(r["seconds"] for r in mine if r["way"] == way) for way in WAYS
        }
        for way in WAYS:
            peaks = [r["peak_bytes"] for r in mine if r["way"] == way and r["peak_bytes"]]
            peak = f"{max(peaks) / 2**30:.2f}" if peaks else "-"
            count = sum(r["way"] == way for r in mine)
            lines.append(
                f"| {machine} | {elements} | {way} | {count} | {medians[way]:.3f} | "
                f"{medians[way] / medians['whole']:.2f}x | {peak} |"
            )
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(message)s", datefmt="%H:%M:%S")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--elements", type=int, default=1 << 26)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--out", default="output_comparison_rows.jsonl")
    parser.add_argument("--report", type=Path, help="summarize a rows file instead")
    args = parser.parse_args(argv)
    if args.report:
        print(report(args.report), end="")
        return 0
    measure(args)
    return 0


if __name__ == "__main__":
    run_main(main, log)
