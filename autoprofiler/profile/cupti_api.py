"""A ctypes binding of the CUPTI calls the range profiler needs (CUPTI 12.6 and later).

Bound: ``cuptiProfilerInitialize``, ``cuptiDeviceGetChipName``,
``cuptiProfilerGetCounterAvailability`` (target side), the profiler host API (config image,
pass count, metric properties, evaluation of a decoded range to metric values) and the range
profiler (enable on a CUDA context, counter data image, set config, start, stop, decode, ranges
and their names). Every parameter struct begins with ``structSize``: CUPTI reads only the fields
that size covers, so the layouts here (those of CUDA 13.0's headers) work with any later CUPTI.

Nothing here imports torch or touches the GPU at import time; ``load_cupti`` finds the library
(``AUTOPROFILER_CUPTI``, an already loaded ``libcupti``, the CUDA toolkit's) and ``Cupti`` wraps
it. Every failed call raises ``CuptiError``: one line naming the call, CUPTI's own message and,
where there is one, what to do.
"""

from __future__ import annotations

import ctypes
import glob
import os
from collections.abc import Sequence
from ctypes import (
    POINTER,
    Structure,
    c_char_p,
    c_double,
    c_int,
    c_size_t,
    c_uint8,
    c_uint16,
    c_uint32,
    c_void_p,
)

from autoprofiler.profile.base import ProfilerError

CUPTI_ENV = "AUTOPROFILER_CUPTI"
_SONAMES = ("libcupti.so.13", "libcupti.so.12", "libcupti.so")
_SEARCH = (
    "{home}/extras/CUPTI/lib64/libcupti.so*",
    "{home}/targets/x86_64-linux/lib/libcupti.so*",
    "{home}/lib64/libcupti.so*",
)

# enums (cupti_profiler_target.h, cupti_profiler_host.h)
AUTO_RANGE, USER_RANGE = 1, 2
APPLICATION_REPLAY, KERNEL_REPLAY, USER_REPLAY = 1, 2, 3
# what a worker may be asked for; the first is the default (the cheaper, measured on the H200)
REPLAY_MODES = {"user": USER_REPLAY, "kernel": KERNEL_REPLAY}
DEFAULT_REPLAY = next(iter(REPLAY_MODES))
RANGE_PROFILER = 0

# cupti_result.h: codes with advice of their own
_INSUFFICIENT_PRIVILEGES = (35, 40)
_NOT_SUPPORTED = {27, 33, 41, 42, 43, 44, 45, 46}
_INVALID_METRIC_NAME = 17
_ADVICE_PRIVILEGES = (
    "reading GPU performance counters needs permission: run as root, or load the nvidia module"
    " with NVreg_RestrictProfilingToAdminUsers=0"
)
_ADVICE_UNSUPPORTED = (
    "this GPU or setup cannot be profiled through CUPTI (set AUTOPROFILER_HARDWARE=ncu)"
)


class CuptiError(ProfilerError):
    """A CUPTI call failed; ``code`` is its ``CUptiResult``."""

    def __init__(self, message: str, code: int = -1) -> None:
        super().__init__(message)
        self.code = code

    @property
    def unsupported_metric(self) -> bool:
        return self.code == _INVALID_METRIC_NAME


class _Params(Structure):
    """A CUPTI parameter struct: ``structSize`` set to the size up to its last field."""

    @classmethod
    def make(cls, **fields: object) -> _Params:
        params = cls(**fields)
        last_name, last_type = cls._fields_[-1][:2]
        params.structSize = getattr(cls, last_name).offset + ctypes.sizeof(last_type)
        return params


def _params(name: str, *fields: tuple[str, type]) -> type[_Params]:
    layout = [("structSize", c_size_t), ("pPriv", c_void_p), *fields]
    return type(name, (_Params,), {"_fields_": layout})


