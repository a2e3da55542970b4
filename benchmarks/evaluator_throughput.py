"""Evaluator throughput: candidates per minute and harness seconds beyond the timed trials.

Runs one list of candidates through ``autoprofiler.execute.evaluate_many`` one after another
(one GPU, as ``eval`` and ``bench`` run them; where the package has a build lane, extensions
build meanwhile), with the package found under ``--package`` (default: this checkout), so
that two evaluators (say, the previous commit's, exported with ``git archive``) run the same
candidates in one device session. Candidates: the H200 export's own (``torch.compile``
wrappers, generated Triton kernels, CUDA graphs; chosen by
``kernelbench_crosscheck.select_pairs``, no results looked at, max-autotune left out), for the
first problems one that raises and one with wrong values, and with ``--kernelbench CHECKOUT``
KernelBench's own ``load_inline`` examples. Rows go to a JSONL file as they finish.

    python benchmarks/evaluator_throughput.py --label new --out rows.jsonl --candidates 40
    python benchmarks/evaluator_throughput.py --label old --package OLD_DIR --out rows.jsonl
    python benchmarks/evaluator_throughput.py --report rows.jsonl --markdown OUT.md

With ``--problems PATH`` the candidates are those problems' references renamed ``ModelNew``
instead (no export, no build), and ``--device cpu`` runs them on this machine's CPU: two
packages compared where no GPU is lent.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
# the candidates: the rule rewriter's recorded ones (found from any working folder)
EXPORT = ROOT / "docs" / "results" / "data" / "kernelbench_h200_evaluations.jsonl.gz"
RAISES = """
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
    def forward(self, *inputs):
        raise RuntimeError("this candidate always fails")
"""
WRONG = """
import torch
import torch.nn as nn
class ModelNew(nn.Module):
    def __init__(self, *args):
        super().__init__()
        self.reference = Model(*args)
    def forward(self, *inputs):
        # doubled, not only shifted: L1/4's outputs (about 2.6e5) take a shift of 1.0 within
        # tolerance (docs/results/evaluator_throughput.md, session 34)
        return self.reference(*inputs) * 2.0 + 1.0
