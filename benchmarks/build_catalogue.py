"""Regenerate the catalogue's measured data from real recordings.

    python benchmarks/build_catalogue.py recordings.jsonl.gz [more.jsonl.gz ...] [--device H200]
    python benchmarks/build_catalogue.py --cupti-only CUPTI_RECORDINGS.jsonl.gz

writes ``autoprofiler/data/catalogue_costs.json`` (per group: median in-range seconds per
problem, median replay passes per kernel, how many problems; per profiler: median start-up)
and ``autoprofiler/data/ncu_section_metrics.json`` (per ncu group, keyed by
``catalogue.metrics_key``: the metric names its recordings hold; ``_always`` is kept).

``--csv KEY=PATH`` adds the metric columns of a raw ncu CSV (``ncu --csv --page raw``) under KEY
and ``--always PATH`` sets ``_always`` from a ``--metrics``-only CSV: that is how the first
lists were made from the probe captures (``.devdata/p/``):

    python benchmarks/build_catalogue.py --always .devdata/p/metrics_41_*.csv \\
        --csv SpeedOfLight=.devdata/p/sol_41_Gemm_BatchNorm_GELU_ReLU.csv \\
        --csv set.basic=.devdata/p/basic_23_Softmax.csv \\
        --csv set.detailed=.devdata/p/detailed_23_Softmax.csv \\
        --csv set.full=.devdata/p/full_41_Gemm_BatchNorm_GELU_ReLU.csv
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

import argparse
import csv
import io
import json
import logging
import statistics
import tempfile

from autoprofiler.profile import GROUPS, Profile, import_recordings
from autoprofiler.profile.catalogue import (
    ALWAYS_KEY,
    COSTS_FILE,
    SECTION_METRICS_FILE,
    metrics_key,
)
from autoprofiler.profile.ncu_report import PASSES_COLUMN
from autoprofiler.profile.recording import STARTUP_SPACE
from autoprofiler.store import Store

log = logging.getLogger("build_catalogue")
DATA = Path(__file__).resolve().parents[1] / "autoprofiler" / "data"
# Requested on purpose in the probe's --metrics run, so not columns every run reports.
_PROBE_METRICS = ("dram__bytes_read.", "sm__throughput.")


def csv_columns(path: Path) -> list[str]:
    """The metric columns of a raw ncu CSV (after the ``CC`` column)."""
    lines = path.read_text().splitlines()
    start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
    header = next(csv.reader(io.StringIO(lines[start])))
    return header[header.index("CC") + 1 :]


def _passes_per_kernel(profile: Profile) -> float | None:
    per_kernel = profile.value(PASSES_COLUMN)
    if per_kernel is not None:
        return per_kernel
    launches = sum(k.count for k in profile.kernels)
    return profile.replay_passes / launches if launches else None


def costs(store: Store, device: str | None) -> dict:
    """Median cost per group over the recorded problems, and median start-up per profiler;
    records made through CUPTI (``GroupCost.tool``) are summed up apart, as ``cupti_groups``."""
    seconds: dict[str, list[float]] = {}
    cupti: dict[str, list[float]] = {}
    passes: dict[str, list[float]] = {}
    devices: set[str] = set()
    for _, record_device, group, data in store.iter_profile_records():
        if device is not None and record_device != device:
            continue
        devices.add(record_device)
        profile = Profile.from_dict(data)
        cost = profile.group_costs.get(group)
        if cost is not None and cost.tool == "cupti":
            cupti.setdefault(group, []).append(cost.seconds)
            continue
        seconds.setdefault(group, []).append(cost.seconds if cost else profile.cost_s)
        per_kernel = _passes_per_kernel(profile)
        if per_kernel is not None:
            passes.setdefault(group, []).append(per_kernel)
    startup: dict[str, float] = {}
    for name in sorted(devices):
        for profiler, entry in (store.get(STARTUP_SPACE, name) or {}).items():
            startup[profiler] = entry["startup_s"]
    groups = {
        group: {
            "cost_s": round(statistics.median(values), 3),
            "replay_passes": round(statistics.median(passes.get(group, [0.0]))),
            "problems": len(values),
        }
        for group, values in sorted(seconds.items())
    }
    cupti_groups = {
        group: {"cost_s": round(statistics.median(values), 3), "problems": len(values)}
        for group, values in sorted(cupti.items())
    }
    table = {"device": ",".join(sorted(devices)), "startup_s": startup, "groups": groups}
    return table | ({"cupti_groups": cupti_groups} if cupti_groups else {})


def section_lists(store: Store, device: str | None, always: set[str]) -> dict[str, list[str]]:
    """Metric names per ncu group key, from the recordings (``_always`` names left out)."""
    seen: dict[str, set[str]] = {}
    for _, record_device, group, data in store.iter_profile_records():
        catalogued = GROUPS.get(group)
        if catalogued is None or catalogued.profiler != "ncu" or catalogued.metrics:
            continue
        if data.get("group_costs", {}).get(group, {}).get("tool") == "cupti":
            continue  # ncu's lists are ncu's
        if device is None or record_device == device:
            seen.setdefault(metrics_key(catalogued), set()).update(data.get("metrics", {}))
    return {key: sorted(names - always) for key, names in sorted(seen.items())}


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("recordings", nargs="*", help="recordings.jsonl.gz files")
    parser.add_argument("--device", help="only recordings of this device")
    parser.add_argument("--csv", action="append", default=[], help="KEY=PATH of a raw ncu CSV")
    parser.add_argument("--always", help="raw ncu CSV of a --metrics-only run")
    parser.add_argument(
        "--cupti-only", action="store_true",
        help="update only the CUPTI part (cupti_groups, CUPTI's start-up) from the recordings",
    )  # fmt: skip
    args = parser.parse_args(argv)
    if args.cupti_only:
        return _update_cupti(args.recordings, args.device)

    metrics_path = DATA / SECTION_METRICS_FILE
    lists = json.loads(metrics_path.read_text()) if metrics_path.exists() else {}
    if args.always:
        probe = csv_columns(Path(args.always))
        lists[ALWAYS_KEY] = sorted(c for c in probe if not c.startswith(_PROBE_METRICS))
    always = set(lists.get(ALWAYS_KEY, []))
    for item in args.csv:
        key, _, path = item.partition("=")
        lists[key] = sorted(set(csv_columns(Path(path))) - always)
    if args.recordings:
        with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "store.sqlite") as store:
            for path in args.recordings:
                log.info("%s: %d records", path, import_recordings(path, store))
            lists |= section_lists(store, args.device, always)
            table = costs(store, args.device)
        (DATA / COSTS_FILE).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
        log.info("wrote %s: %d groups", DATA / COSTS_FILE, len(table["groups"]))
    metrics_path.write_text(json.dumps(lists, indent=0, sort_keys=True) + "\n")
    log.info("wrote %s: %s", metrics_path, ", ".join(f"{k} {len(v)}" for k, v in lists.items()))
    return 0


def _update_cupti(recordings: list[str], device: str | None) -> int:
    with tempfile.TemporaryDirectory() as tmp, Store(Path(tmp) / "store.sqlite") as store:
        for path in recordings:
            log.info("%s: %d records", path, import_recordings(path, store))
        measured = costs(store, device)
    table = json.loads((DATA / COSTS_FILE).read_text())
    table["cupti_groups"] = measured.get("cupti_groups", {})
    for tool in ("cupti", "cupti_cold"):
        if tool in measured["startup_s"]:
            table["startup_s"][tool] = measured["startup_s"][tool]
    (DATA / COSTS_FILE).write_text(json.dumps(table, indent=1, sort_keys=True) + "\n")
    log.info("wrote %s: CUPTI costs of %d groups", DATA / COSTS_FILE, len(table["cupti_groups"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