_Initialize = _params("Initialize")
_ChipName = _params("ChipName", ("deviceIndex", c_size_t), ("pChipName", c_char_p))
_Availability = _params(
    "Availability",
    ("ctx", c_void_p),
    ("counterAvailabilityImageSize", c_size_t),
    ("pCounterAvailabilityImage", POINTER(c_uint8)),
)
_HostInitialize = _params(
    "HostInitialize",
    ("profilerType", c_int),
    ("pChipName", c_char_p),
    ("pCounterAvailabilityImage", POINTER(c_uint8)),
    ("pHostObject", c_void_p),
)
_HostObject = _params("HostObject", ("pHostObject", c_void_p))
_AddMetrics = _params(
    "AddMetrics",
    ("pHostObject", c_void_p),
    ("ppMetricNames", POINTER(c_char_p)),
    ("numMetrics", c_size_t),
)
_ConfigImageSize = _params(
    "ConfigImageSize", ("pHostObject", c_void_p), ("configImageSize", c_size_t)
)
_ConfigImage = _params(
    "ConfigImage",
    ("pHostObject", c_void_p),
    ("configImageSize", c_size_t),
    ("pConfigImage", POINTER(c_uint8)),
)
_NumPasses = _params(
    "NumPasses",
    ("configImageSize", c_size_t),
    ("pConfigImage", POINTER(c_uint8)),
    ("numOfPasses", c_size_t),
)
_MetricProperties = _params(
    "MetricProperties",
    ("pHostObject", c_void_p),
    ("pMetricName", c_char_p),
    ("pDescription", c_char_p),
    ("pHwUnit", c_char_p),
    ("pDimUnit", c_char_p),
    ("metricType", c_int),
)
_Evaluate = _params(
    "Evaluate",
    ("pHostObject", c_void_p),
    ("pCounterDataImage", POINTER(c_uint8)),
    ("counterDataImageSize", c_size_t),
    ("rangeIndex", c_size_t),
    ("ppMetricNames", POINTER(c_char_p)),
    ("numMetrics", c_size_t),
    ("pMetricValues", POINTER(c_double)),
)
_Enable = _params("Enable", ("ctx", c_void_p), ("pRangeProfilerObject", c_void_p))
_RangeObject = _params("RangeObject", ("pRangeProfilerObject", c_void_p))
_Stop = _params(
    "Stop",
    ("pRangeProfilerObject", c_void_p),
    ("passIndex", c_size_t),
    ("targetNestingLevel", c_size_t),
    ("isAllPassSubmitted", c_uint8),
)
_Decode = _params("Decode", ("pRangeProfilerObject", c_void_p), ("numOfRangeDropped", c_size_t))
_CounterDataSize = _params(
    "CounterDataSize",
    ("pRangeProfilerObject", c_void_p),
    ("pMetricNames", POINTER(c_char_p)),
    ("numMetrics", c_size_t),
    ("maxNumOfRanges", c_size_t),
    ("maxNumRangeTreeNodes", c_uint32),
    ("counterDataSize", c_size_t),
)
_CounterDataInit = _params(
    "CounterDataInit",
    ("pRangeProfilerObject", c_void_p),
    ("counterDataSize", c_size_t),
    ("pCounterData", POINTER(c_uint8)),
)
_SetConfig = _params(
    "SetConfig",
    ("pRangeProfilerObject", c_void_p),
    ("configSize", c_size_t),
    ("pConfig", POINTER(c_uint8)),
    ("counterDataImageSize", c_size_t),
    ("pCounterDataImage", POINTER(c_uint8)),
    ("range", c_int),
    ("replayMode", c_int),
    ("maxRangesPerPass", c_size_t),
    ("numNestingLevels", c_uint16),
    ("minNestingLevel", c_uint16),
    ("passIndex", c_size_t),
    ("targetNestingLevel", c_uint16),
)
_CounterDataInfo = _params(
    "CounterDataInfo",
    ("pCounterDataImage", POINTER(c_uint8)),
    ("counterDataImageSize", c_size_t),
    ("numTotalRanges", c_size_t),
)
_RangeInfo = _params(
    "RangeInfo",
    ("pCounterDataImage", POINTER(c_uint8)),
    ("counterDataImageSize", c_size_t),
    ("rangeIndex", c_size_t),
    ("rangeDelimiter", c_char_p),
    ("rangeName", c_char_p),
)

