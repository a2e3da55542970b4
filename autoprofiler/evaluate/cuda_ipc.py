"""Outputs handed over on the GPU: a slab of device memory the trusted side owns.

The trusted reference process allocates one slab per candidate run with the CUDA driver
(``cuMemAlloc``: an allocation of its own, outside PyTorch's caching allocator, so the handle
exposes nothing else of that process), fills it with ``0xFF`` (NaN in every float type) and
exports it (``cuIpcGetMemHandle``). The candidate's process opens the handle and copies each
output it is judged on into that output's slot, laid out as the reference's output is (dtype,
shape, contiguous). The trusted side reads the slab only after the candidate's process and
everything it started are gone, so no kernel of the candidate can still write to it; what the
candidate said it wrote is checked against the layout, and the bytes are read with the
reference's layout whatever it said. Gigabytes cross at device bandwidth instead of twice over
the host (``torch.save`` to ``/dev/shm`` and back), which cost seconds per large output.
"""

from __future__ import annotations

import ctypes
import logging
from dataclasses import dataclass
from typing import Any

import torch

log = logging.getLogger(__name__)

SLOT_ALIGN = 256
NAN_FILL = 0xFF
IPC_HANDLE_BYTES = 64
DTYPES = {
    str(dtype).removeprefix("torch."): dtype
    for dtype in (
        torch.float16, torch.bfloat16, torch.float32, torch.float64, torch.complex64,
        torch.complex128, torch.int8, torch.uint8, torch.int16, torch.int32, torch.int64,
        torch.bool,
    )
}  # fmt: skip


class CudaIpcError(RuntimeError):
    """The driver refused (or is missing): the outputs cross on the host instead."""


_SYMBOLS = {
    "cuMemAlloc": "cuMemAlloc_v2",
    "cuMemFree": "cuMemFree_v2",
    "cuMemsetD8": "cuMemsetD8_v2",
    "cuIpcGetMemHandle": "cuIpcGetMemHandle",
    "cuIpcOpenMemHandle": "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle": "cuIpcCloseMemHandle",
}


class _Handle(ctypes.Structure):
    # Bytes, not c_char: a c_char array field reads back cut at its first NUL.
    _fields_ = [("reserved", ctypes.c_ubyte * IPC_HANDLE_BYTES)]


class _Driver:
    """The few CUDA driver calls the slab needs, bound with ``ctypes`` to ``libcuda.so.1``."""

    def __init__(self) -> None:
        try:
            self.lib = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise CudaIpcError(f"no CUDA driver library: {exc}") from None

    def call(self, name: str, *args: Any) -> None:
        # The exported symbol of each call, named outright: some ``_v2`` symbols take other
        # arguments than the call of the same name (``cuCtxSynchronize_v2`` takes a context).
        status = getattr(self.lib, _SYMBOLS[name])(*args)
        if status != 0:
            text = ctypes.c_char_p()
            self.lib.cuGetErrorString(status, ctypes.byref(text))
            raise CudaIpcError(f"{name} failed: {(text.value or b'?').decode()} ({status})")


_DRIVER: _Driver | None = None


def _driver() -> _Driver:
    global _DRIVER
    if _DRIVER is None:
        _DRIVER = _Driver()
    return _DRIVER


def device_index(device: torch.device) -> int:
    """``device``'s index (the current device for a bare ``cuda``)."""
    return device.index if device.index is not None else torch.cuda.current_device()


def _prepare_context(device: torch.device) -> None:
    """Make PyTorch's (primary) context on ``device`` current on this thread."""
    torch.cuda.set_device(device_index(device))
    torch.cuda.synchronize(device_index(device))


class _DeviceBytes:
    """Raw device memory seen by PyTorch as a flat ``uint8`` tensor (no copy)."""

    def __init__(self, pointer: int, size: int) -> None:
        self.__cuda_array_interface__ = {
            "shape": (size,),
            "typestr": "|u1",
            "data": (pointer, False),
            "version": 3,
        }


def _as_tensor(pointer: int, size: int, device: torch.device) -> torch.Tensor:
    return torch.as_tensor(_DeviceBytes(pointer, size), device=device)


