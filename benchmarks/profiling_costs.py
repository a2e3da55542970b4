"""The cost table: per metric group, profiling seconds and replay passes per problem.

    python benchmarks/profiling_costs.py RECORDINGS.jsonl.gz [...] --markdown OUT.md

Seconds are the in-range (marginal) cost of one group for one problem, start-up excluded;
the start-up of one profiler process is reported separately, as the cost model is
start-up + the sum of the groups collected in that process.
"""

from __future__ import annotations

import argparse
import statistics
from collections import defaultdict
from pathlib import Path

import _common  # noqa: F401 - puts the checkout on sys.path

from autoprofiler.profile import import_recordings
from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.store import Store


def group_costs(store: Store, device: str) -> dict[str, dict[str, tuple[float, int]]]:
    """``{group: {problem hash: (seconds, replay passes)}}`` from the recordings of ``device``."""
    costs: dict[str, dict[str, tuple[float, int]]] = defaultdict(dict)
    for problem_hash, record_device, group, profile in store.iter_profile_records():
        if record_device != device:
            continue
        cost = profile.get("group_costs", {}).get(group)
        seconds = cost["seconds"] if cost else profile.get("cost_s", 0.0)
        passes = cost["replay_passes"] if cost else profile.get("replay_passes", 0)
        costs[group][problem_hash] = (seconds, passes)
    return costs


def ratio_to_full(rows: dict[str, tuple[float, int]], full: dict[str, tuple[float, int]]) -> str:
    """Median over the problems that also have ``--set full`` of this group's seconds over
    full's on the same problem, with how many problems it rests on."""
    ratios = [rows[h][0] / full[h][0] for h in rows.keys() & full.keys() if full[h][0] > 0]
    if not ratios:
        return "full not recorded"
    return f"{statistics.median(ratios):.2f} ({len(ratios)})"


def table(costs: dict[str, dict[str, tuple[float, int]]], startup: dict) -> list[str]:
    full = costs.get("ncu.set.full", {})
    lines = [
        "| group | problems | median s | max s | median passes | median / full (problems) |",
        "|---|---|---|---|---|---|",
    ]
    for name in GROUPS:
        rows = costs.get(name)
        if not rows:
            lines.append(f"| {name} | 0 | not recorded | | | |")
            continue
        seconds = [s for s, _ in rows.values()]
        lines.append(
            f"| {name} | {len(rows)} | {statistics.median(seconds):.2f} | {max(seconds):.2f} | "
            f"{statistics.median(p for _, p in rows.values()):.0f} | {ratio_to_full(rows, full)} |"
        )
    lines.append("")
    for profiler, entry in sorted(startup.items()):
        samples = entry.get("samples", [])
        lines.append(
            f"- start-up of one `{profiler}` process: median {entry['startup_s']:.2f} s "
            f"over {len(samples)} runs (min {min(samples, default=0):.2f}, "
            f"max {max(samples, default=0):.2f})"
        )
    return lines


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="+", type=Path)
    parser.add_argument("--device", default="H200")
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args()
    blocks = []
    for path in args.recordings:
        store = Store(":memory:")
        count = import_recordings(path, store)
        costs = group_costs(store, args.device)
        problems = len({h for h, d, _, _ in store.iter_profile_records() if d == args.device})
        blocks += [f"### `{path}` ({count} records, {problems} problems)", ""]
        blocks += table(costs, store.get("profile_startup", args.device) or {})
        blocks.append("")
    text = "\n".join(blocks)
    if args.markdown:
        args.markdown.write_text(text, encoding="utf-8")
    print(text)


if __name__ == "__main__":
    main()