# each bound call: its parameter struct here, and that struct's name in the CUPTI headers
SIGNATURES: dict[str, tuple[type[_Params], str]] = {
    "cuptiProfilerInitialize": (_Initialize, "CUpti_Profiler_Initialize_Params"),
    "cuptiDeviceGetChipName": (_ChipName, "CUpti_Device_GetChipName_Params"),
    "cuptiProfilerGetCounterAvailability": (
        _Availability,
        "CUpti_Profiler_GetCounterAvailability_Params",
    ),
    "cuptiProfilerHostInitialize": (_HostInitialize, "CUpti_Profiler_Host_Initialize_Params"),
    "cuptiProfilerHostDeinitialize": (_HostObject, "CUpti_Profiler_Host_Deinitialize_Params"),
    "cuptiProfilerHostConfigAddMetrics": (
        _AddMetrics,
        "CUpti_Profiler_Host_ConfigAddMetrics_Params",
    ),
    "cuptiProfilerHostGetConfigImageSize": (
        _ConfigImageSize,
        "CUpti_Profiler_Host_GetConfigImageSize_Params",
    ),
    "cuptiProfilerHostGetConfigImage": (_ConfigImage, "CUpti_Profiler_Host_GetConfigImage_Params"),
    "cuptiProfilerHostGetNumOfPasses": (_NumPasses, "CUpti_Profiler_Host_GetNumOfPasses_Params"),
    "cuptiProfilerHostGetMetricProperties": (
        _MetricProperties,
        "CUpti_Profiler_Host_GetMetricProperties_Params",
    ),
    "cuptiProfilerHostEvaluateToGpuValues": (
        _Evaluate,
        "CUpti_Profiler_Host_EvaluateToGpuValues_Params",
    ),
    "cuptiRangeProfilerEnable": (_Enable, "CUpti_RangeProfiler_Enable_Params"),
    "cuptiRangeProfilerDisable": (_RangeObject, "CUpti_RangeProfiler_Disable_Params"),
    "cuptiRangeProfilerStart": (_RangeObject, "CUpti_RangeProfiler_Start_Params"),
    "cuptiRangeProfilerStop": (_Stop, "CUpti_RangeProfiler_Stop_Params"),
    "cuptiRangeProfilerDecodeData": (_Decode, "CUpti_RangeProfiler_DecodeData_Params"),
    "cuptiRangeProfilerGetCounterDataSize": (
        _CounterDataSize,
        "CUpti_RangeProfiler_GetCounterDataSize_Params",
    ),
    "cuptiRangeProfilerCounterDataImageInitialize": (
        _CounterDataInit,
        "CUpti_RangeProfiler_CounterDataImage_Initialize_Params",
    ),
    "cuptiRangeProfilerSetConfig": (_SetConfig, "CUpti_RangeProfiler_SetConfig_Params"),
    "cuptiRangeProfilerGetCounterDataInfo": (
        _CounterDataInfo,
        "CUpti_RangeProfiler_GetCounterDataInfo_Params",
    ),
    "cuptiRangeProfilerCounterDataGetRangeInfo": (
        _RangeInfo,
        "CUpti_RangeProfiler_CounterData_GetRangeInfo_Params",
    ),
}