"""
FAILING_PROBLEMS = 4
EXTENSION_EXAMPLES = [
    ("model_ex_1.py", "model_new_ex_1.py"),
    ("model_ex_add.py", "model_new_ex_add.py"),
    *((f"few_shot/model_ex_{n}.py", f"few_shot/model_new_ex_{n}.py")
      for n in ("add", "flash_attn", "fuse_gelu", "mnist2", "tiled_matmul")),
]  # fmt: skip


def candidates(count: int) -> list[tuple[str, str, str, str]]:
    """(problem name, problem source, candidate kind, candidate source), deterministic."""
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from kernelbench_crosscheck import read_export, select_pairs

    export = read_export(EXPORT)
    # max-autotune candidates autotune for minutes: they measure Inductor, not the evaluator.
    pairs = [
        p
        for p in select_pairs(export, 10 * count, per_problem=3)
        if p.transformation != "compile_max_autotune"
    ][: count - 2 * FAILING_PROBLEMS]
    chosen = [
        (p.key, export.problems[p.problem_hash]["source"], p.kind,
         export.candidates[p.candidate_hash]["source"])
        for p in pairs
    ]  # fmt: skip
    seen: dict[str, str] = {}
    for name, problem_source, _, _ in chosen:
        if len(seen) < FAILING_PROBLEMS:
            seen.setdefault(name, problem_source)
    for name, source in seen.items():
        chosen.append((name, source, "raises", RAISES))
        chosen.append((name, source, "wrong", source + WRONG))
    return chosen


def kernelbench_extensions(checkout: Path | None) -> list[tuple[str, str, str, str]]:
    """KernelBench's own ``load_inline`` examples (reference, candidate), read from the
    checkout given: CUDA C++ candidates whose build dominates their evaluation."""
    if checkout is None:
        return []
    prompts = checkout / "kernelbench" / "prompts"
    if not prompts.is_dir():
        prompts = checkout / "src" / "kernelbench" / "prompts"
    chosen = []
    for reference, candidate in EXTENSION_EXAMPLES:
        ref, cand = prompts / reference, prompts / candidate
        if ref.is_file() and cand.is_file():
            name = f"kernelbench/{cand.stem}"
            chosen.append((name, ref.read_text(), "load_inline", cand.read_text()))
    return chosen


def measure(args: argparse.Namespace) -> int:
    package = Path(args.package) if args.package else ROOT
    sys.path.insert(0, str(package.resolve()))
    import autoprofiler
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.execute import evaluate_many
    from autoprofiler.problem import Problem

    config = EvalConfig(device=args.device)
    out = Path(args.out)
    if args.problems:
        chosen = references_as_candidates(args.problems, args.candidates)
    else:
        chosen = all_candidates(args.candidates, args.kernelbench)
    if args.kinds:
        chosen = [entry for entry in chosen if entry[2] in args.kinds]
    pairs = [
        (Problem(name=f"p{index}", source=problem_source, origin="<export>"), source)
        for index, (_, problem_source, _, source) in enumerate(chosen)
    ]
    store = None
    if args.references_first:
        store, seconds = references_timed_first([p for p, _ in pairs], config)
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps({"label": args.label, "references_first_s": seconds}) + "\n")
        print(f"{args.label}: references timed first in {seconds:.1f} s", flush=True)
    began = start = time.perf_counter()
    # One after another on one GPU, as `autoprofiler eval` and `bench` run them: where the
    # package has a build lane, the CUDA extensions of later candidates build meanwhile.
    results = evaluate_many(pairs, config, store=store, use_cache=False)
    for done, evaluated in enumerate(results, start=1):
        index = int(evaluated.problem.name.removeprefix("p"))  # results pair by name
        name, _, kind, _ = chosen[index]
        result = evaluated.result
        wall, start = time.perf_counter() - start, time.perf_counter()
        timed = 0.0
        if result.candidate is not None:
            timed = result.candidate.trials * result.candidate.mean_ms / 1e3
        row = {
            "label": args.label,
            "package": str(Path(autoprofiler.__file__).parent),
            "index": index,
            "problem": name,
            "kind": kind,
            "correct": result.correct,
            "failure": result.failure_kind.value if result.failure_kind else None,
            "wall_s": wall,
            "candidate_trials_s": timed,
            "speedup": result.speedup,
            "evaluate_s": result.wall_s,
            "stages_s": getattr(result, "stages_s", None),  # packages before stages: None
            "triton_compiles": getattr(result, "triton_compiles", None),  # v7 on
        }
        with out.open("a", encoding="utf-8") as handle:
            handle.write(json.dumps(row) + "\n")
        print(
            f"{args.label} {index} {kind}: {row['failure'] or 'correct'} {wall:.2f} s", flush=True
        )
        if args.deadline_s and time.perf_counter() - began > args.deadline_s:
            print(f"deadline reached after {done} candidates", flush=True)  # none more starts
            break
    results.close()
    return 0


def references_timed_first(problems: list, config: Any) -> tuple[Any, float]:
    """Time each distinct problem's reference (and torch.compile baseline) as ``evaluate``
    does before its first candidate, into a store of its own, so that the candidates' walls
    that follow hold no reference timing: (the store, the seconds it took)."""
    from autoprofiler.evaluate import runner
    from autoprofiler.store import Store

    began = time.perf_counter()
    store = Store(Path(tempfile.mkdtemp(prefix="throughput-store-")) / "store.sqlite")
    for problem in {p.content_hash: p for p in problems}.values():
        # the runner's own calls (the compared packages share them), not a public interface
        reference = runner.REFERENCES.get(
            problem, config, runner._reference_env(config), runner.default_work_root()
        )
        runner.reference_timings(reference, problem, config, store)
    return store, time.perf_counter() - began


def all_candidates(count: int, kernelbench: Path | None) -> list[tuple[str, str, str, str]]:
    """The export's candidates, then KernelBench's extension examples (when a checkout is
    given), in a fixed order, each (reference, candidate) pair once: the evaluator judges a
    pair once however often it is asked (KernelBench's ``model_ex_1`` pair is its
    ``model_ex_add`` one)."""
    chosen, seen = [], set()
    for entry in candidates(count) + kernelbench_extensions(kernelbench):
        if (entry[1], entry[3]) not in seen:
            seen.add((entry[1], entry[3]))
            chosen.append(entry)
    return chosen


def references_as_candidates(problems: Path, count: int) -> list[tuple[str, str, str, str]]:
    """``count`` candidates that need no build, for a run without the export (on a CPU, say):
    each problem of ``problems`` in turn with its reference renamed ``ModelNew`` (kind
    ``other``), each copy's source made distinct by a comment (nothing shared between them
    but the problem's reference timing)."""
    from autoprofiler.evaluate.baselines import reference_as_candidate
    from autoprofiler.problem import ProblemError, load_problems

    try:
        loaded = load_problems(problems).problems
    except ProblemError as exc:
        raise SystemExit(f"evaluator_throughput: {exc}") from None
    if not loaded:
        raise SystemExit(f"evaluator_throughput: no problems in {problems}")
    chosen = []
    for index in range(count):
        problem = loaded[index % len(loaded)]
        source = reference_as_candidate(problem) + f"\n# copy {index}\n"
        chosen.append((problem.key, problem.source, "other", source))
    return chosen


