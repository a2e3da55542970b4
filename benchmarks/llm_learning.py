"""The paper's claim on the recorded LLM replies: learned trees against every fixed
configuration, on held-out problems, at three budgets and on three seeded splits.

Every problem's six recorded configurations were answered once by a frontier LLM and judged
on a GPU (``llm_sweep.py``; the H200 first, ``--evaluated-device`` picks whose verdicts are
replayed). A tree here shows the rewriter one of those configurations per kernel (``show:
leaf``): its condition nodes collect ``static`` or ``ncu.SpeedOfLight`` only to route, so any
path asks a request that has a recorded reply, and everything replays on a CPU: profiles,
replies and verdicts. A fixed configuration is the one-leaf tree of it
(taken whole, or, over the budget, nothing: the no-profile request). For each split (seeds
0-2, two thirds to train) and budget, local search (``--menu`` of the six, routing on static
and SpeedOfLight) learns a tree from the best fixed configuration on the training problems;
the learned tree, every fixed configuration and the per-kernel oracle are then scored on the
held-out problems. The difference between the learned tree and the configuration that was
best on the training problems (what a user would pick without the tree) gets a paired
bootstrap confidence interval over the held-out problems.

    python benchmarks/llm_learning.py --work runs/llm-learning \\
        --markdown docs/results/reproduction.md --rows docs/results/data/llm_learning.json

``--proposer llm`` learns one study (split 0, the middle budget) with the LLM proposer
answered in batches: a round with no reply writes its request to ``--requests-out`` and
stops; given ``--replies`` (plain JSONL, ``{custom_id, content, model}``), each round's reply
is imported as soon as that round asks for it, so the committed replies replay the whole
study in one run, and a new reply added to them takes it one round further.

Each problem is replayed with the recordings its requests were exported with (the first file
alone, or both: a prompt's cost line shows the store's start-up).
"""

from __future__ import annotations

import argparse
import gzip
import json
import logging
import math
import random
import statistics
from collections.abc import Sequence
from pathlib import Path

from _common import add_evaluated_device, geomean, log_progress, replace_block, run_main
from keep_best import FIRST, MORE, _more_problems
from llm_sweep import CONFIGS, MODEL_ID, _requested, rebuilt_requests, target_context
from llm_table import read_rows

from autoprofiler.bench.result import BenchResult
from autoprofiler.bench.runner import Bench
from autoprofiler.evaluate import EvalConfig, evaluated_devices, import_evaluations
from autoprofiler.learn import LearnConfig, LocalSearchProposer
from autoprofiler.learn.objective import Objective, TreeScore
from autoprofiler.learn.proposers import LLMProposer
from autoprofiler.learn.split import split_problems
from autoprofiler.llm import LLMConfig, make_client
from autoprofiler.llm.batch import export_requests, import_replies
from autoprofiler.problem import Problem
from autoprofiler.profile import RecordedProfiler, import_recordings
from autoprofiler.profile.base import MetricGroup, Profile, Profiler
from autoprofiler.rewrite.llm_rewriter import LLMRewriter
from autoprofiler.store import Store
from autoprofiler.tree import ProfilingTree, export_text, resolve_tree, tree_from_dict
from autoprofiler.tree.export import LEAF_NOTE

log = logging.getLogger("llm_learning")
ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "docs" / "results" / "data"
REQUESTS, REPLIES = DATA / "llm_requests.jsonl.gz", DATA / "llm_replies.jsonl.gz"
EVALUATIONS, ROWS = DATA / "llm_evaluations.jsonl.gz", DATA / "llm_sweep_rows.jsonl.gz"
DEVICE = "H200"
ROUTING = ("static", "ncu.SpeedOfLight")
SEEDS = (0, 1, 2)
TRAIN = 2 / 3
RESAMPLES = 10000