def library_candidates(environ: dict[str, str] | None = None) -> list[str]:
    """Where ``load_cupti`` looks, in order: ``AUTOPROFILER_CUPTI``, the sonames (an already
    loaded copy first, as the dynamic loader resolves them), then the CUDA toolkit's files."""
    env = os.environ if environ is None else environ
    found = [env[CUPTI_ENV]] if env.get(CUPTI_ENV) else []
    found += list(_SONAMES)
    homes = [env.get("CUDA_HOME", ""), env.get("CUDA_PATH", ""), "/usr/local/cuda"]
    for home in dict.fromkeys(h for h in homes if h):
        for pattern in _SEARCH:
            found += sorted(glob.glob(pattern.format(home=home)), reverse=True)
    return found


def load_cupti(environ: dict[str, str] | None = None) -> ctypes.CDLL:
    """The CUPTI library, or ``CuptiError`` saying where it was looked for."""
    env = os.environ if environ is None else environ
    candidates = library_candidates(env)
    errors = []
    for path in candidates:
        try:
            library = ctypes.CDLL(path)
        except OSError as exc:
            errors.append(str(exc).split(":")[-1].strip())
            continue
        if hasattr(library, "cuptiRangeProfilerEnable"):
            return library
        errors.append(f"{path} has no range profiler (CUPTI older than 12.6)")
        if env.get(CUPTI_ENV) == path:
            break
    raise CuptiError(
        f"CUPTI (libcupti with the range profiler, CUDA 12.6 or later) not found: set"
        f" {CUPTI_ENV}=/path/to/libcupti.so ({'; '.join(dict.fromkeys(errors))[:200]})"
    )


def _names(metrics: Sequence[str]) -> ctypes.Array:
    return (c_char_p * len(metrics))(*(m.encode() for m in metrics))


def _buffer(size: int) -> ctypes.Array:
    return (c_uint8 * size)()


class Cupti:
    """The bound calls of one loaded CUPTI library."""

    def __init__(self, library: ctypes.CDLL) -> None:
        self.library = library
        self._result_string = library.cuptiGetResultString
        self._result_string.argtypes = [c_int, POINTER(c_char_p)]
        self._result_string.restype = c_int
        for name, (params, _header_name) in SIGNATURES.items():
            function = getattr(library, name)
            function.argtypes = [POINTER(params)]
            function.restype = c_int

    def call(self, name: str, params: _Params) -> _Params:
        """Call ``name`` with ``params``; raise ``CuptiError`` when it fails."""
        code = getattr(self.library, name)(ctypes.byref(params))
        if code != 0:
            raise self.error(name, code)
        return params

    def error(self, name: str, code: int) -> CuptiError:
        text = c_char_p()
        self._result_string(code, ctypes.byref(text))
        message = (text.value or b"").decode(errors="replace") or f"error {code}"
        advice = ""
        if code in _INSUFFICIENT_PRIVILEGES:
            advice = f": {_ADVICE_PRIVILEGES}"
        elif code in _NOT_SUPPORTED:
            advice = f": {_ADVICE_UNSUPPORTED}"
        return CuptiError(f"{name} failed: {message} (CUPTI error {code}){advice}", code)

    # target side

    def initialize(self) -> None:
        self.call("cuptiProfilerInitialize", _Initialize.make())

    def chip_name(self, device_index: int) -> str:
        params = self.call("cuptiDeviceGetChipName", _ChipName.make(deviceIndex=device_index))
        return (params.pChipName or b"").decode()

    def counter_availability(self, context: int) -> ctypes.Array:
        size = self.call("cuptiProfilerGetCounterAvailability", _Availability.make(ctx=context))
        image = _buffer(size.counterAvailabilityImageSize)
        self.call(
            "cuptiProfilerGetCounterAvailability",
            _Availability.make(
                ctx=context,
                counterAvailabilityImageSize=len(image),
                pCounterAvailabilityImage=image,
            ),
        )
        return image


