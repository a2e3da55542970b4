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
the host (:mod:`~autoprofiler.evaluate.output_files`).
"""

from __future__ import annotations

import contextlib
import ctypes
import logging
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

from autoprofiler.evaluate.layout import (
    SLOT_ALIGN,
    describe,
    fill,
    layout_bytes,
    mismatch,
    slab_bytes,
    views,
)

log = logging.getLogger(__name__)

NAN_FILL = 0xFF
IPC_HANDLE_BYTES = 64


class CudaIpcError(RuntimeError):
    """The driver refused (or is missing): the outputs cross on the host instead."""


_SYMBOLS = {
    "cuMemAlloc": "cuMemAlloc_v2",
    "cuMemFree": "cuMemFree_v2",
    "cuMemsetD8": "cuMemsetD8_v2",
    "cuIpcGetMemHandle": "cuIpcGetMemHandle",
    "cuIpcOpenMemHandle": "cuIpcOpenMemHandle_v2",
    "cuIpcCloseMemHandle": "cuIpcCloseMemHandle",
    "cuMemHostRegister": "cuMemHostRegister_v2",
    "cuMemHostUnregister": "cuMemHostUnregister",
}
HOST_REGISTER_READ_ONLY = 0x08  # CU_MEMHOSTREGISTER_READ_ONLY


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
        return views(self.memory[slot.offset :], slot.layout, told)

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
            fill(self.memory[slot.offset :], slot.layout, leaves)
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


@contextlib.contextmanager
def page_locked(
    memory: torch.Tensor, device: torch.device, *, read_only: bool = True, or_pageable: bool = True
) -> Iterator[None]:
    """Host ``memory`` page-locked for the copies between it and ``device`` made inside the
    block (read-only unless asked: on the H200 a 6 GiB output in ``/dev/shm`` crossed to the
    GPU in 0.7 s instead of 3.2 s, ``docs/results/evaluator_throughput.md``). When the driver
    refuses, the memory stays pageable, or with ``or_pageable=False`` ``CudaIpcError``
    is raised."""
    pointer = memory.data_ptr()
    try:
        driver = _driver()
        _prepare_context(device)
        size = ctypes.c_size_t(memory.numel())
        flags = ctypes.c_uint(HOST_REGISTER_READ_ONLY if read_only else 0)
        driver.call("cuMemHostRegister", ctypes.c_void_p(pointer), size, flags)
    except CudaIpcError as exc:
        if not or_pageable:
            raise
        log.debug("host memory stays pageable: %s", exc)
        yield
        return
    try:
        yield
        torch.cuda.synchronize(device)
    finally:
        try:
            driver.call("cuMemHostUnregister", ctypes.c_void_p(pointer))
        except CudaIpcError as exc:
            log.warning("cannot unregister host memory: %s", exc)
