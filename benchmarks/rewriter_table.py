"""The rule rewriter on recorded GPU data: no profile, the richest profile, and the oracle.

For every problem with recordings and recorded evaluations (from ``benchmarks/rule_sweep.py``),
the ``RuleRewriter`` is asked once with no profile, once with every recorded group (the
richest profile the recordings hold) and, where it is recorded, once with the ``--set full``
profile alone; each pick's recorded evaluation is looked up; the
oracle is the best of all the candidates the rewriter could have picked (every one was
evaluated by the sweep). Nothing runs on a GPU: this rebuilds ``docs/results/rewriter.md``.

    python benchmarks/rewriter_table.py --recordings docs/results/data/kernelbench_h200.jsonl.gz \\
        --evaluations docs/results/data/kernelbench_h200_evaluations.jsonl.gz \\
        --markdown docs/results/rewriter.md --command "..."
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import dataclass, field
from pathlib import Path

from _common import add_evaluated_device, card_name, geomean

from autoprofiler.evaluate import (
    EvalConfig,
    EvalResult,
    FailureKind,
    import_evaluations,
    replay_evaluation,
)
from autoprofiler.problem import Problem
from autoprofiler.profile import RecordedProfiler, get_group, import_recordings
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.rules import RuleRewriter
from autoprofiler.store import Store

SET_FULL = "ncu.set.full"


@dataclass
class Pick:
    """One transformation for one problem and what its recorded evaluation says."""

    name: str
    result: EvalResult

    @property
    def speedup(self) -> float:
        """Speedup over eager of the program a user keeps: 1.0 when the candidate failed."""
        return self.result.speedup if self.result.correct and self.result.speedup else 1.0

    @property
    def over_compile(self) -> float | None:
        """Speedup over torch.compile of the reference, timed in the same worker."""
        compiled, timing = self.result.compiled_reference, self.result.candidate
        if not self.result.correct or compiled is None or timing is None:
            return None
        return compiled.median_ms / timing.median_ms

    def cell(self) -> str:
        if not self.result.correct:
            kind = self.result.failure_kind
            return f"{self.name}: {kind.value if kind else 'wrong'}"
        return f"{self.name} {self.speedup:.2f}x"


def _parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--recordings", required=True, nargs="+")
    parser.add_argument("--evaluations", required=True)
    parser.add_argument("--recorded-device", default="H200", help="the profiles' device")
    add_evaluated_device(parser)
    parser.add_argument("--exclude", nargs="*", default=[], help="transformations never picked")
    parser.add_argument("--markdown", type=Path, required=True)
    parser.add_argument("--command", default="")
    parser.add_argument("--note", action="append", default=[], help="a line for the header")
    parser.add_argument(
        "--compare", nargs="*", default=[], help="also summarize the rewriter without these"
    )
    parser.add_argument("--store", default=":memory:")
    return parser.parse_args(argv)


@dataclass
class Table:
    """The rewriter's picks per problem, and what kept problems or candidates out."""

    rows: list = field(default_factory=list)
    missing: list[str] = field(default_factory=list)
    not_evaluated: dict[str, list[str]] = field(default_factory=dict)
    excluded_picks: dict[str, list[str]] = field(default_factory=dict)


def build_table(
    store: Store,
    profiler: RecordedProfiler,
    problems: list[Problem],
    exclude: list[str],
    evaluated_device: str,
) -> Table:
    """Ask the rule rewriter without ``exclude`` about every problem, with no profile, every
    recorded group and ``--set full`` alone, and look its picks up in the evaluations recorded
    on ``evaluated_device``."""
    config = EvalConfig(device="cuda", replay_device=evaluated_device)
    atol, rtol = config.tolerance_for("float32")
    context = RewriteContext(device="cuda", device_name="H200", atol=atol, rtol=rtol)
    rewriter = RuleRewriter(exclude=exclude)
    unrestricted = RuleRewriter()
    table = Table()
    for problem in problems:
        groups = [get_group(g) for g in profiler.records(problem.content_hash)]
        full = profiler.collect(problem, groups)
        asked = [("none", None), ("full", full)]
        if SET_FULL in profiler.records(problem.content_hash):
            asked.append((SET_FULL, profiler.collect(problem, [get_group(SET_FULL)])))
        chosen = {
            label: rewriter.rewrite(problem, profile, context).info.get("transformation", "")
            for label, profile in asked
        }
        for label, profile in asked:
            wanted = unrestricted.rewrite(problem, profile, context).info.get("transformation")
            if wanted in exclude:
                table.excluded_picks.setdefault(label, []).append(f"{problem.key} ({wanted})")
        options = []
        for name in rewriter.reachable(problem, context):
            candidate = rewriter.generate(problem, name, context)
            result = replay_evaluation(problem, candidate.content_hash, config, store)
            options.append(Pick(name, result))
        by_name = {o.name: o for o in options}
        evaluated = [o for o in options if o.result.failure_kind != FailureKind.NOT_RECORDED]
        unevaluated = [
            f"{name} (*{label}*)"
            for label, name in chosen.items()
            if by_name[name] not in evaluated
        ]
        if unevaluated:
            table.missing.append(f"{problem.key}: {', '.join(unevaluated)} not evaluated")
            continue
        skipped = [o.name for o in options if o not in evaluated]
        if skipped:
            table.not_evaluated[problem.key] = skipped
        oracle = max(evaluated, key=lambda o: o.speedup)
        picked = (by_name[chosen["none"]], by_name[chosen["full"]], oracle)
        set_full = by_name[chosen[SET_FULL]] if SET_FULL in chosen else None
        table.rows.append((problem, *picked, full.cost_s, evaluated, set_full))
    return table


