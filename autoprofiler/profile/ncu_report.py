"""Reading what a profiling run reports: ncu's raw CSV page, replay passes and failure texts, and
the runner's progress events.

``ncu --import report.ncu-rep --csv --page raw`` writes one row per profiled kernel: a header row
(``"ID","Process ID",...,"CC",<metric>...``), a units row, then the kernels. Numbers carry
thousands separators (``"10,781,536"``); some values are strings (``"no data"``, ``"(128, 1, 1)"``).
Lines ncu prints around the table (``==PROF==``, ``==WARNING==``) are skipped.

Aggregation over kernels (``aggregate``): a metric whose name ends in ``.sum`` and whose unit is
a count (not a percentage or a rate) is summed over kernels (bytes moved, instructions, time);
every other numeric metric is averaged weighted by kernel duration (``gpu__time_duration.sum``;
equal weights when it is missing). Sums are per forward: divided by the number of profiled
forwards. Device, NVLink, NUMA and C2C columns describe the machine, not the kernel, and are
dropped.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from autoprofiler.profile.base import KernelSummary, MetricValue, ProfilerError

EVENT_PREFIX = "@@AP "  # the runner's progress lines on stderr (``ncu_runner``)
DURATION = "gpu__time_duration.sum"
PASSES_COLUMN = "profiler__replayer_passes"
NVTX_COLUMN_PREFIX = "thread Domain:Push/Pop_Range"
KERNEL_COLUMN = "Kernel Name"
MACHINE_PREFIXES = ("device__", "nvlink__", "numa__", "c2clink__")
KERNEL_KEY_METRICS = (
    "sm__throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",
    "gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",
    "sm__warps_active.avg.pct_of_peak_sustained_active",
    "launch__registers_per_thread",
    "launch__grid_size",
    "launch__block_size",
)

_TIME_SCALE_NS = {"ns": 1.0, "nsecond": 1.0, "us": 1e3, "usecond": 1e3, "ms": 1e6, "msecond": 1e6}
_TIME_SCALE_NS |= {"s": 1e9, "second": 1e9}
_PASSES_LINE = re.compile(r'==PROF==\s+Profiling\s+"(?P<name>.*?)".*?(?P<n>\d+)\s+pass', re.I)
_NVTX_RANGE = re.compile(r'"[^":]*:([^":]+):')


@dataclass
class KernelRow:
    """One profiled kernel launch: its name, the NVTX ranges it ran in, and its metrics."""

    name: str
    ranges: tuple[str, ...] = ()
    values: dict[str, float | str] = field(default_factory=dict)

    @property
    def duration(self) -> float:
        """``gpu__time_duration.sum`` in the unit of its column (0 when missing)."""
        value = self.values.get(DURATION)
        return float(value) if isinstance(value, float) and not math.isnan(value) else 0.0


@dataclass
class NcuTable:
    """The kernels of one raw CSV page and the unit of each metric column."""

    kernels: list[KernelRow]
    units: dict[str, str]


def parse_events(text: str) -> list[dict[str, Any]]:
    """The runner's progress events in ``text`` (other lines ignored, bad lines skipped)."""
    events = []
    for line in text.splitlines():
        _, sep, payload = line.partition(EVENT_PREFIX)
        if not sep:
            continue
        try:
            event = json.loads(payload)
        except json.JSONDecodeError:
            continue
        if isinstance(event, dict):
            events.append(event)
    return events


def check_output(text: str) -> None:
    """Raise a one-line ``ProfilerError`` for the failures ncu reports in its own output."""
    if "ERR_NVGPUCTRPERM" in text:
        raise ProfilerError(
            "ncu may not read the GPU performance counters (ERR_NVGPUCTRPERM): run as root or "
            "allow profiling for all users (NVreg_RestrictProfilingToAdminUsers=0)"
        )
    if "No kernels were profiled" in text:
        raise ProfilerError(
            "ncu profiled no kernel: the forward launched no CUDA kernel inside the NVTX range"
        )
    errors = [line for line in text.splitlines() if line.startswith("==ERROR==")]
    if errors:
        raise ProfilerError(f"ncu failed: {errors[0].removeprefix('==ERROR==').strip()}")


def parse_number(text: str) -> float | str:
    """``"10,781,536"`` -> 10781536.0; text that is not a number is returned unchanged."""
    stripped = text.strip()
    try:
        return float(stripped.replace(",", ""))
    except ValueError:
        return stripped