def sweep_rows(rows_path: Path, label: str) -> list[dict]:
    """A sweep's rows (``rule_sweep.py``, ``llm_sweep.py``: one per verdict, in the order
    judged) as this benchmark's, so that the same tables describe a sweep's evaluations: the
    kind from the transformation (``llm_sweep``'s rows name theirs) or the reply."""
    rows = []
    for index, row in enumerate(read_rows(rows_path)):
        result = row.get("result")
        if not isinstance(result, dict):
            continue  # a candidate that could not be written: nothing was judged
        name = row.get("transformation") or row.get("kind") or "other"
        kind = next((k for k in ("load_inline", "triton", "compile") if k in name), "other")
        timed = result.get("candidate") or {}
        rows.append({
            "label": label, "index": index, "problem": row["problem"], "kind": kind,
            "correct": bool(result.get("correct")), "wall_s": row["wall_s"],
            "candidate_trials_s": (timed.get("trials") or 0) * (timed.get("mean_ms") or 0) / 1e3,
            "evaluate_s": result.get("wall_s", row["wall_s"]),
            "stages_s": result.get("stages_s") or None,
        })  # fmt: skip
    return rows


def read_rows(rows_path: Path) -> list[dict]:
    return [json.loads(line) for line in rows_path.read_text().splitlines() if line.strip()]