def _judged_elsewhere(card: str) -> list[str]:
    """Where the verdicts replayed were made on another GPU model than the profiles: say so
    before the H200's story of how the first ones were made."""
    if card == "H200":
        return []
    return [
        f"The verdicts below were judged on the {card}; the profiles the rewriter reads were",
        "recorded on the H200, and the machine, commands and history below are those of the",
        "first verdicts, made on the H200.",
        "",
    ]


def main(argv: list[str] | None = None) -> int:
    args = _parse_args(argv)
    store = Store(args.store)
    for path in args.recordings:
        import_recordings(path, store)
    import_evaluations(args.evaluations, store)
    profiler = RecordedProfiler(store, args.recorded_device)
    hashes = dict.fromkeys(h for h, d, _, _ in store.iter_profile_records() if d == profiler.device)
    problems = sorted(
        (p for h in hashes if (p := store.get_problem(h)) is not None),
        key=lambda p: (p.level or 0, p.problem_id or 0),
    )
    judged_on = args.evaluated_device
    table = build_table(store, profiler, problems, args.exclude, judged_on)
    compared = None
    if args.compare:
        compared = build_table(store, profiler, problems, args.compare, judged_on)
    _write(args, table, compared)
    store.close()
    return 0


def _summary(rows: list) -> list[str]:
    """The summary table's lines for ``rows``."""
    with_set_full = [row for row in rows if row[6] is not None]
    lines = [
        "| profile | problems | correct | fast_1 | geomean ×eager | geomean ×compile |",
        "|---|---|---|---|---|---|",
    ]
    for label, picks in (
        ("none", [row[1] for row in rows]),
        ("full", [row[2] for row in rows]),
        ("oracle", [row[3] for row in rows]),
        (f"none, on the {len(with_set_full)} with `--set full`", [r[1] for r in with_set_full]),
        ("`--set full` alone", [row[6] for row in with_set_full]),
        (f"oracle, on the {len(with_set_full)}", [row[3] for row in with_set_full]),
    ):
        if not picks:
            continue
        speedups = [p.speedup for p in picks]
        over = [p.over_compile or 1.0 for p in picks]
        correct = sum(p.result.correct for p in picks)
        faster = sum(p.result.correct and p.speedup > 1.0 for p in picks)
        lines.append(
            f"| {label} | {len(picks)} | {correct / len(picks):.0%} | {faster / len(picks):.0%} | "
            f"{geomean(speedups):.3f}x | {geomean(over):.3f}x |"
        )
    return lines


