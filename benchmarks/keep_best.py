"""``optimize --keep best`` on recorded verdicts: the LLM's kernel, the rule rewriter's,
torch.compile and the reference, per profile configuration, and which one is kept.

Runs ``autoprofiler optimize`` (the installed CLI, a process per run) with the LLM rewriter
replaying the recorded replies (``recorded:anthropic:claude``) and every evaluation replayed
from the committed exports (the LLM sweep's and the rule sweep's), for each configuration over
the problems the LLM table covers (``benchmarks/llm_table.py``: every configuration judged).
Each problem is replayed with the recordings its requests were exported with (the first
file alone, or both: a prompt's cost line depends on them), so every recorded reply is found.
Writes the table between ``<!-- keep_table:start -->`` and ``<!-- keep_table:end -->``.

    python benchmarks/keep_best.py KernelBench/problems.jsonl \\
        --markdown docs/results/llm_rewriter.md

Two tables: the LLM's flagged kernels counted as 1.0x (the default), then counted.
"""

from __future__ import annotations

import argparse
import gzip
import json
import subprocess
import sys
import tempfile
from collections import Counter
from pathlib import Path

from _common import add_evaluated_device, card_name, geomean, replace_block
from llm_sweep import CONFIGS, MODEL_ID
from llm_table import read_rows

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "results" / "data"
FIRST = DATA / "kernelbench_h200.jsonl.gz"
MORE = DATA / "kernelbench_h200_more.jsonl.gz"
EVALUATIONS = (DATA / "llm_evaluations.jsonl.gz", DATA / "kernelbench_h200_evaluations.jsonl.gz")
LABELS = ("llm", "rules", "compile", "reference")


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("problems", help="KernelBench problems (a checkout or JSONL)")
    parser.add_argument("--rows", type=Path, default=DATA / "llm_sweep_rows.jsonl.gz")
    parser.add_argument("--markdown", type=Path, required=True)
    add_evaluated_device(parser)
    return parser.parse_args(argv)


def covered(rows: dict[str, dict]) -> dict[str, str]:
    """The problems with every configuration judged, ``{key: level/id}``."""
    seen: dict[str, set[str]] = {}
    for row in rows.values():
        seen.setdefault(row["problem"], set()).add(row["configuration"])
    return {key: key.split("_")[0] for key, configs in seen.items() if configs >= set(CONFIGS)}


def _groups(problems: dict[str, str], more: set[str]) -> list[tuple[list[Path], int, list[int]]]:
    """(recordings, level, ids) per optimize run: by the recordings each problem's requests
    were exported with, and by level."""
    runs = []
    for recordings, keys in (([FIRST, MORE], [k for k in problems if k in more]),
                             ([FIRST], [k for k in problems if k not in more])):  # fmt: skip
        for level in (1, 2):
            ids = sorted(int(problems[k].split("/")[1]) for k in keys if k.startswith(f"L{level}/"))
            if ids:
                runs.append((recordings, level, ids))
    return runs


def _more_problems() -> set[str]:
    """Keys of the problems the second recordings file holds."""
    keys = set()
    with gzip.open(MORE, "rt", encoding="utf-8") as handle:
        for line in handle:
            row = json.loads(line)
            if "problem" in row:
                keys.add(f"L{row['problem']['level']}/{row['problem']['name']}")
    return keys


def optimize(
    args: argparse.Namespace, config: str, run: tuple, folder: Path, count_flagged: bool
) -> list[dict]:
    recordings, level, ids = run
    out = folder / f"{config}-L{level}-{len(recordings)}-{int(count_flagged)}.json"
    command = [
        sys.executable, "-m", "autoprofiler", "optimize", args.problems, "--replay",
        "--rewriter", "llm", "--llm", f"recorded:{MODEL_ID}", "--tree", config,
        "--device", "cuda", "--profile-device", "H200", "--levels", str(level),
        "--evaluated-device", args.evaluated_device,
        "--ids", ",".join(map(str, ids)), "--store", str(folder / f"{out.stem}.sqlite"),
        "--candidates-dir", str(folder / out.stem), "--json", "-q", "-o", str(out),
        *(["--count-flagged"] if count_flagged else []),
    ]  # fmt: skip
    for path in recordings:
        command += ["--recordings", str(path)]
    for path in EVALUATIONS:
        command += ["--evaluations", str(path)]
    subprocess.run(command, check=True, stdout=subprocess.DEVNULL)
    return json.loads(out.read_text(encoding="utf-8"))


def _picked_compile(contender: dict | None) -> bool:
    """Whether the rule rewriter's contender is torch.compile itself (its pick without a
    profile): ``optimize`` then judges that source once, under the rule rewriter's name."""
    return contender is not None and contender.get("transformation") == "compile"


def table(results: dict[str, list[dict]], count_flagged: bool, judged_on: str) -> str:
    head = (
        "| configuration | problems | LLM alone | rule rewriter alone | torch.compile alone "
        "| kept (best of four) | kept, by whom | kept slower than torch.compile |"
    )
    lines = [head, "|---|---|---|---|---|---|---|---|"]
    for config, rows in results.items():
        alone: dict[str, list[float]] = {label: [] for label in LABELS}
        kept, by, slower = [], Counter(), 0
        for row in rows:
            contenders = {c["by"]: c for c in row["kept"]["contenders"]}
            if "compile" not in contenders and _picked_compile(contenders.get("rules")):
                contenders["compile"] = contenders["rules"]  # the same source, judged once
            for label in LABELS[:3]:
                alone[label].append((contenders.get(label) or {}).get("counted") or 1.0)
            kept.append(row["kept"]["speedup"])
            by[row["kept"]["by"]] += 1
            slower += row["kept"]["speedup"] < alone["compile"][-1]
        who = ", ".join(f"{label} {by[label]}" for label in LABELS if by[label])
        lines.append(
            f"| {config} | {len(rows)} | {geomean(alone['llm']):.3f} | "
            f"{geomean(alone['rules']):.3f} | {geomean(alone['compile']):.3f} | "
            f"{geomean(kept):.3f} | {who} | {slower} |"
        )
    flagged = "counted" if count_flagged else "counted as 1.0x (without `--count-flagged`)"
    lines += [
        "",
        f"Geomean speedups over eager on the {card_name(judged_on)} (replayed); a failure "
        "counts 1.0x; the LLM's "
        f"flagged kernels are {flagged}; the rule rewriter's and torch.compile's count at "
        "their speedups (autoprofiler wrote them: their flags, `calls_reference` for "
        "torch.compile, are no suspicion). A contender with no recorded verdict (the rule "
        "rewriter's max-autotune pick where the sweep left it out) counts 1.0x.",
    ]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    problems = covered(read_rows(args.rows))
    runs = _groups(problems, _more_problems())
    tables = []
    with tempfile.TemporaryDirectory() as scratch:
        for count_flagged in (False, True):
            results = {
                config: [
                    row
                    for run in runs
                    for row in optimize(args, config, run, Path(scratch), count_flagged)
                ]
                for config in CONFIGS
            }
            tables.append(table(results, count_flagged, args.evaluated_device))
    return 0 if replace_block(args.markdown, "keep_table", "\n\n".join(tables)) else 2


if __name__ == "__main__":
    sys.exit(main())
