"""How fast a candidate's output crosses to the trusted side, per way of crossing, side by side.

For each size, one float32 output made on the GPU is handed over and read back onto the GPU,
by each way in turn, and the seconds of the write (the candidate's side) and of the read (the
trusted side, the output on its GPU) are recorded:

- ``torch.save``: what evaluators up to v6 did on the host (``.cpu()``, ``torch.save`` to a file,
  ``torch.load(map_location=...)``);
- ``raw file``: the evaluator's host path (``output_files``: a copy into a shared mapping of
  a raw file, and a private mapping read back, page-locked since v7 where the driver takes
  it; session 32's rows of this way were made before, with a pageable read);
- ``raw file, pinned``: both mappings page-locked (``cuda_ipc.page_locked``), the writer's
  too, which needs the file on tmpfs; it fails rather than fall back;
- ``GPU slab``: the device-memory slab (``cuda_ipc``), the way taken when memory allows.

Files go to ``--folder`` (``/dev/shm`` by default, as in the evaluator). Every reading is
checked against the output. Rows are JSON lines, written as they are measured.

    python benchmarks/output_crossing.py --gib 1 6 --repeats 2 --out rows.jsonl
    python benchmarks/output_crossing.py --report rows.jsonl
"""

from __future__ import annotations

import argparse
import json
import mmap
import statistics
import sys
import time
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any


def _seconds(step: Callable[..., Any], *args: Any) -> tuple[float, Any]:
    """``step(*args)``'s seconds, the device quiet before and after, and its value."""
    import torch

    torch.cuda.synchronize()
    began = time.perf_counter()
    value = step(*args)
    torch.cuda.synchronize()
    return time.perf_counter() - began, value


def _pinned_write(leaves: list, path: Path, _limit_bytes: int) -> list[dict]:
    """``write_output`` with the shared mapping page-locked for the copy (no size limit). The
    kernel lets a writable shared mapping of a file be page-locked on tmpfs (``/dev/shm``)
    only: elsewhere this raises ``CudaIpcError``."""
    import torch

    from autoprofiler.evaluate.cuda_ipc import page_locked
    from autoprofiler.evaluate.layout import describe, fill, layout_bytes, layout_of

    told = describe(leaves)
    layout = layout_of(told)
    size = layout_bytes(layout)
    with open(path, "wb+") as handle:
        handle.truncate(size)
        mapped = mmap.mmap(handle.fileno(), size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE)
        memory = torch.frombuffer(mapped, dtype=torch.uint8)
        with page_locked(memory, leaves[0].device, read_only=False, or_pageable=False):
            fill(memory, layout, leaves)
        del memory
        mapped.close()
    return told


def _pinned_read(path: Path, told: list[dict], device: Any) -> list:
    """``read_output`` from a read-only mapping page-locked for the copy."""
    import torch

    from autoprofiler.evaluate.cuda_ipc import page_locked
    from autoprofiler.evaluate.layout import layout_bytes, layout_of, views

    layout = layout_of(told)
    size = layout_bytes(layout)
    with open(path, "rb") as handle:
        mapped = mmap.mmap(
            handle.fileno(), size, flags=mmap.MAP_SHARED | mmap.MAP_POPULATE, prot=mmap.PROT_READ
        )
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")  # a read-only buffer: nothing writes to it
            memory = torch.frombuffer(mapped, dtype=torch.uint8)
        with page_locked(memory, device, or_pageable=False):
            return [v.to(device) if torch.is_tensor(v) else v for v in views(memory, layout, told)]