class MetricConfig:
    """A profiler host object for one chip: the metrics scheduled, their config image and
    passes, and the evaluation of decoded ranges to values. Close it (or use ``with``)."""

    def __init__(self, cupti: Cupti, chip: str, availability: ctypes.Array) -> None:
        self.cupti = cupti
        self._chip = chip.encode()
        params = cupti.call(
            "cuptiProfilerHostInitialize",
            _HostInitialize.make(
                profilerType=RANGE_PROFILER,
                pChipName=self._chip,
                pCounterAvailabilityImage=availability,
            ),
        )
        self.host = params.pHostObject
        self.metrics: list[str] = []

    def __enter__(self) -> MetricConfig:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()

    def close(self) -> None:
        if self.host:
            self.cupti.call(
                "cuptiProfilerHostDeinitialize", _HostObject.make(pHostObject=self.host)
            )
            self.host = None

    def add(self, metrics: Sequence[str]) -> None:
        names = _names(metrics)
        self.cupti.call(
            "cuptiProfilerHostConfigAddMetrics",
            _AddMetrics.make(pHostObject=self.host, ppMetricNames=names, numMetrics=len(metrics)),
        )
        self.metrics += list(metrics)

    def unit(self, metric: str) -> str:
        params = self.cupti.call(
            "cuptiProfilerHostGetMetricProperties",
            _MetricProperties.make(pHostObject=self.host, pMetricName=metric.encode()),
        )
        return (params.pDimUnit or b"").decode()

    def image(self) -> ctypes.Array:
        size = self.cupti.call(
            "cuptiProfilerHostGetConfigImageSize", _ConfigImageSize.make(pHostObject=self.host)
        ).configImageSize
        image = _buffer(size)
        self.cupti.call(
            "cuptiProfilerHostGetConfigImage",
            _ConfigImage.make(pHostObject=self.host, configImageSize=size, pConfigImage=image),
        )
        return image

    def passes(self, image: ctypes.Array) -> int:
        params = self.cupti.call(
            "cuptiProfilerHostGetNumOfPasses",
            _NumPasses.make(configImageSize=len(image), pConfigImage=image),
        )
        return int(params.numOfPasses)

    def evaluate(self, counter_data: ctypes.Array, range_index: int) -> list[float]:
        names = _names(self.metrics)
        values = (c_double * len(self.metrics))()
        self.cupti.call(
            "cuptiProfilerHostEvaluateToGpuValues",
            _Evaluate.make(
                pHostObject=self.host,
                pCounterDataImage=counter_data,
                counterDataImageSize=len(counter_data),
                rangeIndex=range_index,
                ppMetricNames=names,
                numMetrics=len(self.metrics),
                pMetricValues=values,
            ),
        )
        return list(values)