class ExportedRecordings(Profiler):
    """Each problem's recordings as its requests were exported: the first file alone, or
    both (a profile's cost line shows the store's median start-up)."""

    name = "recorded"

    def __init__(self, first: RecordedProfiler, both: RecordedProfiler, more: set[str]):
        self.first, self.both, self.more = first, both, more
        self.device = both.device

    def _for(self, problem_hash: str) -> RecordedProfiler:
        return self.both if problem_hash in self.more else self.first

    def records(self, problem_hash: str) -> dict[str, Profile]:
        return self._for(problem_hash).records(problem_hash)

    def startup_s(self, profiler: str) -> float:
        return self.both.startup_s(profiler)

    def estimated_startup_s(self) -> float:
        return self.both.estimated_startup_s()

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        return self._for(problem.content_hash).collect(problem, groups)

    def estimate_cost_s(self, problem: Problem, groups: Sequence[MetricGroup]) -> float:
        return self._for(problem.content_hash).estimate_cost_s(problem, groups)

    def shown(self, problem: Problem, groups: Sequence[MetricGroup], collected: Profile) -> Profile:
        return self._for(problem.content_hash).shown(problem, groups, collected)


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--work", type=Path, default=Path("runs/llm-learning"))
    parser.add_argument("--budgets", type=float, nargs=3, default=[5.0, 15.0, 60.0])
    parser.add_argument("--iterations", type=int, default=30)
    parser.add_argument("--patience", type=int, default=6)
    parser.add_argument("--markdown", type=Path, help="page with the llm_learning block")
    parser.add_argument("--rows", type=Path, help="JSON of every study's results")
    parser.add_argument("--bench-json", type=Path, help="the benches' results, for `report`")
    parser.add_argument("--proposer", choices=("search", "llm"), default="search")
    add_evaluated_device(parser)
    parser.add_argument("--requests-out", type=Path, help="--proposer llm: the waiting request")
    parser.add_argument(
        "--exclude", default="",
        help="comma-separated problem keys (L2/13_...) or their L<level>/<id> prefixes to leave "
        "out: the LLM-proposer study ran before L2/13 and L2/41 were judged",
    )  # fmt: skip
    parser.add_argument(
        "--replies", type=Path, nargs="*", default=[],
        help="--proposer llm: plain JSONL reply files; each reply is imported once its round "
        "asks for it",
    )  # fmt: skip
    return parser.parse_args(argv)


def fixed_trees() -> dict[str, ProfilingTree]:
    """The six configurations as one-leaf trees that show their leaf."""
    return {
        name: ProfilingTree(resolve_tree(name).root, f"fixed: {name}", show="leaf")
        for name in CONFIGS
    }


def judged_problems(problems: dict[str, Problem]) -> list[Problem]:
    """The problems every configuration of which has a verdict (the others would count
    unjudged replies as failures)."""
    seen: dict[str, set[str]] = {}
    for row in read_rows(ROWS).values():
        if row.get("result") is not None or row.get("failure"):
            seen.setdefault(row["problem_hash"], set()).add(row["configuration"])
    return sorted(
        (p for h, p in problems.items() if seen.get(h, set()) >= set(CONFIGS)),
        key=lambda p: p.key,
    )


def setup(
    store: Store, scratch: Path, evaluated_device: str
) -> tuple[ExportedRecordings, LLMRewriter, EvalConfig, list[Problem]]:
    """Recordings, replies and the verdicts made on ``evaluated_device`` in ``store`` (the
    rebuilt requests are written to ``scratch``); the profiler, rewriter, judge and problems."""
    for path in (FIRST, MORE):
        import_recordings(path, store)
    first = Store(":memory:")
    import_recordings(FIRST, first)
    found = rebuilt_requests([[FIRST], [FIRST, MORE]], _requested(REQUESTS), DEVICE)
    export_requests([entry[2] for entry in found.values()], scratch, store, "anthropic")
    import_replies(REPLIES, store)
    import_evaluations(EVALUATIONS, store)
    if evaluated_device not in evaluated_devices(store):
        judged = ", ".join(evaluated_devices(store)) or "none"
        raise SystemExit(f"--evaluated-device: no verdicts of {evaluated_device!r} in "
                         f"{EVALUATIONS.name} (judged on: {judged})")  # fmt: skip
    more_keys = _more_problems()
    problems = {entry[0].content_hash: entry[0] for entry in found.values()}
    more = {h for h, p in problems.items() if p.key in more_keys}
    profiler = ExportedRecordings(
        RecordedProfiler(first, DEVICE), RecordedProfiler(store, DEVICE), more
    )
    rewriter = LLMRewriter(make_client(LLMConfig.from_spec(f"recorded:{MODEL_ID}"), store))
    config = EvalConfig(device="cuda", replay_device=evaluated_device)
    return profiler, rewriter, config, judged_problems(problems)


def excluded(problems: list[Problem], spec: str) -> list[Problem]:
    """``problems`` less those named in ``spec`` (keys, or ``L<level>/<id>`` prefixes of them)."""
    names = [n.strip() for n in spec.split(",") if n.strip()]
    unknown = [n for n in names if not any(_named(p, n) for p in problems)]
    if unknown:
        raise SystemExit(f"--exclude: no judged problem {', '.join(unknown)}")
    return [p for p in problems if not any(_named(p, n) for n in names)]


def _named(problem: Problem, name: str) -> bool:
    return problem.key == name or problem.key.startswith(f"{name}_")