def _write(args: argparse.Namespace, table: Table, compared: Table | None) -> None:
    rows, missing = table.rows, table.missing
    excluded_picks, not_evaluated = table.excluded_picks, table.not_evaluated

    def cmp(p: Pick) -> str:
        value = p.over_compile
        return "" if value is None else f"{value:.2f}x"

    card = card_name(args.evaluated_device)
    lines = [
        f"# The rule rewriter on the {card}: no profile, the full recorded profile, the oracle",
        "",
        *_judged_elsewhere(card),
        "Machine: NVIDIA H200 (one GPU of an `nvidia-h200-x2` lease), PyTorch 2.11.0+cu130, "
        "Triton 3.6.0. Tolerance: KernelBench's default for float32 (atol = rtol = 1e-4).",
        "",
        "Made, on a CPU, from the committed H200 recordings and evaluations with",
        "",
        f"```\n{args.command}\n```",
        "",
        "The evaluations were made on the H200 by `benchmarks/rule_sweep.py`, which evaluates",
        "every transformation some profile could make the rewriter pick (`RuleRewriter.reachable`)",
        "for each problem; the profiles were recorded by `benchmarks/record_profiles.py`. On the",
        "H200 (two GPUs sharing the problems through `--claims`, resumed over several slots):",
        "",
        "```",
        "python3 benchmarks/rule_sweep.py problems.jsonl --levels 1 2 --ids $IDS \\",
        "    --store sweep0.sqlite --rows sweep0.jsonl --device-name H200 --claims /tmp/claims \\",
        "    --deadline-s 540 --exclude compile_max_autotune",
        "python3 benchmarks/rule_sweep.py ma1.jsonl --store sweep1.sqlite --rows rows.jsonl \\",
        "    --device-name H200 --claims /tmp/claims --deadline-s 535 --exclude",
        "python3 benchmarks/rule_sweep.py cmp2.jsonl --store sweep2.sqlite --rows rows.jsonl \\",
        "    --device-name H200 --claims /tmp/claims --deadline-s 550 \\",
        "    --exclude compile_max_autotune",
        "python3 benchmarks/rule_sweep.py ma3.jsonl --store sweep2.sqlite --rows rows.jsonl \\",
        "    --device-name H200 --claims /tmp/claims --deadline-s 550 --exclude",
        "python3 benchmarks/record_profiles.py problems.jsonl --levels 1 2 --ids $IDS \\",
        "    --store rec.sqlite --out rec --chunk-size 16 --groups static torch.kernels \\",
        "    torch.ops ncu.SpeedOfLight ncu.LaunchStats ncu.Occupancy ncu.set.basic ncu.curated24",
        "```",
        "",
        "with `IDS` = 1 23 40 63 33 41 53 73 4 8 12 16 20 27 30 36 44 48 57 60 66 69 77 80 84 87",
        "90 94 97 13 18 25 (the same ids in levels 1 and 2: 64 problems), and every other group,",
        "`--set full` included, on 30 of them (`docs/results/profiling_costs.md`). The first sweep",
        "left `compile_max_autotune` out (minutes of autotuning per problem); the second evaluated",
        "it, and re-measured `compile`, on the 24 problems where the full profile makes the",
        "rewriter pick it (`ma1.jsonl`; its rows file seeded with the first sweep's other",
        "evaluations, so only those two ran), after the evaluator was changed to try a second",
        "input shape only after timing (torch.compile's automatic dynamic shapes had recompiled",
        "the candidate for any shape before it was timed). The third and fourth re-measured",
        "`compile` on the other 22 problems where it applies (`cmp2.jsonl`) and evaluated",
        "`compile_max_autotune` on the 26 where no earlier sweep had (`ma3.jsonl`, resumed",
        "once), so that every transformation the rewriter can reach is evaluated. Where an",
        "evaluation was repeated, the newer one is kept.",
        "*none*: the rewriter asked with no profile (its prior); *full*: asked with every group",
        "recorded for the problem (at least static, torch.kernels, torch.ops, ncu SpeedOfLight,",
        "LaunchStats, Occupancy; on 30 problems every group of the catalogue); *`--set full`*:",
        "asked with the profile of ncu's full set alone, where recorded. *oracle*: the best",
        "evaluated candidate in hindsight. A failed candidate counts 1.0x (the reference",
        "stays). *×compile*: against `torch.compile` of the reference (default mode), timed in",
        "the same worker.",
        "",
        *(f"{note}\n" for note in args.note),
    ]
    with_set_full = [row for row in rows if row[6] is not None]
    lines += [
        f"## Summary ({len(rows)} problems)",
        "",
        *_summary(rows),
        "",
        "*geomean ×compile* counts a failed or untimed candidate as 1.0x against compile.",
        "",
    ]
    triton = [o for row in rows for o in row[5] if o.name.startswith("triton")]
    triton_ok = sum(o.result.correct for o in triton)
    lines += [
        f"Generated Triton kernels: {triton_ok} of {len(triton)} correct "
        f"({', '.join(sorted({o.name for o in triton}))}).",
        "",
    ]
    same = sum(row[6].name == row[2].name for row in with_set_full)
    lines += [
        f"`--set full` alone led to the same pick as every recorded group on {same} of the "
        f"{len(with_set_full)} problems where it is recorded.",
        "",
    ]
    changed = [row for row in rows if row[1].name != row[2].name]
    lines += [
        f"The profile changed the rewriter's pick on {len(changed)} of {len(rows)} problems:",
        "",
        *(
            f"- {problem.key}: {none.cell()} without a profile, {full.cell()} with it"
            for problem, none, full, *_ in changed
        ),
        "",
        "The oracle leaves the reference in place (1.0x) where every reachable candidate is",
        "slower or fails, so its correct rate can be below the rewriter's.",
        "",
    ]
    for label, picks in excluded_picks.items():
        lines += [
            f"Without `--exclude`, the rewriter asked with *{label}* would have picked an "
            f"excluded transformation on {len(picks)} problems: {', '.join(picks)}.",
            "",
        ]
    if missing:
        lines += [f"Left out (a pick was never evaluated): {'; '.join(missing)}.", ""]
    if not_evaluated:
        names = sorted({name for skipped in not_evaluated.values() for name in skipped})
        lines += [
            f"Not evaluated, so outside the oracle: {', '.join(names)} on "
            f"{len(not_evaluated)} problems where no profile made the rewriter pick it "
            f"({', '.join(not_evaluated)}).",
            "",
        ]
    lines += _versus_compile(rows, "compile_max_autotune")
    if compared is not None:
        lines += [
            f"## The rewriter without {', '.join(f'`{n}`' for n in args.compare)} "
            f"({len(compared.rows)} problems)",
            "",
            "The same question asked of `--rewriter rules-without-...`, the rewriter the",
            "reproduction and the learning runs use:",
            "",
            *_summary(compared.rows),
            "",
        ]
        if compared.missing:
            lines += [f"Left out: {'; '.join(compared.missing)}.", ""]
    lines += [
        "## Per problem",
        "",
        "| problem | none | ×compile | full | ×compile | `--set full` | oracle | ×compile |"
        " full profile s |",
        "|---|---|---|---|---|---|---|---|---|",
    ]
    for problem, none, full, oracle, cost, _, set_full in rows:
        lines.append(
            f"| {problem.key} | {none.cell()} | {cmp(none)} | {full.cell()} | {cmp(full)} | "
            f"{set_full.cell() if set_full else '-'} | {oracle.cell()} | {cmp(oracle)} | "
            f"{cost:.1f} |"
        )
    args.markdown.write_text("\n".join(lines) + "\n", encoding="utf-8")