def _ways(folder: Path, device: Any) -> dict[str, tuple[Callable, Callable]]:
    """Each way: (write(leaves) -> token, read(token) -> leaves on ``device``)."""
    import torch

    from autoprofiler.evaluate.cuda_ipc import OutputSlab
    from autoprofiler.evaluate.inputs import nbytes
    from autoprofiler.evaluate.layout import describe, fill, leaf_layout
    from autoprofiler.evaluate.output_files import read_output, size_limit, write_output

    def save(leaves: list) -> Path:
        path = folder / "crossing.pt"
        torch.save([leaf.cpu() for leaf in leaves], path)
        return path

    def load(path: Path) -> list:
        return torch.load(path, map_location=device, weights_only=True)

    def raw(write: Callable) -> Callable:
        path = folder / "crossing.out"
        return lambda leaves: (path, write(leaves, path, size_limit(nbytes(leaves))))

    slabs: dict[str, Any] = {}

    def slab_write(leaves: list) -> list[dict]:
        slab = slabs["owner"] = OutputSlab({"out": leaf_layout(leaves)}, device)
        # the copy OpenedSlab.write makes (a handle cannot be opened in the process that made it)
        fill(slab.memory, slab.slots["out"].layout, leaves)
        return describe(leaves)

    def slab_read(told: list[dict]) -> list:
        leaves = [leaf.clone() for leaf in slabs["owner"].read("out", told)]
        slabs.pop("owner").close()
        return leaves

    return {
        "torch.save": (save, load),
        "raw file": (raw(write_output), lambda token: read_output(token[0], token[1], device)),
        "raw file, pinned": (raw(_pinned_write), lambda token: _pinned_read(*token, device)),
        "GPU slab": (slab_write, slab_read),
    }


def measure(args: argparse.Namespace) -> int:
    import torch

    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    device = torch.device("cuda")
    folder = Path(args.folder)
    out = Path(args.out)
    label = torch.cuda.get_device_name(device)
    for gib in args.gib:
        elements = int(gib * 2**30) // 4
        output = torch.randn(elements, device=device)
        for repeat in range(args.repeats):
            for way, (write, read) in _ways(folder, device).items():
                write_s, token = _seconds(write, [output])
                read_s, leaves = _seconds(read, token)
                same = bool(torch.equal(leaves[0], output))
                del leaves, token
                for leftover in folder.glob("crossing.*"):
                    leftover.unlink()
                torch.cuda.empty_cache()
                row = {"device": label, "gib": gib, "repeat": repeat, "way": way,
                       "write_s": write_s, "read_s": read_s, "same": same}  # fmt: skip
                with out.open("a", encoding="utf-8") as handle:
                    handle.write(json.dumps(row) + "\n")
                print(f"{gib:g} GiB {way}: write {write_s:.2f} s, read {read_s:.2f} s, "
                      f"same={same}", flush=True)  # fmt: skip
        del output
    return 0


def report(rows_path: Path) -> str:
    rows = [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]
    lines = [
        "| GiB | way | write s | read s | total s | GB/s (write + read) | all equal |",
        "|---|---|---|---|---|---|---|",
    ]
    keys = dict.fromkeys((r["gib"], r["way"]) for r in rows)
    for gib, way in keys:
        group = [r for r in rows if r["gib"] == gib and r["way"] == way]
        write = statistics.median(r["write_s"] for r in group)
        read = statistics.median(r["read_s"] for r in group)
        rate = gib * 2**30 / 1e9 / (write + read)
        same = all(r["same"] for r in group)
        lines.append(f"| {gib:g} | {way} | {write:.2f} | {read:.2f} | {write + read:.2f} | "
                     f"{rate:.2f} | {'yes' if same else 'NO'} |")  # fmt: skip
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--gib", type=float, nargs="+", default=[1.0, 6.0])
    parser.add_argument("--repeats", type=int, default=2)
    parser.add_argument("--folder", default="/dev/shm")
    parser.add_argument("--out", default="output_crossing_rows.jsonl")
    parser.add_argument("--report", type=Path, help="print the table of a rows file and stop")
    args = parser.parse_args()
    if args.report:
        print(report(args.report))
        return 0
    return measure(args)


if __name__ == "__main__":
    raise SystemExit(main())