def speedups(score: TreeScore, objective: Objective) -> dict[str, float]:
    """Problem key -> the speedup it counts for (failures 1.0x)."""
    return {o.problem: objective.speedup(o) for o in score.outcomes}


def unrecorded(scores: Sequence[TreeScore]) -> int:
    """Outcomes with no recorded reply or verdict (there should be none: every path asks a
    recorded request, and every reply of these problems was judged)."""
    return sum("not_recorded" in o.failure for s in scores for o in s.outcomes)


def bootstrap(a: dict[str, float], b: dict[str, float], seed: int) -> tuple[float, float, float]:
    """Geomean ratio a/b over the same problems, with its 95 % paired bootstrap interval."""
    keys = sorted(a)
    logs = [math.log(a[k]) - math.log(b[k]) for k in keys]
    rng = random.Random(seed)
    means = sorted(statistics.fmean(rng.choice(logs) for _ in logs) for _ in range(RESAMPLES))
    low, high = means[int(0.025 * RESAMPLES)], means[int(0.975 * RESAMPLES) - 1]
    return math.exp(statistics.fmean(logs)), math.exp(low), math.exp(high)


def bench_split(
    parts: tuple[ExportedRecordings, LLMRewriter, EvalConfig],
    store: Store,
    problems: list[Problem],
    seed: int,
    budgets: Sequence[float],
    args: argparse.Namespace,
) -> tuple[list[dict], BenchResult, list]:
    """One split: the bench (a study per budget from the configuration best on the training
    problems, the learned tree on the test problems), each configuration under each budget,
    the oracle; and the requests the LLM proposer waits for."""
    profiler, rewriter, config = parts
    objective = Objective(count_flagged=True)
    fixed = fixed_trees()
    menu = [fixed[name].root.collect for name in CONFIGS]
    if args.proposer == "llm":
        client = make_client(LLMConfig.from_spec(f"recorded:{MODEL_ID}"), store)
        proposer = LLMProposer(client, edits_per_round=4, menu=menu, routing=ROUTING)
    else:
        proposer = LocalSearchProposer(edits_per_round=6, menu=menu, routing=ROUTING)
    bench = Bench(
        f"llm-{args.proposer}-split{seed}", store, profiler, rewriter, proposer,
        eval_config=config, context=target_context(DEVICE), objective=objective,
        learn_config=LearnConfig(args.iterations, args.patience, None, seed),
        configurations=fixed, start="best",
    )  # fmt: skip
    train, test = split_problems(problems, TRAIN, seed)
    result = bench.run(train, test, budgets)
    rows = []
    for learned in result.budgets:
        scorer = bench.scorer(learned.budget_s)
        on_train = {name: scorer.score(tree, train) for name, tree in fixed.items()}
        on_test = {
            name: bench.config_score(scorer, name, tree, test) for name, tree in fixed.items()
        }
        best = max(CONFIGS, key=lambda n: (on_train[n].value, -on_train[n].mean_cost_s))
        per = {n: speedups(c.score, objective) for n, c in on_test.items()}
        oracle = {k: max(per[n][k] for n in CONFIGS) for k in per[best]}
        tree = tree_from_dict(learned.learned.tree)
        mine = speedups(learned.learned.score, objective)
        ratio, low, high = bootstrap(mine, per[best], seed)
        hindsight = max(CONFIGS, key=lambda n: on_test[n].score.value)
        scores = [*on_train.values(), *(c.score for c in on_test.values()), learned.learned.score]
        rows.append({
            "bench": result.name, "study": learned.study, "seed": seed,
            "budget_s": learned.budget_s, "proposer": proposer.id,
            "train": [p.key for p in train], "test": [p.key for p in test],
            "best_on_train": best, "best_on_test": hindsight,
            "fixed_train": {n: s.value for n, s in on_train.items()},
            "fixed_test": {n: c.score.value for n, c in on_test.items()},
            "fixed_test_cost_s": {n: c.score.mean_cost_s for n, c in on_test.items()},
            "learned_train": learned.train_score.value,
            "learned_test": learned.learned.score.value,
            "learned_test_cost_s": learned.learned.score.mean_cost_s,
            "oracle_test": geomean(list(oracle.values())),
            "learned_over_best": [ratio, low, high],
            "trials": len(learned.trials), "accepted": sum(t.accepted for t in learned.trials),
            "stop": learned.stop_reason, "tree": learned.learned.tree,
            "tree_text": export_text(tree), "unrecorded": unrecorded(scores),
            "learned_per_problem": mine, "best_per_problem": per[best],
        })  # fmt: skip
    return rows, result, list(bench.pending)