def leaf_layout(leaves: list[Any]) -> list[dict]:
    """The layout of one output: ``{"dtype", "shape", "offset", "nbytes"}`` per tensor leaf
    (offsets from the slot's start, aligned), ``{"number": value}`` per number."""
    layout: list[dict] = []
    offset = 0
    for leaf in leaves:
        if torch.is_tensor(leaf):
            nbytes = leaf.numel() * leaf.element_size()
            dtype = str(leaf.dtype).removeprefix("torch.")
            layout.append({"dtype": dtype, "shape": list(leaf.shape), "offset": offset,
                           "nbytes": nbytes})  # fmt: skip
            offset += -(-nbytes // SLOT_ALIGN) * SLOT_ALIGN
        else:
            layout.append({"number": leaf})
    return layout


def layout_bytes(layout: list[dict]) -> int:
    """Bytes one slot of ``layout`` takes, aligned."""
    ends = [entry["offset"] + entry["nbytes"] for entry in layout if "nbytes" in entry]
    return -(-max(ends, default=0) // SLOT_ALIGN) * SLOT_ALIGN


def slab_bytes(layouts: dict[str, list[dict]]) -> int:
    """Bytes a slab of these slots takes (each slot aligned, none empty)."""
    return sum(max(layout_bytes(layout), SLOT_ALIGN) for layout in layouts.values())


def describe(leaves: list[Any]) -> list[dict]:
    """What the candidate's side says it wrote: dtype and shape per tensor, value per number."""
    return [
        {"dtype": str(leaf.dtype).removeprefix("torch."), "shape": list(leaf.shape)}
        if torch.is_tensor(leaf)
        else {"number": leaf}
        for leaf in leaves
    ]


def mismatch(layout: list[dict], told: Any) -> str | None:
    """Why what the candidate told does not fit the slot's layout (as ``compare_outputs``
    words it), or None."""
    if not isinstance(told, list) or not all(isinstance(entry, dict) for entry in told):
        return "its output description is malformed"
    if len(told) != len(layout):
        return f"{len(told)} outputs where the reference has {len(layout)}"
    for index, (want, got) in enumerate(zip(layout, told)):
        if "number" in want:
            continue
        if "shape" not in got:
            return f"output {index} is a number, not a tensor"
        if got.get("shape") != want["shape"]:
            shape, expected = tuple(got.get("shape") or ()), tuple(want["shape"])
            return f"output {index} has shape {shape}, expected {expected}"
        if got.get("dtype") != want["dtype"]:
            return f"output {index} has dtype {got.get('dtype')}, expected {want['dtype']}"
    return None


@dataclass
class Slot:
    """One output's place in the slab."""

    offset: int
    layout: list[dict]

    def to_dict(self) -> dict:
        return {"offset": self.offset, "layout": self.layout}


class OutputSlab:
    """The trusted side's slab: allocated, filled with NaN, exported; read after the
    candidate is gone; freed by :meth:`close`."""

    def __init__(self, layouts: dict[str, list[dict]], device: torch.device) -> None:
        self.device = device
        self.slots: dict[str, Slot] = {}
        offset = 0
        for name, layout in layouts.items():
            self.slots[name] = Slot(offset, layout)
            offset += max(layout_bytes(layout), SLOT_ALIGN)
        self.size = size = slab_bytes(layouts)
        driver = _driver()
        _prepare_context(device)
        pointer = ctypes.c_uint64()
        driver.call("cuMemAlloc", ctypes.byref(pointer), ctypes.c_size_t(size))
        self.pointer = pointer.value
        try:
            driver.call("cuMemsetD8", ctypes.c_uint64(self.pointer), ctypes.c_ubyte(NAN_FILL),
                        ctypes.c_size_t(size))  # fmt: skip
            handle = _Handle()
            driver.call("cuIpcGetMemHandle", ctypes.byref(handle), ctypes.c_uint64(self.pointer))
            self.handle = bytes(handle.reserved).hex()
            torch.cuda.synchronize(device)
        except CudaIpcError:
            self.close()
            raise
        self.memory = _as_tensor(self.pointer, size, device)

    def offer(self) -> dict:
        """What the candidate's process needs: the handle, the size, the slots."""
        return {
            "handle": self.handle,
            "size": self.size,
            "slots": {name: slot.to_dict() for name, slot in self.slots.items()},
        }

    def read(self, name: str, told: Any) -> list[Any] | str:
        """The output in slot ``name`` with the reference's layout (views, no copy), or why it
        cannot be judged as one (a mismatch between what the candidate told and the layout)."""
        slot = self.slots[name]
        why = mismatch(slot.layout, told)
        if why is not None:
            return why
        leaves: list[Any] = []
        for want, got in zip(slot.layout, told):
            if "number" in want:
                leaves.append(got.get("number"))
                continue
            start = slot.offset + want["offset"]
            raw = self.memory[start : start + want["nbytes"]]
            leaves.append(raw.view(DTYPES[want["dtype"]]).view(want["shape"]))
        return leaves

    def close(self) -> None:
        """Free the slab (once)."""
        _let_go(self, "cuMemFree", "free an output slab")


class OpenedSlab:
    """The candidate's side: the slab opened from its handle, written slot by slot."""

    def __init__(self, offer: dict, device: torch.device) -> None:
        self.slots = {name: Slot(s["offset"], s["layout"]) for name, s in offer["slots"].items()}
        self.device = device
        driver = _driver()
        _prepare_context(device)
        raw = bytes.fromhex(offer["handle"])
        if len(raw) != IPC_HANDLE_BYTES:
            raise CudaIpcError(f"an IPC handle is {IPC_HANDLE_BYTES} bytes, not {len(raw)}")
        handle = _Handle.from_buffer_copy(raw)
        pointer = ctypes.c_uint64()
        lazy_peer_access = ctypes.c_uint(1)
        driver.call("cuIpcOpenMemHandle", ctypes.byref(pointer), handle, lazy_peer_access)
        self.pointer = pointer.value
        self.memory = _as_tensor(self.pointer, int(offer["size"]), device)

    def write(self, name: str, leaves: list[Any]) -> list[dict] | None:
        """Copy ``leaves`` into slot ``name`` when they fit its layout; what was written (as
        :func:`describe` says), or None when there is no such slot."""
        slot = self.slots.get(name)
        if slot is None:
            return None
        told = describe(leaves)
        if mismatch(slot.layout, told) is None:
            for want, leaf in zip(slot.layout, leaves):
                if "number" in want:
                    continue
                start = slot.offset + want["offset"]
                raw = self.memory[start : start + want["nbytes"]]
                raw.view(DTYPES[want["dtype"]]).view(want["shape"]).copy_(leaf)
            torch.cuda.synchronize(self.device)
        return told

    def close(self) -> None:
        """Unmap the slab from this process (once); its owner frees it."""
        _let_go(self, "cuIpcCloseMemHandle", "close an opened output slab")


def _let_go(slab: OutputSlab | OpenedSlab, call: str, what: str) -> None:
    """Drop ``slab``'s view of its memory and hand the memory to the driver's ``call``, once."""
    if getattr(slab, "pointer", 0):
        slab.memory = None
        try:
            _driver().call(call, ctypes.c_uint64(slab.pointer))
        except CudaIpcError as exc:
            log.warning("cannot %s: %s", what, exc)
        slab.pointer = 0
