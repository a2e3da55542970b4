"""``autoprofiler bench``: fixed configurations against learned trees, per budget (a thin layer
over ``Bench``). Mounted on the main app as ``app.command(name="bench")(bench_command)``."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from autoprofiler.learn.cli import (
    DEVICES,
    BaseURLOption,
    CountFlaggedOption,
    DeviceOption,
    EditsPerRoundOption,
    EvaluatedDeviceOption,
    EvaluationsOption,
    ExecutorOption,
    LLMOption,
    ObjectiveOption,
    ProposerKind,
    ProposerOption,
    RayAddressOption,
    RecordedDeviceOption,
    RecordingFilesOption,
    RewriterOption,
    WorkersOption,
)

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.store import Store


def bench_command(
    store: Annotated[
        Path, typer.Option("--store", help="SQLite store: recordings, caches, studies, results.")
    ] = Path(".autoprofiler/store.sqlite"),
    name: Annotated[
        str, typer.Option("--name", help="Bench name; rerun it to continue where it stopped.")
    ] = "bench",
    problems: Annotated[
        Path | None,
        typer.Option(
            "--problems",
            help="Problems: file, folder, KernelBench or JSONL (with --replay, default: all "
            "in the recordings).",
        ),
    ] = None,
    levels: Annotated[str | None, typer.Option(help="KernelBench levels, e.g. 1,2.")] = None,
    ids: Annotated[str | None, typer.Option(help="Problem ids, e.g. 1-20,41.")] = None,
    recordings: RecordingFilesOption = None,
    replay: Annotated[
        bool,
        typer.Option(
            "--replay",
            help="Profiles only from the recordings (never profile); evaluations from "
            "--evaluations when given.",
        ),
    ] = False,
    evaluations: EvaluationsOption = None,
    evaluated_device: EvaluatedDeviceOption = "",
    recorded_device: RecordedDeviceOption = "",
    train: Annotated[
        str,
        typer.Option(
            "--train",
            help="Training problems: a fraction (0.5) or count drawn per KernelBench level, "
            "or names (a,b); the rest are the test problems.",
        ),
    ] = "0.5",
    test: Annotated[
        str, typer.Option("--test", help="Test problems by name (a,b); the rest train.")
    ] = "",
    budgets: Annotated[
        str, typer.Option("--budgets", help="Profiling budgets, seconds per problem: 5,20,inf.")
    ] = "20",
    rewriter: RewriterOption = "rules",
    proposer: ProposerOption = ProposerKind.search,
    llm: LLMOption = None,
    base_url: BaseURLOption = None,
    iterations: Annotated[
        int, typer.Option("--iterations", min=0, help="Learning rounds per budget.")
    ] = 10,
    patience: Annotated[
        int, typer.Option("--patience", min=1, help="Stop learning after K rounds without gain.")
    ] = 3,
    edits_per_round: EditsPerRoundOption = 6,
    time_limit: Annotated[
        float | None,
        typer.Option("--time-limit", min=0.0, help="Stop each study's run after S seconds."),
    ] = None,
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split and the proposer.")] = 0,
    objective: ObjectiveOption = "geomean_speedup",
    count_flagged: CountFlaggedOption = False,
    cost_weights: Annotated[
        str,
        typer.Option(
            "--cost-weights",
            help="Also learn, per budget, a tree for each cost weight W (the objective times "
            "exp(-W x profiling seconds per problem)): 0,0.01,0.05. Prints the Pareto front "
            "of the learned trees.",
        ),
    ] = "0",
    device: DeviceOption = "auto",
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    compile_baseline: Annotated[
        bool,
        typer.Option(
            "--compile-baseline/--no-compile-baseline",
            help="Evaluate torch.compile of each test problem, for speedups over it.",
        ),
    ] = True,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write every per-problem outcome as JSON.")
    ] = None,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export-evaluations",
            help="Then write the evaluations on this bench's device (.jsonl.gz), to replay "
            "elsewhere with --evaluations.",
        ),
    ] = None,
) -> None:
    """Compare the fixed profiling configurations with a tree learned per budget.

    For each budget a tree is learned on the training problems; then every fixed configuration
    (none, static, SpeedOfLight, basic, detailed, full, curated24) and the learned tree are
    scored on the test problems through the same rewriter and evaluator. Prints a table per
    budget; everything is stored, so a rerun skips finished work.
    """
    from autoprofiler.bench.runner import Bench, BenchError, parse_budgets, parse_cost_weights
    from autoprofiler.cli import console, fail, make_executor, open_store, replay_device_for
    from autoprofiler.evaluate import EvalConfig, evaluation_device, export_evaluations
    from autoprofiler.learn.cli import (
        make_proposer,
        recorded_problems,
        resolve_device,
        rewriter_from_spec,
    )
    from autoprofiler.learn.learner import LearnConfig
    from autoprofiler.learn.objective import Objective
    from autoprofiler.profile import RecordedProfiler
    from autoprofiler.report.tables import bench_tables, pareto_table
    from autoprofiler.rewrite.base import RewriteContext

    if device not in DEVICES:
        fail(f"--device must be one of {', '.join(DEVICES)}, not {device!r}")
    try:
        chosen_budgets = parse_budgets(budgets)
        chosen_weights = parse_cost_weights(cost_weights)
        objective_ = Objective(objective, count_flagged=count_flagged)
    except ValueError as exc:
        fail(str(exc))
    if not replay and problems is None:
        fail("--problems is needed to profile them (or --replay to use the recordings)")
    with (
        open_store(store, recordings) as db,
        make_executor(executor, workers, ray_address) as pool,
    ):
        replayed = replay_device_for(db, evaluations, evaluated_device)
        device_key = _recordings_device(db, problems, replay, recorded_device, levels, ids)
        profiler = RecordedProfiler(db, device_key)
        chosen = recorded_problems(db, problems, profiler, console, levels, ids)
        train_set, test_set = _split(chosen, train, test, seed)
        eval_device = resolve_device(device)
        bench = Bench(
            name,
            db,
            profiler,
            rewriter_from_spec(rewriter, llm, base_url, db),
            make_proposer(proposer, edits_per_round, llm, base_url, db),
            eval_config=EvalConfig(device=device, replay_device=replayed),
            context=RewriteContext(
                device=eval_device, device_name=device_key if eval_device == "cuda" else ""
            ),
            objective=objective_,
            learn_config=LearnConfig(iterations, patience, time_limit, seed),
            compile_baseline=compile_baseline,
            executor=pool,
        )
        replaying = f", evaluations replayed from {replayed}" if replayed else ""
        console.print(
            f"bench {name}: {len(train_set)} training and {len(test_set)} test problems, "
            f"profiles recorded on {device_key}{replaying}",
            highlight=False,
        )
        try:
            with console.status("starting") as status:
                result = bench.run(
                    train_set,
                    test_set,
                    chosen_budgets,
                    lambda s: status.update(s),
                    cost_weights=chosen_weights,
                )
        except BenchError as exc:
            fail(str(exc))
        if export is not None:
            label = evaluation_device(bench.eval_config)
            count = export_evaluations(db, export, device=label, latest_only=True)
            console.print(f"exported {count} evaluations on {label} to {export}", highlight=False)
    for table in bench_tables(result):
        console.print(table)
    if len(chosen_weights) > 1:
        console.print(pareto_table(result))
    stats = result.stats
    console.print(
        f"{stats['rewrites_run']:g} rewrites and {stats['evaluations_run']:g} evaluations run "
        f"(of {stats['rewrites']:g} and {stats['evaluations']:g} asked), "
        f"{stats['compile_baselines_run']:g} torch.compile baselines run",
        highlight=False,
    )
    if out is not None:
        out.write_text(json.dumps(result.to_dict(), indent=1), encoding="utf-8")
        console.print(f"wrote {out}")


def _recordings_device(
    db: Store,
    problems: Path | None,
    replay: bool,
    wanted: str,
    levels: str | None,
    ids: str | None,
) -> str:
    """The device whose recordings are used; without ``replay`` the problems' missing
    recordings are made first, with this machine's profilers."""
    from autoprofiler.cli import console, current_device_key, fail, load_or_fail
    from autoprofiler.learn.cli import choose_recorded_device
    from autoprofiler.profile import GROUPS, ProfilerError, default_profiler, record_profiles

    if replay:
        return choose_recorded_device(db, wanted)
    device_key = wanted or current_device_key("cpu")
    assert problems is not None
    loaded = load_or_fail(problems, levels, ids).problems
    with console.status(f"recording profiles of {len(loaded)} problems on {device_key}"):
        try:
            done = record_profiles(
                loaded, list(GROUPS), db, device_key, default_profiler(device_key)
            )
        except ProfilerError as exc:
            fail(f"cannot profile here: {exc} (use --replay with --recordings)")
    console.print(
        f"recorded {done.recorded} profiles, {done.skipped} already there, {done.failed} "
        f"failed ({device_key}, {done.seconds:.0f} s)",
        highlight=False,
    )
    return device_key


def _split(
    problems: list[Problem], train: str, test: str, seed: int
) -> tuple[list[Problem], list[Problem]]:
    from autoprofiler.bench.split import stratified_split
    from autoprofiler.cli import fail
    from autoprofiler.learn.cli import train_spec

    names = [n.strip() for n in test.split(",") if n.strip()]
    try:
        return stratified_split(problems, train_spec(train), names, seed)
    except ValueError as exc:
        fail(f"--train {train}" + (f" --test {test}" if test else "") + f": {exc}")