def table(rows: list[dict]) -> str:
    lines = [
        "| split | budget | best on train | its test geomean | learned, test | learned / best "
        "(95 % CI) | best on test (hindsight) | oracle | trials (accepted) | learned tree |",
        "|---|---|---|---|---|---|---|---|---|---|",
    ]
    for row in rows:
        ratio, low, high = row["learned_over_best"]
        shown = [line for line in row["tree_text"].strip().splitlines() if line != LEAF_NOTE]
        tree = " ; ".join(shown)
        best, hindsight = row["best_on_train"], row["best_on_test"]
        lines.append(
            f"| {row['seed']} | {row['budget_s']:g} s | {best} | "
            f"{row['fixed_test'][best]:.3f}x | {row['learned_test']:.3f}x | {ratio:.3f} "
            f"({low:.3f}-{high:.3f}) | {hindsight} {row['fixed_test'][hindsight]:.3f}x | "
            f"{row['oracle_test']:.3f}x | {row['trials']} ({row['accepted']}) | `{tree}` |"
        )
    by_budget: dict[float, list[float]] = {}
    for row in rows:
        by_budget.setdefault(row["budget_s"], []).append(math.log(row["learned_over_best"][0]))
    pooled = ", ".join(
        f"{b:g} s: {math.exp(statistics.fmean(v)):.3f}" for b, v in sorted(by_budget.items())
    )
    if len(rows) > 1:
        lines += ["", f"Learned over best-on-train, geometric mean of the splits: {pooled}."]
    return "\n".join(lines)


def _answers(paths: Sequence[Path]) -> dict[str, dict]:
    """custom_id -> reply row of plain JSONL reply files (``{custom_id, content, model}``)."""
    answers: dict[str, dict] = {}
    for path in paths:
        raw = path.read_bytes()
        text = gzip.decompress(raw) if path.suffix == ".gz" else raw
        for line in text.decode("utf-8").splitlines():
            if line.strip():
                row = json.loads(line)
                answers[row["custom_id"]] = row
    return answers


def _run(parts: tuple, store: Store, problems: list[Problem], args: argparse.Namespace):
    """Every split of the plan (one for the LLM proposer): rows, bench results, requests the
    LLM proposer waits for."""
    plan = [(s, args.budgets) for s in SEEDS]
    if args.proposer == "llm":
        plan = [(SEEDS[0], args.budgets[1:2])]
    rows, results, pending = [], [], []
    for seed, budgets in plan:
        done, result, waiting = bench_split(parts, store, problems, seed, budgets, args)
        rows += done
        results.append(result.to_dict())
        pending += waiting
    return rows, results, pending


def main(argv: list[str] | None = None) -> int:
    log_progress()
    args = _parse_args(argv)
    args.work.mkdir(parents=True, exist_ok=True)
    answers = _answers(args.replies)
    with Store(args.work / "store.sqlite") as store:
        profiler, rewriter, config, problems = setup(
            store, args.work / "requests.jsonl", args.evaluated_device
        )
        problems = excluded(problems, args.exclude)
        log.info("%d problems with every configuration judged", len(problems))
        while True:
            rows, results, pending = _run((profiler, rewriter, config), store, problems, args)
            # A waiting round's request is exported (recorded in the store) before its reply,
            # if the reply files hold one, is imported; then the study goes on.
            export_requests(pending, args.work / "pending.jsonl", store, "anthropic")
            ready = [answers[r.custom_id] for r in pending if r.custom_id in answers]
            if not ready:
                break
            scratch = args.work / "replies.jsonl"
            scratch.write_text("".join(json.dumps(row) + "\n" for row in ready), "utf-8")
            log.info("%d replies imported", import_replies(scratch, store))
        for row in rows:
            log.info("%s: learned %.3f, best on train %s %.3f (test); %s", row["study"],
                     row["learned_test"], row["best_on_train"],
                     row["fixed_test"][row["best_on_train"]], row["stop"])  # fmt: skip
        if pending and args.requests_out:
            export_requests(pending, args.requests_out, store, "anthropic")
            log.info("waiting for replies: %s written to %s",
                     ", ".join(r.custom_id for r in pending), args.requests_out)  # fmt: skip
    if args.rows:
        args.rows.write_text(json.dumps(rows, indent=1) + "\n", encoding="utf-8")
    if args.bench_json:
        args.bench_json.write_text(json.dumps(results) + "\n", encoding="utf-8")
    if args.markdown:
        block = "llm_learning" if args.proposer == "search" else "llm_learning_llm"
        replace_block(args.markdown, block, table(rows))
    return 0


if __name__ == "__main__":
    run_main(main, log)
