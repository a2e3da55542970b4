"""``autoprofiler bench``: fixed configurations against learned trees, per budget (a thin layer
over ``Bench``)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from autoprofiler.cli.console import console, fail, note, print_table
from autoprofiler.cli.executors import make_executor
from autoprofiler.cli.learning import export_waiting, learning
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    BaseURLOption,
    BatchFormatOption,
    CountFlaggedOption,
    DeviceOption,
    EditsPerRoundOption,
    EvaluatedDeviceOption,
    EvaluationsOption,
    ExecutorOption,
    IdsOption,
    IterationsOption,
    JsonOption,
    LevelsOption,
    LLMOption,
    MenuOption,
    NoCacheOption,
    ObjectiveOption,
    OutputOption,
    PatienceOption,
    ProblemsOption,
    ProfileDeviceOption,
    ProposerOption,
    RayAddressOption,
    RecordingsOption,
    ReplayOption,
    RequestsOutOption,
    RewriterOption,
    RoutingOption,
    SeedOption,
    StoreOption,
    TimeLimitOption,
    TrainOption,
    WorkersOption,
    checked,
    menu_and_routing,
    output_file,
    train_spec,
)
from autoprofiler.cli.profiling import current_device_key, recorded_device
from autoprofiler.cli.progress import Progress
from autoprofiler.cli.results import emit
from autoprofiler.cli.rewriting import ProposerKind, make_proposer, make_rewriter, require_llm
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.store import Store


def _budgets(text: str) -> None:
    from autoprofiler.bench.runner import parse_budgets

    parse_budgets(text)


def _cost_weights(text: str) -> None:
    from autoprofiler.bench.runner import parse_cost_weights

    parse_cost_weights(text)


def bench_command(
    store: StoreOption = DEFAULT_STORE,
    name: Annotated[
        str, typer.Option("--name", help="Bench name; rerun it to continue where it stopped.")
    ] = "bench",
    problems: ProblemsOption = None,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    recordings: RecordingsOption = None,
    replay: ReplayOption = False,
    evaluations: EvaluationsOption = None,
    evaluated_device: EvaluatedDeviceOption = "",
    profile_device_name: ProfileDeviceOption = "",
    train: TrainOption = "0.5",
    test: Annotated[
        str, typer.Option("--test", help="Test problems by name (a,b); the rest train.")
    ] = "",
    budgets: Annotated[
        str,
        typer.Option(
            "--budgets",
            callback=checked(_budgets),
            help="Profiling budgets, seconds per problem: 5,20,inf.",
        ),
    ] = "20",
    rewriter: RewriterOption = "rules",
    proposer: ProposerOption = ProposerKind.search,
    llm: LLMOption = None,
    base_url: BaseURLOption = None,
    iterations: IterationsOption = 10,
    patience: PatienceOption = 3,
    edits_per_round: EditsPerRoundOption = 6,
    time_limit: TimeLimitOption = None,
    seed: SeedOption = 0,
    objective: ObjectiveOption = "geomean_speedup",
    count_flagged: CountFlaggedOption = False,
    cost_weights: Annotated[
        str,
        typer.Option(
            "--cost-weights",
            callback=checked(_cost_weights),
            help="Also learn, per budget, a tree for each cost weight W (the objective times "
            "exp(-W x profiling seconds per problem)): 0,0.01,0.05. Prints the Pareto front "
            "of the learned trees.",
        ),
    ] = "0",
    menu: MenuOption = None,
    routing: RoutingOption = "static,ncu.SpeedOfLight",
    requests_out: RequestsOutOption = None,
    batch_format: BatchFormatOption = "openai",
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
    no_cache: NoCacheOption = False,
    as_json: JsonOption = False,
    output: OutputOption = None,
    export: Annotated[
        Path | None,
        typer.Option(
            "--export-evaluations",
            callback=checked(output_file),
            help="Then write the evaluations on this bench's device (.jsonl.gz), to replay "
            "elsewhere with --evaluations.",
        ),
    ] = None,
) -> None:
    """Compare the fixed profiling configurations with a tree learned per budget.

    For each budget a tree is learned on the training problems (--train: a fraction or count
    drawn per KernelBench level); then every fixed configuration (none, static, SpeedOfLight,
    basic, detailed, full, curated24) and the learned tree are scored on the test problems
    through the same rewriter and evaluator. Prints a table per budget; everything is stored,
    so a rerun skips finished work (--no-cache: does it again).

    With --menu the configurations are the menu's, each a one-leaf tree that shows its leaf,
    and each budget's study starts from the one best on the training problems under that
    budget and keeps every leaf on the menu (see `learn --menu`).
    """
    from autoprofiler.bench.runner import Bench, BenchError, parse_budgets, parse_cost_weights
    from autoprofiler.evaluate import evaluation_device, export_evaluations
    from autoprofiler.learn.learner import LearnConfig
    from autoprofiler.learn.objective import Objective
    from autoprofiler.report.tables import bench_tables, pareto_table
    from autoprofiler.tree import Node, ProfilingTree

    require_llm(llm, rewriter, proposer)
    if not replay and problems is None:
        fail("--problems is needed to profile them (or --replay to use the recordings)")
    chosen_weights = parse_cost_weights(cost_weights)
    with (
        open_store(store, recordings) as db,
        make_executor(executor, workers, ray_address) as pool,
    ):
        device_key = _recordings_device(db, problems, replay, profile_device_name, levels, ids)
        selection, replaying = (problems, levels, ids), (evaluations, evaluated_device)
        parts = learning(db, device_key, device, selection, replaying)
        train_set, test_set = _split(parts.problems, train, test, seed)
        replayed = parts.eval_config.replay_device
        configurations, routed_by = menu_and_routing(menu, routing)
        menu_trees = {
            name: ProfilingTree(Node("n0", groups), f"fixed: {name}", show="leaf")
            for name, groups in configurations.items()
        }
        bench = Bench(
            name,
            db,
            parts.profiler,
            make_rewriter(rewriter, llm, base_url, db),
            make_proposer(
                proposer,
                edits_per_round,
                llm,
                base_url,
                db,
                list(configurations.values()),
                routed_by,
            ),
            eval_config=parts.eval_config,
            context=parts.context,
            objective=Objective(objective, count_flagged=count_flagged),
            learn_config=LearnConfig(iterations, patience, time_limit, seed),
            compile_baseline=compile_baseline,
            executor=pool,
            use_cache=not no_cache,
            **({"configurations": menu_trees, "start": "best"} if menu else {}),
        )
        replaying = f", evaluations replayed from {replayed}" if replayed else ""
        note(
            f"bench {name}: {len(train_set)} training and {len(test_set)} test problems, "
            f"profiles recorded on {device_key}{replaying}"
        )
        try:
            with Progress(f"bench {name}") as progress:
                result = bench.run(
                    train_set,
                    test_set,
                    parse_budgets(budgets),
                    progress.step,
                    cost_weights=chosen_weights,
                )
        except BenchError as exc:
            fail(str(exc))
        if bench.pending:
            export_waiting(bench.pending, requests_out, db, batch_format, store)
        if export is not None:
            label = evaluation_device(bench.eval_config)
            try:
                count = export_evaluations(db, export, device=label, latest_only=True)
            except OSError as exc:
                fail(f"{export}: cannot write the evaluations: {exc.strerror or exc}")
            note(f"exported {count} evaluations on {label} to {export}")

    def show() -> None:
        for table in bench_tables(result):
            print_table(table)
        if len(chosen_weights) > 1:
            print_table(pareto_table(result))
        stats = result.stats
        console.print(
            f"{stats['rewrites_run']:g} rewrites and {stats['evaluations_run']:g} evaluations "
            f"run (of {stats['rewrites']:g} and {stats['evaluations']:g} asked), "
            f"{stats['compile_baselines_run']:g} torch.compile baselines run",
            highlight=False,
        )

    emit(result.to_dict(), as_json=as_json, output=output, show=show)


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
    from autoprofiler.profile import GROUPS, ProfilerError, default_profiler, record_profiles

    if replay:
        return recorded_device(db, wanted)
    device_key = wanted or current_device_key("cpu")
    assert problems is not None
    loaded = load_or_fail(problems, levels, ids).problems
    with Progress("record") as progress:
        progress.step(f"profiles of {len(loaded)} problems on {device_key}")
        try:
            done = record_profiles(
                loaded, list(GROUPS), db, device_key, default_profiler(device_key)
            )
        except ProfilerError as exc:
            fail(f"cannot profile here: {exc} (use --replay with --recordings)")
    note(
        f"recorded {done.recorded} profiles, {done.skipped} already there, {done.failed} "
        f"failed ({device_key}, {done.seconds:.0f} s)"
    )
    return device_key


def _split(
    problems: list[Problem], train: str, test: str, seed: int
) -> tuple[list[Problem], list[Problem]]:
    from autoprofiler.bench.split import stratified_split

    names = [n.strip() for n in test.split(",") if n.strip()]
    try:
        return stratified_split(problems, train_spec(train), names, seed)
    except ValueError as exc:
        fail(f"--train {train}" + (f" --test {test}" if test else "") + f": {exc}")
