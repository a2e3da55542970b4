"""Merge evaluations exports into one: the newest verdict of each (problem, candidate, device,
configuration) wins, later files counting as newer than earlier ones.

A sweep spread over several GPUs or device slots leaves an export per process
(``rule_sweep.py``/``llm_sweep.py --export``); the results pages replay one file.

    python benchmarks/merge_evaluations.py docs/results/data/llm_evaluations.jsonl.gz \\
        OUT/llm-0.jsonl.gz OUT/llm-1.jsonl.gz --out docs/results/data/llm_evaluations.jsonl.gz
"""

from __future__ import annotations

import argparse
import logging
import tempfile
from pathlib import Path

from _common import run_main

from autoprofiler.evaluate import EvaluationsFileError, export_evaluations, import_evaluations
from autoprofiler.store import Store

log = logging.getLogger("merge_evaluations")


def merge(exports: list[Path], out: Path) -> int:
    """Write the newest verdicts of ``exports`` (oldest file first) to ``out``; how many."""
    with tempfile.TemporaryDirectory() as scratch, Store(Path(scratch) / "merge.sqlite") as store:
        for path in exports:
            import_evaluations(path, store)
        return export_evaluations(store, out, latest_only=True)


def main(argv: list[str] | None = None) -> int:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("exports", type=Path, nargs="+", help="exports, the oldest first")
    parser.add_argument("--out", type=Path, required=True, help="the merged export to write")
    args = parser.parse_args(argv)
    try:
        written = merge(args.exports, args.out)
    except EvaluationsFileError as exc:
        log.error("%s", exc)
        return 2
    log.info("%d evaluations from %d files into %s", written, len(args.exports), args.out)
    return 0


if __name__ == "__main__":
    run_main(main, log)
