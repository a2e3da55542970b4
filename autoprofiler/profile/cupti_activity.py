"""Kernel launch records through CUPTI's activity API (bound with ``ctypes``): each kernel's
name, grid and block, registers per thread and shared memory, as CUDA reports them.

The CUPTI worker needs these once per problem, to give the range profiler's numbered ranges
their kernels' names and launch statistics. torch.profiler reads the same records (kineto is a
client of this API) but its first use in a process costs seconds; asking CUPTI directly skips
kineto and the chrome trace.

Only the start of a kernel record is read (``_KernelRecord``: the fields up to ``name``, the
same in every ``CUpti_ActivityKernel`` version since CUDA 11), and its layout is checked
against CUDA's headers by the tests. Names are demangled with the C++ runtime's
``__cxa_demangle``, as ncu and torch.profiler show them.
"""

from __future__ import annotations

import ctypes
import functools
from collections.abc import Callable
from ctypes import (
    CFUNCTYPE,
    POINTER,
    Structure,
    byref,
    c_char_p,
    c_int,
    c_int32,
    c_int64,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_uint64,
    c_void_p,
)
from typing import Any

from autoprofiler.profile.cupti_api import Cupti

CONCURRENT_KERNEL = 10  # CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL, cupti_activity.h
FLUSH_FORCED = 1  # CUPTI_ACTIVITY_FLAG_FLUSH_FORCED
BUFFER_BYTES = 1 << 20
_REGISTERED: list[KernelActivity] = []


class _KernelRecord(Structure):
    """The leading fields of ``CUpti_ActivityKernel10`` (packed, as the header declares it)."""

    _pack_ = 1
    _fields_ = [
        ("kind", c_int),
        ("cacheConfig", c_uint8),
        ("sharedMemoryConfig", c_uint8),
        ("registersPerThread", c_uint16),
        ("partitionedGlobalCacheRequested", c_int),
        ("partitionedGlobalCacheExecuted", c_int),
        ("start", c_uint64),
        ("end", c_uint64),
        ("completed", c_uint64),
        ("deviceId", c_uint32),
        ("contextId", c_uint32),
        ("streamId", c_uint32),
        ("gridX", c_int32),
        ("gridY", c_int32),
        ("gridZ", c_int32),
        ("blockX", c_int32),
        ("blockY", c_int32),
        ("blockZ", c_int32),
        ("staticSharedMemory", c_int32),
        ("dynamicSharedMemory", c_int32),
        ("localMemoryPerThread", c_uint32),
        ("localMemoryTotal", c_uint32),
        ("correlationId", c_uint32),
        ("gridId", c_int64),
        ("name", c_char_p),
    ]


RECORD_C_NAME = "CUpti_ActivityKernel10"

_REQUESTED = CFUNCTYPE(None, POINTER(POINTER(c_uint8)), POINTER(c_size_t), POINTER(c_size_t))
_COMPLETED = CFUNCTYPE(None, c_void_p, c_uint32, POINTER(c_uint8), c_size_t, c_size_t)


@functools.cache
def _demangler() -> tuple[Any, Any] | None:
    """The C++ runtime's ``__cxa_demangle`` and libc's ``free``, or None without them."""
    try:
        runtime = ctypes.CDLL("libstdc++.so.6")
        libc = ctypes.CDLL(None)
    except OSError:
        return None
    cxa = runtime.__cxa_demangle
    cxa.restype = c_void_p
    cxa.argtypes = [c_char_p, c_void_p, c_void_p, POINTER(c_int)]
    return cxa, libc.free


def demangle(name: str) -> str:
    """``name`` demangled by the C++ runtime (unchanged when it is not a mangled C++ name)."""
    found = _demangler()
    if found is None:
        return name
    cxa, free = found
    status = c_int()
    text = cxa(name.encode(), None, None, byref(status))
    if status.value != 0 or not text:
        return name
    try:
        return (ctypes.string_at(text) or b"").decode(errors="replace") or name
    finally:
        free(c_void_p(text))


def kernel_record(record: _KernelRecord, reserved_shared: int = 0) -> dict[str, Any]:
    """One kernel's launch statistics with ncu's metric names; shared memory counts the
    ``reserved_shared`` bytes the driver keeps per block, as ncu does."""
    shared = record.staticSharedMemory + record.dynamicSharedMemory
    return {
        "name": demangle((record.name or b"").decode(errors="replace")),
        "start": int(record.start),
        "launch__grid_size": float(record.gridX * record.gridY * record.gridZ),
        "launch__block_size": float(record.blockX * record.blockY * record.blockZ),
        "launch__registers_per_thread": float(record.registersPerThread),
        "launch__shared_mem_per_block": float(shared + reserved_shared),
        "launch__shared_mem_per_block_driver": float(reserved_shared),
    }


class KernelActivity:
    """CUPTI's kernel activity records for what ``run`` launches (one call at a time)."""

    def __init__(self, cupti: Cupti, reserved_shared: int = 0) -> None:
        self.cupti = cupti
        self.library = library = cupti.library
        self.reserved_shared = reserved_shared
        self._records: list[dict[str, Any]] = []
        self._buffers: dict[int, ctypes.Array] = {}
        library.cuptiActivityRegisterCallbacks.argtypes = [_REQUESTED, _COMPLETED]
        library.cuptiActivityGetNextRecord.argtypes = [
            POINTER(c_uint8),
            c_size_t,
            POINTER(c_void_p),
        ]
        for name in ("cuptiActivityEnable", "cuptiActivityDisable", "cuptiActivityFlushAll"):
            getattr(library, name).argtypes = [c_uint32]
        self._on_request = _REQUESTED(self._request)
        self._on_complete = _COMPLETED(self._complete)
        self._call("cuptiActivityRegisterCallbacks", self._on_request, self._on_complete)
        _REGISTERED.append(self)  # CUPTI may call back until the process ends: never freed

    def _call(self, name: str, *args: Any) -> None:
        code = getattr(self.library, name)(*args)
        if code != 0:
            raise self.cupti.error(name, code)

    def _request(self, buffer: Any, size: Any, max_records: Any) -> None:
        block = (c_uint64 * (BUFFER_BYTES // 8))()  # 8-byte aligned, as CUPTI requires
        address = ctypes.addressof(block)
        self._buffers[address] = block
        buffer[0] = ctypes.cast(block, POINTER(c_uint8))
        size[0] = BUFFER_BYTES
        max_records[0] = 0

    def _complete(self, _context: Any, _stream: int, buffer: Any, _size: int, valid: int) -> None:
        next_record = self.library.cuptiActivityGetNextRecord
        record = c_void_p()
        while next_record(buffer, valid, byref(record)) == 0:
            kernel = ctypes.cast(record, POINTER(_KernelRecord)).contents
            if kernel.kind == CONCURRENT_KERNEL:
                self._records.append(kernel_record(kernel, self.reserved_shared))
        self._buffers.pop(ctypes.addressof(buffer.contents), None)

    def record(self, run: Callable[[], None]) -> list[dict[str, Any]]:
        """The kernels ``run`` launched (it must wait for them), in start order."""
        self._records = []
        self._call("cuptiActivityEnable", CONCURRENT_KERNEL)
        try:
            run()
        finally:
            self._call("cuptiActivityDisable", CONCURRENT_KERNEL)
            self._call("cuptiActivityFlushAll", FLUSH_FORCED)
        records = sorted(self._records, key=lambda r: r["start"])
        for entry in records:
            entry.pop("start")
        return records
