"""``autoprofiler learn``: learn a profiling tree from recorded profiles (a thin layer over
``TreeLearner``)."""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING, Annotated

import typer

from autoprofiler.cli.console import console, fail, note, print_table
from autoprofiler.cli.executors import make_executor
from autoprofiler.cli.learning import export_waiting, learning
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    BaseURLOption,
    BatchFormatOption,
    BudgetOption,
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
    train_spec,
    tree_spec,
)
from autoprofiler.cli.profiling import recorded_device
from autoprofiler.cli.progress import Progress
from autoprofiler.cli.results import to_json, write_text
from autoprofiler.cli.rewriting import ProposerKind, make_proposer, make_rewriter, require_llm
from autoprofiler.cli.stores import open_store

if TYPE_CHECKING:
    from autoprofiler.learn.learner import LearnResult, TreeLearner
    from autoprofiler.learn.objective import TreeScore
    from autoprofiler.problem import Problem
    from autoprofiler.tree import ProfilingTree


def learn_command(
    study: Annotated[str, typer.Option("--study", help="Study name (continue it with --resume).")],
    store: StoreOption = DEFAULT_STORE,
    problems: ProblemsOption = None,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    recordings: RecordingsOption = None,
    evaluations: EvaluationsOption = None,
    evaluated_device: EvaluatedDeviceOption = "",
    train: TrainOption = "0.7",
    budget: BudgetOption = 20.0,
    rewriter: RewriterOption = "rules",
    proposer: ProposerOption = ProposerKind.search,
    iterations: IterationsOption = 10,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the study after its last trial.")
    ] = False,
    device: DeviceOption = "auto",
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    profile_device_name: ProfileDeviceOption = "",
    start: Annotated[
        str,
        typer.Option(
            "--start",
            callback=checked(tree_spec),
            help="Start tree: a JSON file, a fixed tree name or groups joined by +.",
        ),
    ] = "none",
    seed: SeedOption = 0,
    patience: PatienceOption = 3,
    time_limit: TimeLimitOption = None,
    edits_per_round: EditsPerRoundOption = 6,
    objective: ObjectiveOption = "geomean_speedup",
    cost_weight: Annotated[
        float,
        typer.Option(
            "--cost-weight",
            min=0.0,
            help="Trade quality for profiling time: the objective times exp(-W x mean "
            "profiling seconds per problem) (0.01: 10 s more must buy about 10 % more).",
        ),
    ] = 0.0,
    count_flagged: CountFlaggedOption = False,
    noise_floor: Annotated[
        float, typer.Option("--noise-floor", min=0.0, help="Smallest relative improvement.")
    ] = 0.01,
    llm: LLMOption = None,
    base_url: BaseURLOption = None,
    no_cache: NoCacheOption = False,
    menu: MenuOption = None,
    routing: RoutingOption = "static,ncu.SpeedOfLight",
    requests_out: RequestsOutOption = None,
    batch_format: BatchFormatOption = "openai",
    as_json: JsonOption = False,
    output: OutputOption = None,
) -> None:
    """Learn which metric groups to profile per kernel, from recorded profiles.

    Each round asks the proposer for edits of the tree (--start, a file or a fixed tree),
    scores each edited tree on the training problems (replayed profiles, one rewrite and one
    evaluation per problem, all cached) and keeps an edit only when it beats the current tree
    by more than the timing noise. Every trial is stored: kill the run at any point and
    continue it with --resume. The results are the learned tree: --json prints its JSON and
    -o writes it (a tree file for --tree).

    With the LLM proposer answered in batches (--llm recorded:PROVIDER:MODEL), a round whose
    request has no reply yet writes that request (--requests-out) and stops; import the reply
    with `replies import` and run the same command with --resume.
    """
    from autoprofiler.learn.learner import LearnConfig, TreeLearner
    from autoprofiler.learn.objective import Objective
    from autoprofiler.learn.scoring import TreeScorer
    from autoprofiler.learn.split import split_problems
    from autoprofiler.learn.study import StudyError
    from autoprofiler.tree import resolve_tree

    require_llm(llm, rewriter, proposer)
    chosen = Objective(
        objective, noise_floor=noise_floor, cost_weight=cost_weight, count_flagged=count_flagged
    )
    start_tree = resolve_tree(start).validate()
    configurations, routed_by = menu_and_routing(menu, routing)
    if menu:
        start_tree = replace(start_tree, show="leaf")
    with open_store(store, recordings) as db, make_executor(executor, workers, ray_address) as pool:
        device_key = recorded_device(db, profile_device_name)
        selection, replaying = (problems, levels, ids), (evaluations, evaluated_device)
        parts = learning(db, device_key, device, selection, replaying)
        try:
            train_set, validation_set = split_problems(parts.problems, train_spec(train), seed)
        except ValueError as exc:
            fail(f"--train {train}: {exc}")
        scorer = TreeScorer(
            parts.profiler,
            make_rewriter(rewriter, llm, base_url, db),
            db,
            budget_s=budget,
            objective=chosen,
            eval_config=parts.eval_config,
            executor=pool,
            context=parts.context,
            use_cache=not no_cache,
        )
        chosen_proposer = make_proposer(
            proposer, edits_per_round, llm, base_url, db, list(configurations.values()), routed_by
        )
        learner = TreeLearner(
            scorer, chosen_proposer, LearnConfig(iterations, patience, time_limit, seed)
        )
        shown = "unlimited" if budget is None else f"{budget:g} s per problem"
        note(
            f"study {study}: {len(train_set)} training and {len(validation_set)} validation "
            f"problems, recordings of {device_key}, budget {shown}"
        )
        try:
            result = _run(learner, study, train_set, validation_set, start_tree, resume)
        except StudyError as exc:
            fail(str(exc))
        if result.pending is not None:
            export_waiting(
                [result.pending], requests_out, db, batch_format, store, " with --resume"
            )
    document = to_json(result.tree.to_dict())
    if as_json:
        typer.echo(document)
    else:
        _summary(result)
    if output is not None:
        write_text(output, document, "learned tree")


