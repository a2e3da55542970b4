"""Learning runs on recorded GPU data, and ``docs/results/learning.md`` from them.

Runs ``autoprofiler learn`` once per start tree on the recorded profiles and evaluations (no
GPU: everything is replayed), then writes, per study: the learning curve (every trial's
training score and the best so far), wall time and cache hit rate as the command reported them,
and the learned tree beside every fixed configuration under the same budget, scored on the
training and the held-out validation problems.

    python benchmarks/learning_table.py --recordings docs/results/data/kernelbench_h200.jsonl.gz \\
        --evaluations docs/results/data/kernelbench_h200_evaluations.jsonl.gz \\
        --starts none SpeedOfLight --budget 30 --rewriter rules --markdown docs/results/learning.md
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path

from _common import FIRST_JUDGED_ON, add_evaluated_device, card_name

from autoprofiler.evaluate import EvalConfig
from autoprofiler.learn.objective import Objective, TreeScore
from autoprofiler.learn.scoring import TreeScorer
from autoprofiler.learn.split import split_problems
from autoprofiler.learn.study import StudyStorage, Trial
from autoprofiler.profile import RecordedProfiler
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.rules import RuleRewriter
from autoprofiler.store import Store
from autoprofiler.tree import FIXED_GROUPS, export_text, fixed_tree, load_tree


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", required=True)
    parser.add_argument("--evaluations", required=True)
    parser.add_argument("--starts", nargs="+", default=["none"])
    parser.add_argument("--budget", type=float, default=30.0)
    parser.add_argument("--train", default="0.67")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument(
        "--rewriter",
        default="rules",
        help="rules, or rules-without-A-B (the rule rewriter with transformations left out)",
    )
    parser.add_argument("--work", type=Path, default=Path("runs/learning"))
    parser.add_argument("--markdown", type=Path, required=True)
    add_evaluated_device(parser)
    return parser.parse_args(argv)


def _learn(args: argparse.Namespace, start: str, store: Path) -> tuple[str, float, str]:
    """Run one study; its name, wall seconds and the command's summary (last lines)."""
    exe = shutil.which("autoprofiler")
    if exe is None:
        raise SystemExit("the autoprofiler command is not installed (pip install -e .)")
    name = f"h200-from-{start}"
    command = [
        exe, "learn", "--store", str(store), "--study", name,
        "--recordings", args.recordings, "--evaluations", args.evaluations,
        "--train", args.train, "--seed", str(args.seed), "--budget", f"{args.budget:g}",
        "--rewriter", args.rewriter, "--proposer", "search",
        "--iterations", str(args.iterations), "--patience", "10", "--device", "cuda",
        "--start", start, "-o", str(args.work / f"{name}.json"),
        "--evaluated-device", args.evaluated_device,
    ]  # fmt: skip
    began = time.monotonic()
    done = subprocess.run(command, capture_output=True, text=True, check=False)
    wall = time.monotonic() - began
    if done.returncode != 0:
        raise SystemExit(f"learn failed: {done.stdout[-400:]}{done.stderr[-400:]}")
    summary = [line for line in done.stdout.splitlines() if "cache hit rate" in line]
    return name, wall, summary[-1] if summary else ""


def _edit_text(trial: Trial) -> str:
    if trial.edit is None:
        return "(unreadable)"
    return json.dumps(trial.edit, separators=(",", ":"))[:90].replace("|", "\\|")


def _curve(trials: list[Trial], start_value: float) -> list[str]:
    lines = [
        "| trial | edit | train score | fast_1 | cost s | verdict | best so far |",
        "|---|---|---|---|---|---|---|",
    ]
    best = start_value
    for trial in trials:
        score = trial.score
        if trial.accepted and score is not None:
            best = score.value
        cells = ("", "", "") if score is None else (
            f"{score.value:.4f}", f"{score.fast_1:.0%}", f"{score.mean_cost_s:.1f}"
        )  # fmt: skip
        lines.append(
            f"| {trial.number} | `{_edit_text(trial)}` | {cells[0]} | {cells[1]} | {cells[2]} | "
            f"{trial.state.value}: {trial.reason[:70]} | {best:.4f} |"
        )
    return lines