def parse_raw_csv(text: str) -> NcuTable:
    """Parse ncu's ``--csv --page raw`` output (lines before the header are skipped)."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if line.startswith('"ID"')), None)
    if start is None:
        check_output(text)
        raise ProfilerError("ncu wrote no kernel table (no CSV header in its output)")
    rows = list(csv.reader(io.StringIO("\n".join(lines[start:]))))
    header, units_row, body = rows[0], rows[1], rows[2:]
    nvtx_col = next((i for i, h in enumerate(header) if h.startswith(NVTX_COLUMN_PREFIX)), None)
    name_col = header.index(KERNEL_COLUMN)
    first_metric = header.index("CC") + 1 if "CC" in header else name_col + 1
    metric_cols = [
        i for i in range(first_metric, len(header)) if not header[i].startswith(MACHINE_PREFIXES)
    ]
    units = {header[i]: units_row[i] if i < len(units_row) else "" for i in metric_cols}
    kernels = []
    for row in body:
        if len(row) < len(header):
            continue
        ranges = tuple(_NVTX_RANGE.findall(row[nvtx_col])) if nvtx_col is not None else ()
        values = {header[i]: parse_number(row[i]) for i in metric_cols if row[i] != ""}
        kernels.append(KernelRow(name=row[name_col], ranges=ranges, values=values))
    return NcuTable(kernels=kernels, units=units)


def parse_passes(text: str) -> list[tuple[str, int]]:
    """``(kernel, passes)`` from the ``==PROF== Profiling "k" - 0: ... - 10 passes`` lines."""
    return [(m["name"], int(m["n"])) for m in _PASSES_LINE.finditer(text)]


def kernel_passes(kernels: Sequence[KernelRow], log_text: str) -> list[int]:
    """Replay passes per kernel: from ncu's progress lines when they align with the kernels,
    else from the ``profiler__replayer_passes`` column, else 0."""
    lines = parse_passes(log_text)
    if len(lines) == len(kernels):
        return [n for _, n in lines]
    out = []
    for kernel in kernels:
        value = kernel.values.get(PASSES_COLUMN)
        out.append(int(value) if isinstance(value, float) and not math.isnan(value) else 0)
    return out


def split_by_range(table: NcuTable, names: Iterable[str]) -> dict[str, list[KernelRow]]:
    """The kernels of each NVTX range in ``names`` (a kernel goes to the first range it ran in)."""
    wanted = {name: [] for name in names}
    for kernel in table.kernels:
        for name in kernel.ranges:
            if name in wanted:
                wanted[name].append(kernel)
                break
    return wanted


def duration_to_ns(value: float, unit: str) -> float:
    return value * _TIME_SCALE_NS.get(unit.strip().lower(), 1.0)


def _is_summed(name: str, unit: str) -> bool:
    return name.endswith(".sum") and unit != "%" and "/" not in unit


def aggregate(
    kernels: Sequence[KernelRow],
    units: dict[str, str],
    group_of: Callable[[str], str],
    forwards: int = 1,
) -> dict[str, MetricValue]:
    """Duration-weighted means (and per-forward sums of ``.sum`` counts) over ``kernels``."""
    if not kernels:
        return {}
    weights = [k.duration for k in kernels]
    if sum(weights) <= 0:
        weights = [1.0] * len(kernels)
    names = sorted({name for k in kernels for name in k.values})
    out: dict[str, MetricValue] = {}
    for name in names:
        pairs = [
            (k.values[name], w)
            for k, w in zip(kernels, weights, strict=True)
            if isinstance(k.values.get(name), float) and not math.isnan(k.values[name])
        ]
        if not pairs:
            continue
        unit = units.get(name, "")
        if _is_summed(name, unit):
            value = sum(v for v, _ in pairs) / max(forwards, 1)
        else:
            total = sum(w for _, w in pairs)
            value = sum(v * w for v, w in pairs) / total if total > 0 else pairs[0][0]
        out[name] = MetricValue(value=value, unit=unit, group=group_of(name))
    return out


def summarize_kernels(
    kernels: Sequence[KernelRow], units: dict[str, str], top: int = 10, forwards: int = 1
) -> list[KernelSummary]:
    """The ``top`` kernels by total duration per forward, launches of one name merged."""
    unit = units.get(DURATION, "ns")
    by_name: dict[str, list[KernelRow]] = {}
    for kernel in kernels:
        by_name.setdefault(kernel.name, []).append(kernel)
    summaries = []
    for name, rows in by_name.items():
        first = rows[0].values
        summaries.append(
            KernelSummary(
                name=name,
                duration_ns=duration_to_ns(sum(r.duration for r in rows), unit) / max(forwards, 1),
                count=max(len(rows) // max(forwards, 1), 1),
                metrics={
                    m: first[m]
                    for m in KERNEL_KEY_METRICS
                    if isinstance(first.get(m), float) and not math.isnan(first[m])
                },
            )
        )
    summaries.sort(key=lambda s: s.duration_ns, reverse=True)
    return summaries[:top]
