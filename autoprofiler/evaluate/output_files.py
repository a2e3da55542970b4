"""Outputs handed over on the host: one file of raw bytes per output.

Where no GPU slab takes an output (no CUDA, a sandbox, no room beside the candidate), the
candidate's process writes it into the run's output folder (``/dev/shm`` when it has room):
the leaves laid out as :func:`~autoprofiler.evaluate.layout.leaf_layout` lays them, copied
from the device straight into a shared mapping of the file, with no serialisation and no
checksum. Its report says each leaf's dtype and shape.

The trusted side reads a file only after the candidate's process and everything it started
are gone. It opens the path it chose itself (never one the candidate named), refuses anything
but a regular file holding exactly the bytes the description implies, and views those bytes
with that layout. No code of the writer's runs: whatever the bytes are, they are numbers to
compare. (``torch.save`` and ``torch.load`` moved about 0.4 GB/s on the H200, minutes for the
60 GiB of a large problem's outputs.)
"""

from __future__ import annotations

import mmap
import os
import stat
from pathlib import Path
from typing import Any

import torch

from autoprofiler.evaluate.cuda_ipc import page_locked
from autoprofiler.evaluate.inputs import OutputError
from autoprofiler.evaluate.layout import (
    LayoutError,
    describe,
    fill,
    layout_bytes,
    layout_of,
    malformed,
    views,
)

SUFFIX = ".out"
# An output file may take at most this many times the reference output's bytes, and this much
# more (a second-shape trial's output may be twice the first's): a wrong shape is found out
# before it fills the host's memory (a stride-0 view of 4 TiB would have been written whole).
SIZE_FACTOR = 4
SIZE_SLACK_BYTES = 64 * 2**20
_POPULATE = getattr(mmap, "MAP_POPULATE", 0)  # fault the pages in at once (Linux)


def output_path(folder: Path, name: str) -> Path:
    """Where output ``name`` of a run whose output folder is ``folder`` lies."""
    return folder / f"{name}{SUFFIX}"


def size_limit(reference_bytes: int) -> int:
    """The most bytes one output file may take when the reference's output takes
    ``reference_bytes``."""
    return SIZE_FACTOR * reference_bytes + SIZE_SLACK_BYTES


def write_output(leaves: list[Any], path: Path, limit_bytes: int) -> list[dict]:
    """Write plain ``leaves`` (:func:`~autoprofiler.evaluate.inputs.plain_leaves`) to
    ``path``, whole or not at all; what was written, as :func:`describe` says it.
    :class:`OutputError` for a leaf whose dtype cannot cross, or an output over
    ``limit_bytes`` (nothing is written)."""
    told = describe(leaves)
    try:
        layout = layout_of(told)
    except LayoutError as exc:
        raise OutputError(str(exc)) from None
    size = layout_bytes(layout)
    if size > limit_bytes:
        shapes = ", ".join(str(tuple(entry["shape"])) for entry in told if "shape" in entry)
        raise OutputError(
            f"an output of shape {shapes} takes {size / 2**30:.3g} GiB, over the "
            f"{limit_bytes / 2**30:.3g} GiB an output of this problem may take"
        )
    partial = path.with_suffix(".partial")
    with open(partial, "wb+") as handle:
        handle.truncate(size)
        if size:
            mapped = mmap.mmap(handle.fileno(), size, flags=mmap.MAP_SHARED | _POPULATE)
            fill(torch.frombuffer(mapped, dtype=torch.uint8), layout, leaves)  # done on return
            mapped.close()
    partial.replace(path)
    return told


def read_output(path: Path, told: Any, device: torch.device) -> list[Any]:
    """The leaves of the output in ``path`` as ``told`` describes them, on ``device``.

    :class:`OutputError` when there is no such file, when it is not a regular file, when the
    description is malformed, or when the file does not hold exactly the bytes it implies.
    """
    why = malformed(told)
    if why is not None:
        raise OutputError(why)
    layout = layout_of(told)
    size = layout_bytes(layout)
    try:
        descriptor = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        raise OutputError(f"no output was handed over ({path.name})") from None
    except OSError as exc:  # a link, or a file it may not read
        raise OutputError(f"unreadable output {path.name}: {exc.strerror}") from None
    with os.fdopen(descriptor, "rb") as handle:
        info = os.fstat(descriptor)
        if not stat.S_ISREG(info.st_mode):
            raise OutputError(f"output {path.name} is not a regular file")
        if info.st_size != size:
            raise OutputError(
                f"output file {path.name} holds {info.st_size} bytes where its description "
                f"needs {size}"
            )
        if not size:
            return views(torch.empty(0, dtype=torch.uint8), layout, told)
        flags = mmap.MAP_PRIVATE | _POPULATE  # copy-on-write: the file is never changed
        mapped = mmap.mmap(handle.fileno(), size, flags=flags)
        memory = torch.frombuffer(mapped, dtype=torch.uint8)
    if device.type != "cuda":  # views, which keep the mapping alive while they live
        return views(memory, layout, told)
    with page_locked(memory, device):
        return [leaf.to(device) if torch.is_tensor(leaf) else leaf
                for leaf in views(memory, layout, told)]  # fmt: skip
