"""How one output's leaves lie in flat memory, wherever they cross: a GPU slab's slot
(:mod:`~autoprofiler.evaluate.cuda_ipc`) or a file on the host
(:mod:`~autoprofiler.evaluate.output_files`).

Each tensor leaf takes ``numel * itemsize`` bytes, contiguous, from an offset aligned to
``SLOT_ALIGN``; a number takes no bytes and travels as its value. The candidate's side says
what it wrote with :func:`describe`; the trusted side checks that description
(:func:`malformed`, :func:`mismatch`) before it reads a byte.
"""

from __future__ import annotations

import math
from typing import Any

import torch

SLOT_ALIGN = 256
DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
        torch.complex128, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
        torch.bool, torch.float8_e4m3fn, torch.float8_e5m2,
    )
}  # fmt: skip


class LayoutError(ValueError):
    """A leaf whose dtype cannot cross as raw bytes."""


def _aligned(nbytes: int) -> int:
    return -(-nbytes // SLOT_ALIGN) * SLOT_ALIGN


def describe(leaves: list[Any]) -> list[dict]:
    """What the candidate's side says it wrote: dtype and shape per tensor, value per number."""
    return [
        {"dtype": str(leaf.dtype).removeprefix("torch."), "shape": list(leaf.shape)}
        if torch.is_tensor(leaf)
        else {"number": leaf}
        for leaf in leaves
    ]


def layout_of(described: list[dict]) -> list[dict]:
    """The layout of leaves as :func:`describe` tells them: ``{"dtype", "shape", "offset",
    "nbytes"}`` per tensor (offsets from the start, aligned), ``{"number": value}`` per
    number. :class:`LayoutError` for a dtype outside ``DTYPES``."""
    layout: list[dict] = []
    offset = 0
    for entry in described:
        if "number" in entry:
            layout.append({"number": entry["number"]})
            continue
        if entry["dtype"] not in DTYPES:
            raise LayoutError(f"an output of dtype {entry['dtype']} cannot be handed over")
        nbytes = math.prod(entry["shape"]) * DTYPES[entry["dtype"]].itemsize
        layout.append({"dtype": entry["dtype"], "shape": list(entry["shape"]), "offset": offset,
                       "nbytes": nbytes})  # fmt: skip
        offset += _aligned(nbytes)
    return layout


def leaf_layout(leaves: list[Any]) -> list[dict]:
    """The layout of one output's leaves (see :func:`layout_of`)."""
    return layout_of(describe(leaves))


def layout_bytes(layout: list[dict]) -> int:
    """Bytes one output of ``layout`` takes, aligned."""
    ends = [entry["offset"] + entry["nbytes"] for entry in layout if "nbytes" in entry]
    return _aligned(max(ends, default=0))


def slab_bytes(layouts: dict[str, list[dict]]) -> int:
    """Bytes a slab of these slots takes (each slot aligned, none empty)."""
    return sum(max(layout_bytes(layout), SLOT_ALIGN) for layout in layouts.values())


MALFORMED = "its output description is malformed"


def _listed(told: Any) -> bool:
    """Whether ``told`` is a list of entries (dicts), as every description is."""
    return isinstance(told, list) and all(isinstance(entry, dict) for entry in told)


def malformed(told: Any) -> str | None:
    """Why a description the candidate's side sent is not one :func:`describe` could have
    made (a known dtype and a shape of non-negative integers per tensor, a plain number per
    number), or None."""
    if not _listed(told):
        return MALFORMED
    for index, entry in enumerate(told):
        if "number" in entry:
            if type(entry["number"]) not in (bool, int, float):
                return f"output {index} is described as a number but is not one"
            continue
        shape = entry.get("shape")
        if entry.get("dtype") not in DTYPES:
            return f"output {index} has a dtype that cannot be handed over: {entry.get('dtype')}"
        if not isinstance(shape, list) or not all(type(n) is int and n >= 0 for n in shape):
            return f"output {index} has a malformed shape"
    return None


def mismatch(layout: list[dict], told: Any) -> str | None:
    """Why what the candidate told does not fit ``layout`` (as ``compare_outputs`` words
    it), or None; a description :func:`malformed` refuses never fits."""
    why = malformed(told)
    if why is not None:
        return why
    if len(told) != len(layout):
        return f"{len(told)} outputs where the reference has {len(layout)}"
    for index, (want, got) in enumerate(zip(layout, told)):
        if "number" in want:
            if "number" not in got:
                return f"output {index} is a tensor, not a number"
            continue
        if "shape" not in got:
            return f"output {index} is a number, not a tensor"
        if got.get("shape") != want["shape"]:
            shape, expected = tuple(got.get("shape") or ()), tuple(want["shape"])
            return f"output {index} has shape {shape}, expected {expected}"
        if got.get("dtype") != want["dtype"]:
            return f"output {index} has dtype {got.get('dtype')}, expected {want['dtype']}"
    return None


def views(memory: torch.Tensor, layout: list[dict], told: list[dict] | None = None) -> list[Any]:
    """The leaves of ``layout`` in ``memory`` (a flat ``uint8`` tensor starting at the
    output's first byte), as views, numbers taken from ``told`` (default: the layout's own)."""
    leaves: list[Any] = []
    for want, got in zip(layout, layout if told is None else told):
        if "number" in want:
            leaves.append(got.get("number"))
            continue
        raw = memory[want["offset"] : want["offset"] + want["nbytes"]]
        leaves.append(raw.view(DTYPES[want["dtype"]]).view(want["shape"]))
    return leaves


def fill(memory: torch.Tensor, layout: list[dict], leaves: list[Any]) -> None:
    """Copy each tensor among ``leaves`` into its place of ``layout`` in ``memory``."""
    for view, leaf in zip(views(memory, layout), leaves):
        if torch.is_tensor(view):
            view.copy_(leaf)