def _run(
    learner: TreeLearner,
    study: str,
    train: list[Problem],
    validation: list[Problem],
    start: ProfilingTree,
    resume: bool,
) -> LearnResult:
    """Run the study with its progress on stderr: the rounds done of the most asked, and each
    trial's verdict as it finishes; at the end, the rounds actually run and why it stopped."""
    from autoprofiler.learn.learner import LearnProgress

    rounds = learner.config.iterations
    with Progress(f"{study}: learn", rounds) as progress:
        progress.status("scoring the start tree")

        def show(state: LearnProgress) -> None:
            trial = state.last
            if trial is None:
                return
            verdict = f"{trial.state.value}: {trial.reason}"
            best = f"best {state.best.objective} {state.best.value:.4g}"
            where = f"round {trial.round + 1}/{rounds} trial {trial.number}"
            ended = trial.accepted or trial.index + 1 >= trial.round_size
            done = trial.round + 1 if ended else trial.round
            progress.finished(where, f"{verdict}; {best}", trial.duration_s, completed=done)

        result = learner.learn(study, train, validation, start, resume=resume, on_progress=show)
        progress.finished(
            f"stopped after {result.rounds} of {rounds} rounds",
            result.stop_reason,
            result.wall_s,
            completed=result.rounds,
        )
    return result


def _score_cells(score: TreeScore | None) -> list[str]:
    if score is None:
        return ["-"] * 6
    return [
        f"{score.value:.4g}",
        f"{score.geomean_speedup:.3f}x",
        f"{score.fast_1:.0%}",
        f"{score.correct_rate:.0%}",
        str(score.flagged),
        f"{score.mean_cost_s:.3g} s",
    ]


def _summary(result: LearnResult) -> None:
    """The learned tree, its score against the start tree's, trials, cost and caching."""
    from rich.table import Table

    from autoprofiler.tree import export_text

    table = Table(title=f"study {result.study}: stopped ({result.stop_reason})")
    table.add_column("")
    for column in ("start, train", "learned, train", "start, validation", "learned, validation"):
        table.add_column(column, justify="right")
    rows = (
        result.start_score.objective,
        "geomean speedup",
        "fast_1",
        "correct",
        "flagged",
        "profiling cost per problem",
    )
    cells = [
        _score_cells(s)
        for s in (result.start_score, result.score, result.start_validation, result.validation)
    ]
    for i, name in enumerate(rows):
        table.add_row(name, *(column[i] for column in cells))
    print_table(table)
    console.print("learned tree:")
    console.print(export_text(result.tree), highlight=False, markup=False, end="")
    cache = result.cache
    console.print(
        f"{len(result.trials)} trials in {result.rounds} rounds, {result.accepted} accepted; "
        f"cache hit rate {cache.hit_rate:.0%} ({cache.rewrites - cache.rewrite_hits} rewrites and "
        f"{cache.evaluations_run} evaluations run); {result.wall_s:.1f} s",
        highlight=False,
    )