def _versus_compile(rows: list, name: str) -> list[str]:
    """Lines comparing ``name`` with default torch.compile where both were evaluated: speed
    where both are correct, and where either failed."""
    pairs = []
    for problem, *_, evaluated, _set_full in rows:
        by_name = {o.name: o for o in evaluated}
        if name in by_name and "compile" in by_name:
            pairs.append((problem, by_name[name], by_name["compile"]))
    if not pairs:
        return []
    timed = [(p, t, d) for p, t, d in pairs if t.result.correct and d.result.correct]
    ratios = {p.key: t.speedup / d.speedup for p, t, d in timed}

    shown = {p.key: f"{p.key} {t.speedup:.2f}x vs {d.speedup:.2f}x" for p, t, d in timed}

    def listed(keys: list[str]) -> str:
        return f"{len(keys)} ({', '.join(keys)})" if keys else "0"

    def speeds(keys: list[str]) -> str:
        return listed([shown[k] for k in keys])

    better = [k for k, r in ratios.items() if r > 1.01]
    worse = [k for k, r in ratios.items() if r < 0.99]
    failed = [p.key for p, t, d in pairs if not t.result.correct and d.result.correct]
    rescued = [p.key for p, t, d in pairs if t.result.correct and not d.result.correct]
    both = [p.key for p, t, d in pairs if not t.result.correct and not d.result.correct]
    return [
        f"`{name}` against `compile` (default mode), evaluated on {len(pairs)} problems. Where "
        f"both are correct ({len(timed)}): geomean ratio {geomean(list(ratios.values())):.3f}; "
        f"better by more than 1 % on {speeds(better)}; worse by more than 1 % on "
        f"{speeds(worse)}. `{name}` failed where `compile` was correct on {listed(failed)}; "
        f"correct where `compile` failed on {listed(rescued)}; both failed on {listed(both)}.",
        "",
    ]


if __name__ == "__main__":
    sys.exit(main())