def report(source: Path | list[dict], markdown: Path | None) -> str:
    """The tables of a rows file (or of rows already read, such as ``sweep_rows``')."""
    rows = source if isinstance(source, list) else read_rows(source)
    first = {r["label"]: r["references_first_s"] for r in rows if "references_first_s" in r}
    rows = [r for r in rows if "index" in r]
    labels = sorted({r["label"] for r in rows})
    common = set.intersection(*({r["index"] for r in rows if r["label"] == lab} for lab in labels))
    lines = [
        "| evaluator | candidates | wall s | candidates/min | median s/candidate | "
        "median harness s beyond the candidate's timed trials | same candidates: wall s |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in labels:
        mine = [r for r in rows if r["label"] == label]
        wall = sum(r["wall_s"] for r in mine)
        shared = sum(r["wall_s"] for r in mine if r["index"] in common)
        lines.append(
            f"| {label} | {len(mine)} | {wall:.1f} | {60 * len(mine) / wall:.1f} | "
            f"{statistics.median(r['wall_s'] for r in mine):.2f} | "
            f"{statistics.median(r['wall_s'] - r['candidate_trials_s'] for r in mine):.2f} | "
            f"{shared:.1f} ({len(common)}) |"
        )
    if first:
        timed = ", ".join(f"{label} {seconds:.1f} s" for label, seconds in sorted(first.items()))
        lines += ["", f"References timed before the candidates (not in the walls): {timed}."]
    names = {r["index"]: r["problem"] for r in rows if r.get("problem")}
    for index, (name, _, _, _) in enumerate(candidates(max(r["index"] for r in rows) + 1)):
        names.setdefault(index, name)  # rows of an earlier version name no problem
    lines += ["", "| # | problem | kind | " + " | ".join(f"{lab} s" for lab in labels) + " |"]
    lines += ["|---|---|---|" + "---|" * len(labels)]
    by_label = {(r["label"], r["index"]): r for r in rows}
    for index in sorted(common):
        kind = by_label[(labels[0], index)]["kind"]
        walls = " | ".join(f"{by_label[(lab, index)]['wall_s']:.1f}" for lab in labels)
        lines.append(f"| {index} | {names[index]} | {kind} | {walls} |")
    lines += [
        "",
        "| evaluator | kind | n | correct | median wall s | candidates/min over their walls | "
        "median harness s beyond the candidate's timed trials |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in labels:
        for kind in sorted({r["kind"] for r in rows}):
            mine = [r for r in rows if r["label"] == label and r["kind"] == kind]
            if mine:
                wall = sum(r["wall_s"] for r in mine)
                beyond = statistics.median(r["wall_s"] - r["candidate_trials_s"] for r in mine)
                lines.append(
                    f"| {label} | {kind} | {len(mine)} | {sum(r['correct'] for r in mine)} | "
                    f"{statistics.median(r['wall_s'] for r in mine):.2f} | "
                    f"{60 * len(mine) / wall:.1f} | {beyond:.2f} |"
                )
    lines += stage_table(rows)
    lines += overhead_table(rows)
    text = "\n".join(lines) + "\n"
    if markdown is not None:
        markdown.write_text(text, encoding="utf-8")
    return text


NO_BUILD = ("other", "raises", "wrong")  # kinds with nothing for the build lane to build


def overhead_table(rows: list[dict]) -> list[str]:
    """The harness seconds beyond the timed trials with each problem's reference timing set
    apart (rows that have stages): the reference is timed once per problem and device, and
    stored, so a candidate's own overhead is its wall beyond its trials less that stage."""
    staged = [r for r in rows if r.get("stages_s")]
    if not staged:
        return []
    lines = [
        "",
        "| evaluator | candidates | n | median harness s beyond the timed trials | "
        "the same, the problem's one-time reference timing aside | problems | "
        "median reference timing s per problem |",
        "|---|---|---|---|---|---|---|",
    ]
    for label in sorted({r["label"] for r in staged}):
        mine = [r for r in staged if r["label"] == label]
        by_problem: dict[str, float] = {}
        for r in mine:  # the first candidate of a problem waits for its reference timing
            by_problem[r["problem"]] = by_problem.get(r["problem"], 0.0) + _stage(r, "reference")
        per_problem = statistics.median(by_problem.values())
        for group, kinds in (("no build", NO_BUILD), ("all", None)):
            chosen = [r for r in mine if kinds is None or r["kind"] in kinds]
            if not chosen:
                continue
            beyond = [r["wall_s"] - r["candidate_trials_s"] for r in chosen]
            aside = [b - _stage(r, "reference") for b, r in zip(beyond, chosen, strict=True)]
            lines.append(
                f"| {label} | {group} | {len(chosen)} | {statistics.median(beyond):.2f} | "
                f"{statistics.median(aside):.2f} | {len(by_problem)} | {per_problem:.2f} |"
            )
    return lines


def stage_table(rows: list[dict]) -> list[str]:
    """Median seconds per stage of an evaluation (``EvalResult.stages_s``), by evaluator and
    kind, for rows that have them: *outside* is the benchmark's wall beyond ``evaluate``'s
    (waiting for a build run), *other* ``evaluate``'s wall beyond its stages."""
    staged = [r for r in rows if r.get("stages_s")]
    if not staged:
        return []
    names = list(dict.fromkeys(name for r in staged for name in r["stages_s"]))
    columns = ["outside", *names, "other"]
    lines = [
        "",
        "| evaluator | kind | n | " + " | ".join(columns) + " |",
        "|---|---|---|" + "---|" * len(columns),
    ]
    for label in sorted({r["label"] for r in staged}):
        for kind in sorted({r["kind"] for r in staged}):
            mine = [r for r in staged if r["label"] == label and r["kind"] == kind]
            if not mine:
                continue
            cells = []
            for column in columns:
                values = [_stage(r, column) for r in mine]
                cells.append(f"{statistics.median(values):.2f}")
            lines.append(f"| {label} | {kind} | {len(mine)} | " + " | ".join(cells) + " |")
    return lines


def _stage(row: dict, column: str) -> float:
    if column == "outside":
        return row["wall_s"] - row["evaluate_s"]
    if column == "other":
        return row["evaluate_s"] - sum(row["stages_s"].values())
    return row["stages_s"].get(column, 0.0)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--label", default="new")
    parser.add_argument("--package", help="folder holding the autoprofiler package to measure")
    parser.add_argument("--candidates", type=int, default=40)
    parser.add_argument(
        "--problems", type=Path,
        help="problems (JSONL or folder) whose references, renamed ModelNew, are the candidates "
        "(instead of the export's)",
    )  # fmt: skip
    parser.add_argument("--device", default="cuda", help="cuda (default) or cpu")
    parser.add_argument(
        "--kernelbench", type=Path, help="KernelBench checkout: add its load_inline examples"
    )
    parser.add_argument(
        "--kinds", nargs="+", help="only candidates of these kinds (compile, triton, load_inline, "
        "other, raises, wrong)",
    )  # fmt: skip
    parser.add_argument(
        "--references-first", action="store_true",
        help="time every problem's reference before the candidates (their walls then hold none)",
    )  # fmt: skip
    parser.add_argument("--out", default="throughput_rows.jsonl")
    parser.add_argument("--deadline-s", type=float, default=0.0)
    parser.add_argument("--report", type=Path, help="summarize a rows file instead")
    parser.add_argument(
        "--sweep", action="store_true",
        help="the --report file is a rule_sweep.py or llm_sweep.py rows file (--label names it)",
    )  # fmt: skip
    parser.add_argument("--markdown", type=Path)
    args = parser.parse_args(argv)
    if args.report:
        rows = sweep_rows(args.report, args.label) if args.sweep else args.report
        print(report(rows, args.markdown), end="")
        return 0
    return measure(args)


if __name__ == "__main__":
    sys.exit(main())