class RangeProfiler:
    """The range profiler enabled on one CUDA context: per-kernel ranges (auto range) of
    whatever metrics a ``MetricConfig`` scheduled, replayed by CUPTI kernel by kernel (kernel
    replay) or by the caller running the whole workload once per pass (user replay)."""

    def __init__(self, cupti: Cupti, context: int) -> None:
        self.cupti = cupti
        params = cupti.call("cuptiRangeProfilerEnable", _Enable.make(ctx=context))
        self.handle = params.pRangeProfilerObject

    def close(self) -> None:
        if self.handle:
            self.cupti.call(
                "cuptiRangeProfilerDisable", _RangeObject.make(pRangeProfilerObject=self.handle)
            )
            self.handle = None

    def counter_data(self, metrics: Sequence[str], max_ranges: int) -> ctypes.Array:
        names = _names(metrics)
        size = self.cupti.call(
            "cuptiRangeProfilerGetCounterDataSize",
            _CounterDataSize.make(
                pRangeProfilerObject=self.handle,
                pMetricNames=names,
                numMetrics=len(metrics),
                maxNumOfRanges=max_ranges,
                maxNumRangeTreeNodes=max_ranges,
            ),
        ).counterDataSize
        data = _buffer(size)
        self.cupti.call(
            "cuptiRangeProfilerCounterDataImageInitialize",
            _CounterDataInit.make(
                pRangeProfilerObject=self.handle, counterDataSize=size, pCounterData=data
            ),
        )
        return data

    def configure(
        self,
        image: ctypes.Array,
        counter_data: ctypes.Array,
        max_ranges: int,
        replay: int = KERNEL_REPLAY,
    ) -> None:
        """Auto range: each kernel launched is one range. ``KERNEL_REPLAY``: CUPTI replays
        each kernel for as many passes as the config needs (saving and restoring the memory
        it touches); ``USER_REPLAY``: the caller runs the workload between ``start`` and
        ``stop`` until ``stop`` says every pass was submitted."""
        self.cupti.call(
            "cuptiRangeProfilerSetConfig",
            _SetConfig.make(
                pRangeProfilerObject=self.handle,
                configSize=len(image),
                pConfig=image,
                counterDataImageSize=len(counter_data),
                pCounterDataImage=counter_data,
                range=AUTO_RANGE,
                replayMode=replay,
                maxRangesPerPass=max_ranges,
                numNestingLevels=1,
                minNestingLevel=1,
                passIndex=0,
                targetNestingLevel=1,
            ),
        )

    def start(self) -> None:
        self.cupti.call(
            "cuptiRangeProfilerStart", _RangeObject.make(pRangeProfilerObject=self.handle)
        )

    def stop(self) -> bool:
        """End a pass; whether every pass the config needs has now been submitted."""
        params = self.cupti.call(
            "cuptiRangeProfilerStop", _Stop.make(pRangeProfilerObject=self.handle)
        )
        return bool(params.isAllPassSubmitted)

    def decode(self) -> int:
        """Decode what was collected into the counter data; the number of ranges dropped."""
        params = self.cupti.call(
            "cuptiRangeProfilerDecodeData", _Decode.make(pRangeProfilerObject=self.handle)
        )
        return int(params.numOfRangeDropped)

    def ranges(self, counter_data: ctypes.Array) -> list[str]:
        """The names of the ranges in ``counter_data``, in order."""
        count = self.cupti.call(
            "cuptiRangeProfilerGetCounterDataInfo",
            _CounterDataInfo.make(
                pCounterDataImage=counter_data, counterDataImageSize=len(counter_data)
            ),
        ).numTotalRanges
        names = []
        for index in range(count):
            params = self.cupti.call(
                "cuptiRangeProfilerCounterDataGetRangeInfo",
                _RangeInfo.make(
                    pCounterDataImage=counter_data,
                    counterDataImageSize=len(counter_data),
                    rangeIndex=index,
                    rangeDelimiter=b"/",
                ),
            )
            names.append((params.rangeName or b"").decode(errors="replace"))
        return names


def driver_present() -> bool:
    """Whether the CUDA driver library loads (no GPU machine has none)."""
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        return False
    return True


_RESERVED_SHARED_MEMORY_PER_BLOCK = 111  # CUdevice_attribute, cuda.h


def reserved_shared_memory(device_index: int) -> int:
    """Bytes of shared memory the CUDA driver reserves per block on the device (which ncu
    counts in ``launch__shared_mem_per_block``); 0 when the driver cannot say."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return 0
    device, value = c_int(), c_int()
    if driver.cuDeviceGet(ctypes.byref(device), device_index) != 0:
        return 0
    code = driver.cuDeviceGetAttribute(
        ctypes.byref(value), _RESERVED_SHARED_MEMORY_PER_BLOCK, device
    )
    return int(value.value) if code == 0 else 0


def current_context() -> int:
    """The calling thread's current CUDA context (``cuCtxGetCurrent``), as an address."""
    try:
        driver = ctypes.CDLL("libcuda.so.1")
    except OSError as exc:
        raise CuptiError(f"the CUDA driver (libcuda.so.1) is not loadable: {exc}") from exc
    context = c_void_p()
    code = driver.cuCtxGetCurrent(ctypes.byref(context))
    if code != 0 or not context.value:
        raise CuptiError(f"no current CUDA context (cuCtxGetCurrent returned {code})")
    return int(context.value)