def _row(name: str, train: TreeScore, validation: TreeScore) -> str:
    return (
        f"| {name} | {train.value:.3f}x | {train.fast_1:.0%} | {train.mean_cost_s:.1f} | "
        f"{validation.value:.3f}x | {validation.fast_1:.0%} | {validation.correct_rate:.0%} | "
        f"{validation.mean_cost_s:.1f} |"
    )


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    rewriter = _rule_rewriter(args.rewriter)  # a bad name stops here, before any study
    args.work.mkdir(parents=True, exist_ok=True)
    store_path = args.work / "learn.sqlite"
    store_path.unlink(missing_ok=True)
    runs = [_learn(args, start, store_path) for start in args.starts]
    with Store(store_path) as store:
        profiler = RecordedProfiler(store, "H200")
        hashes = dict.fromkeys(h for h, d, _, _ in store.iter_profile_records() if d == "H200")
        problems = [p for h in hashes if (p := store.get_problem(h)) is not None]
        train, validation = split_problems(problems, float(args.train), args.seed)
        config = EvalConfig(device="cuda", replay_device=args.evaluated_device)
        atol, rtol = config.tolerance_for("float32")
        scorer = TreeScorer(
            profiler,
            rewriter,
            store,
            budget_s=args.budget,
            objective=Objective(),
            eval_config=config,
            context=RewriteContext(device="cuda", device_name="H200", atol=atol, rtol=rtol),
        )
        storage = StudyStorage(store)
        lines = _header(args, rewriter, len(train), len(validation))
        for name, wall, summary in runs:
            trials = storage.trials(name)
            start_tree = fixed_tree(name.removeprefix("h200-from-"))
            start_value = scorer.score(start_tree, train).value
            learned = load_tree(args.work / f"{name}.json")
            lines += [
                f"## Study `{name}`",
                "",
                f"{len(trials)} trials, {sum(t.accepted for t in trials)} accepted, "
                f"{wall:.1f} s wall for the whole command (import included). The command's "
                f"summary: `{summary}`",
                "",
                f"Start tree: `{name.removeprefix('h200-from-')}` (train score "
                f"{start_value:.4f}). Learned tree:",
                "",
                "```",
                export_text(learned),
                "```",
                "",
                "Learning curve (every trial in order; *best so far* is the objective of the",
                "tree kept after it):",
                "",
                *_curve(trials, start_value),
                "",
            ]
        lines += [
            f"## Learned trees beside the fixed configurations (budget {args.budget:g} s)",
            "",
            "Every tree through the same replayed profiler, rewriter and recorded evaluations;",
            "a fixed configuration's groups that do not fit the budget are skipped, as on the",
            "GPU. *score*: geomean speedup over eager, failures counted 1.0x.",
            "",
            "| tree | train score | train fast_1 | train prof s | validation score | "
            "validation fast_1 | validation correct | validation prof s |",
            "|---|---|---|---|---|---|---|---|",
        ]
        for fixed in FIXED_GROUPS:
            tree = fixed_tree(fixed)
            lines.append(_row(fixed, scorer.score(tree, train), scorer.score(tree, validation)))
        for name, _, _ in runs:
            tree = load_tree(args.work / f"{name}.json")
            lines.append(
                _row(f"learned ({name})", scorer.score(tree, train), scorer.score(tree, validation))
            )
        lines += ["", *_unrecorded(profiler, problems)]
    args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return 0


def _unrecorded(profiler: RecordedProfiler, problems: list) -> list[str]:
    """Notes on the fixed configurations whose groups some problems have no recording of (the
    replayed profile then holds less than the configuration's name says)."""
    notes = []
    for fixed, groups in FIXED_GROUPS.items():
        lacking = sum(
            1 for p in problems if not set(groups) <= set(profiler.records(p.content_hash))
        )
        if lacking:
            notes.append(f"- `{fixed}`: not recorded for {lacking} of {len(problems)} problems.")
    if not notes:
        return []
    return [
        "Groups missing from the recordings (those problems got nothing from them):",
        "",
        *notes,
    ]


def _rule_rewriter(name: str) -> RuleRewriter:
    try:
        return RuleRewriter.from_name(name)
    except ValueError:
        raise SystemExit(f"--rewriter must be rules or rules-without-NAME, not {name!r}") from None
    except KeyError as exc:
        raise SystemExit(f"--rewriter {name}: {exc.args[0]}") from None


def _rewriter_text(rewriter: RuleRewriter) -> str:
    if not rewriter.exclude:
        return "the rule rewriter"
    return "the rule rewriter without " + ", ".join(f"`{n}`" for n in sorted(rewriter.exclude))


def _header(
    args: argparse.Namespace, rewriter: RuleRewriter, train: int, validation: int
) -> list[str]:
    card, first = card_name(args.evaluated_device), args.evaluated_device == FIRST_JUDGED_ON
    device = "" if first else f" --evaluated-device '{args.evaluated_device}'"
    data = "H200 data" if first else f"H200 profiles, verdicts judged on the {card}"
    return [
        f"# Learning the profiling tree on recorded {data}",
        "",
        "Made on a CPU (no GPU: profiles replayed from the H200 recordings, evaluations from",
        f"the verdicts recorded on the {card}) with",
        "",
        "```",
        f"python benchmarks/learning_table.py --recordings {args.recordings} \\",
        f"    --evaluations {args.evaluations} \\",
        f"    --starts {' '.join(args.starts)} --budget {args.budget:g} --train {args.train} "
        f"--rewriter {args.rewriter} --markdown {args.markdown}{device}",
        "```",
        "",
        "which runs, per start tree, `autoprofiler learn --recordings ... --evaluations ... "
        f"--train {args.train} --seed {args.seed} --budget {args.budget:g} --rewriter "
        f"{args.rewriter} --proposer search --iterations {args.iterations} "
        f"--patience 10 --device cuda --start START --evaluated-device '{args.evaluated_device}'`.",
        "",
        f"Problems: the 64 KernelBench problems (levels 1 and 2) of "
        f"`docs/results/data/kernelbench_h200.jsonl.gz`; {train} training and {validation} "
        f"validation problems (seeded split). Rewriter: {_rewriter_text(rewriter)}, "
        f"every candidate it can write evaluated on the {card} (`rewriter.md`). Objective: "
        "geomean speedup over eager, failures counted 1.0x; the validation set never decides "
        "anything.",
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())
