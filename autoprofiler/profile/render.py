"""A profile as short text for a model (or a person) to read.

``render_profile`` writes a header (device, cost), the top kernels, then one block per group:
its one-line description and at most ``max_lines`` metrics, the most informative first (the
curated, static and torch metrics in catalogue order, then ``avg``/percentage/ratio metrics,
then the rest; ``min``/``max`` roll-ups and bookkeeping columns are left out); a section set
(``ncu.set.full``) is its title and then one such block per member section. Values carry
readable units (``10.8 ms``, ``5.75 GB``, ``84.8%``). An empty profile says so plainly.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from autoprofiler.profile.base import KernelSummary, MetricGroup, MetricValue, Profile
from autoprofiler.profile.catalogue import (
    ALWAYS_KEY,
    CURATED24_METRICS,
    STATIC_METRICS,
    group_yields,
    section_metrics,
)

_NOISE = re.compile(r"^(profiler__|derived_temp|launch__(context|device|stream)_id|launch__uses_)")
_PREFERRED = {
    name: i for i, name in enumerate((*STATIC_METRICS, *CURATED24_METRICS, "torch.kernel_time_ms"))
}
_SI = ((1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"))


def _si(value: float, unit: str) -> str:
    for scale, prefix in _SI:
        if abs(value) >= scale:
            return f"{value / scale:.3g} {prefix}{unit}".rstrip()
    return f"{value:.3g} {unit}".rstrip()


def format_value(value: float, unit: str) -> str:
    """A number with a readable unit: ``10781536, "ns"`` -> ``"10.8 ms"``."""
    if unit == "%":
        return f"{value:.1f}%"
    if unit in ("ns", "nsecond"):
        for scale, name in ((1e9, "s"), (1e6, "ms"), (1e3, "us")):
            if abs(value) >= scale:
                return f"{value / scale:.3g} {name}"
        return f"{value:.3g} ns"
    if unit in ("byte", "FLOP", "byte/s", "hz", "inst", "cycle", "sector"):
        return _si(value, "B" if unit == "byte" else unit)
    if unit == "fraction":
        return f"{value:.2f}"
    return _si(value, unit)


def _rank(name: str) -> tuple[int, int, str]:
    if name in _PREFERRED:
        return (0, _PREFERRED[name], name)
    if ".avg." in name or name.endswith((".pct", ".ratio", "_pct")) or "pct_of_peak" in name:
        return (1, 0, name)
    return (2, 0, name)


def _shown(name: str) -> bool:
    return not _NOISE.match(name) and not re.search(r"\.(min|max)(\.|$)", name)


def _kernel_name(name: str, width: int = 70) -> str:
    short = name.removeprefix("void ").split("(")[0]
    return short if len(short) <= width else short[: width - 3] + "..."


def _kernel_line(rank: int, kernel: KernelSummary) -> str:
    count = f" x{kernel.count}" if kernel.count > 1 else ""
    notes = []
    metrics = kernel.metrics
    for key, label in (
        ("sm__throughput.avg.pct_of_peak_sustained_elapsed", "SM"),
        ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed", "DRAM"),
        ("sm__warps_active.avg.pct_of_peak_sustained_active", "occupancy"),
    ):
        if key in metrics:
            notes.append(f"{label} {metrics[key]:.0f}%")
    if "launch__registers_per_thread" in metrics:
        notes.append(f"{metrics['launch__registers_per_thread']:.0f} regs")
    extra = f"  ({', '.join(notes)})" if notes else ""
    time_text = format_value(kernel.duration_ns, "ns")
    return f"  {rank}. {_kernel_name(kernel.name)}  {time_text}{count}{extra}"


def _group_block(
    name: str,
    metrics: list[tuple[str, MetricValue]],
    catalogue: Mapping[str, MetricGroup],
    cap: int,
) -> list[str]:
    group = catalogue.get(name)
    title = f"[{name}] {group.description}" if group else f"[{name}]"
    shown = sorted((m for m in metrics if _shown(m[0])), key=lambda m: _rank(m[0]))
    lines = [title]
    lines += [f"  {n} = {format_value(m.value, m.unit)}" for n, m in shown[:cap]]
    if len(shown) > cap:
        lines.append(f"  (+{len(shown) - cap} more metrics)")
    return lines


def _by_member(
    name: str, metrics: list[tuple[str, MetricValue]], catalogue: Mapping[str, MetricGroup]
) -> list[tuple[str, list[tuple[str, MetricValue]]]]:
    """A set's metrics as blocks of its member groups (each metric under the first member that
    yields it; those every ncu run yields, and the rest, under the set), so ``set full`` reads
    as its sections, each shown as fully as that section alone would be; else one block."""
    group = catalogue.get(name)
    if group is None or not group.composite_of:
        return [(name, metrics)]
    members = [catalogue[m] for m in group.composite_of if m in catalogue]
    blocks: dict[str, list[tuple[str, MetricValue]]] = {name: []}
    blocks.update((m.name, []) for m in members)
    always = section_metrics().get(ALWAYS_KEY, frozenset())
    for metric in metrics:
        owners = (m.name for m in members if group_yields(m, metric[0]))
        blocks[name if metric[0] in always else next(owners, name)].append(metric)
    return [(owner, block) for owner, block in blocks.items() if block or owner == name]


def render_profile(
    profile: Profile,
    catalogue: Mapping[str, MetricGroup],
    max_lines: int = 8,
    max_kernels: int = 5,
) -> str:
    """``profile`` as concise text: header, top kernels, then each group's key metrics."""
    header = f"Profile on {profile.device or 'unknown device'}"
    if profile.cost_s:
        header += f": cost {profile.cost_s:.1f} s (start-up {profile.startup_s:.1f} s)"
    if profile.replay_passes:
        header += f", {profile.replay_passes} ncu replay passes"
    lines = [header]
    numeric = [(n, m) for n, m in profile.metrics.items() if profile.value(n) is not None]
    if not numeric and not profile.kernels:
        lines.append("Nothing was collected for this problem.")
    if profile.kernels:
        lines.append("Top kernels by time per forward:")
        ranked = sorted(profile.kernels, key=lambda k: k.duration_ns, reverse=True)
        lines += [_kernel_line(i, k) for i, k in enumerate(ranked[:max_kernels], 1)]
    by_group: dict[str, list[tuple[str, MetricValue]]] = {}
    for name, metric in numeric:
        by_group.setdefault(metric.group or "other", []).append((name, metric))
    order = [g for g in profile.groups if g in by_group] + sorted(
        g for g in by_group if g not in profile.groups
    )
    for group_name in order:
        for name, metrics in _by_member(group_name, by_group[group_name], catalogue):
            lines += _group_block(name, metrics, catalogue, max_lines)
    for skipped in profile.skipped:
        lines.append(f"Not collected: {skipped.group} ({skipped.reason})")
    lines += [f"Note: {note}" for note in profile.notes]
    return "\n".join(lines)
