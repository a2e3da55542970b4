"""``autoprofiler learn``: learn a profiling tree from recorded profiles (a thin layer over
``TreeLearner``). Mounted on the main app as ``app.command(name="learn")(learn_command)``."""

from __future__ import annotations

import importlib
from enum import Enum
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from rich.console import Console

    from autoprofiler.learn.learner import LearnResult, TreeLearner
    from autoprofiler.learn.objective import TreeScore
    from autoprofiler.learn.proposers import Proposer
    from autoprofiler.llm import LLMClient
    from autoprofiler.problem import Problem
    from autoprofiler.profile import RecordedProfiler
    from autoprofiler.rewrite.base import Rewriter
    from autoprofiler.store import Store
    from autoprofiler.tree import ProfilingTree


class ProposerKind(str, Enum):
    search = "search"
    llm = "llm"


DEVICES = ("auto", "cuda", "cpu")
# Shared with the other commands that evaluate (``autoprofiler.cli`` imports this module lazily).
EvaluationsOption = Annotated[
    list[Path] | None,
    typer.Option(
        "--evaluations",
        help="Recorded evaluations (.jsonl.gz) to replay instead of evaluating; repeatable.",
    ),
]
EvaluatedDeviceOption = Annotated[
    str,
    typer.Option(
        "--evaluated-device",
        help="Replay the evaluations recorded on this device, e.g. 'cuda:NVIDIA H200' "
        "(default: the only one in --evaluations).",
    ),
]
# Shared with ``autoprofiler bench``.
RecordingFilesOption = Annotated[
    list[Path] | None,
    typer.Option("--recordings", help="Recorded profiles (.jsonl.gz) to import; repeatable."),
]
RecordedDeviceOption = Annotated[
    str,
    typer.Option("--recorded-device", help="Device of the recordings (default: the only one)."),
]
RewriterOption = Annotated[
    str,
    typer.Option(
        "--rewriter", help="rules, rules-without-NAME, llm, or MODULE:NAME of a Rewriter."
    ),
]
ProposerOption = Annotated[
    ProposerKind, typer.Option("--proposer", help="search (offline local search) or llm.")
]
EditsPerRoundOption = Annotated[
    int, typer.Option("--edits-per-round", min=1, help="Edits asked of the proposer a round.")
]
ObjectiveOption = Annotated[
    str, typer.Option("--objective", help="geomean_speedup, fast_1 or correct_rate.")
]
CostWeightOption = Annotated[
    float,
    typer.Option(
        "--cost-weight",
        min=0.0,
        help="Trade quality for profiling time: the objective times exp(-W x mean profiling "
        "seconds per problem) (0.01: 10 s more must buy about 10 % more).",
    ),
]
CountFlaggedOption = Annotated[
    bool,
    typer.Option(
        "--count-flagged",
        help="Count a flagged candidate (correct, with a flag finding such as side_channel) "
        "at its speedup; by default it counts as a failure.",
    ),
]
DeviceOption = Annotated[
    str, typer.Option("--device", help="Evaluate candidates on auto, cuda or cpu.")
]
LLMOption = Annotated[
    str | None,
    typer.Option("--llm", help="openai:MODEL or anthropic:MODEL, for the llm choices."),
]
BaseURLOption = Annotated[
    str | None, typer.Option("--base-url", help="OpenAI-compatible server URL.")
]
ExecutorOption = Annotated[
    str,
    typer.Option(
        "--executor", help="Where evaluations run: local (a worker per GPU) or ray (a cluster)."
    ),
]
WorkersOption = Annotated[
    int | None,
    typer.Option(
        "--workers",
        min=1,
        help="Workers (default: one per visible GPU, else one CPU worker); with ray, the most "
        "jobs at once.",
    ),
]
RayAddressOption = Annotated[
    str | None,
    typer.Option(
        "--ray-address",
        help="Ray cluster to join: auto, HOST:PORT or ray://HOST:PORT (default: a local one).",
    ),
]


def learn_command(
    store: Annotated[
        Path, typer.Option("--store", help="SQLite store: recordings, caches and studies.")
    ],
    study: Annotated[str, typer.Option("--study", help="Study name (continue it with --resume).")],
    problems: Annotated[
        Path | None,
        typer.Option(
            "--problems",
            help="Problems: file, folder, KernelBench or JSONL (default: all in the recordings).",
        ),
    ] = None,
    recordings: RecordingFilesOption = None,
    evaluations: EvaluationsOption = None,
    evaluated_device: EvaluatedDeviceOption = "",
    train: Annotated[
        str,
        typer.Option(
            "--train",
            help="Training problems: a fraction (0.7), a count (10) or names (a,b); the rest "
            "are the held-out validation set.",
        ),
    ] = "0.7",
    budget: Annotated[
        float, typer.Option("--budget", min=0.0, help="Profiling budget per problem, seconds.")
    ] = 20.0,
    rewriter: RewriterOption = "rules",
    proposer: ProposerOption = ProposerKind.search,
    iterations: Annotated[
        int, typer.Option("--iterations", min=0, help="Rounds of proposals in the study.")
    ] = 10,
    resume: Annotated[
        bool, typer.Option("--resume", help="Continue the study after its last trial.")
    ] = False,
    device: DeviceOption = "auto",
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    recorded_device: RecordedDeviceOption = "",
    start: Annotated[
        str, typer.Option("--start", help="Start tree: a JSON file or a fixed tree name.")
    ] = "none",
    seed: Annotated[int, typer.Option("--seed", help="Seed of the split and the proposer.")] = 0,
    patience: Annotated[
        int, typer.Option("--patience", min=1, help="Stop after K rounds without an accept.")
    ] = 3,
    time_limit: Annotated[
        float | None, typer.Option("--time-limit", min=0.0, help="Stop this run after S seconds.")
    ] = None,
    edits_per_round: EditsPerRoundOption = 6,
    objective: ObjectiveOption = "geomean_speedup",
    cost_weight: CostWeightOption = 0.0,
    count_flagged: CountFlaggedOption = False,
    noise_floor: Annotated[
        float, typer.Option("--noise-floor", min=0.0, help="Smallest relative improvement.")
    ] = 0.01,
    llm: LLMOption = None,
    base_url: BaseURLOption = None,
    out: Annotated[
        Path | None, typer.Option("--out", "-o", help="Write the learned tree as JSON.")
    ] = None,
) -> None:
    """Learn which metric groups to profile per kernel, from recorded profiles.

    Each round asks the proposer for edits of the tree, scores each edited tree on the training
    problems (replayed profiles, one rewrite and one evaluation per problem, all cached) and
    keeps an edit only when it beats the current tree by more than the timing noise. Every
    trial is stored: kill the run at any point and continue it with --resume.
    """
    from autoprofiler.cli import console, fail, make_executor, replay_device_for
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.learn.learner import LearnConfig, TreeLearner
    from autoprofiler.learn.objective import Objective
    from autoprofiler.learn.scoring import TreeScorer
    from autoprofiler.learn.study import StudyError
    from autoprofiler.profile import RecordedProfiler
    from autoprofiler.rewrite.base import RewriteContext
    from autoprofiler.store import Store, StoreError
    from autoprofiler.tree import TreeError, resolve_tree

    if device not in DEVICES:
        fail(f"--device must be one of {', '.join(DEVICES)}, not {device!r}")
    try:
        objective_ = Objective(
            objective,
            noise_floor=noise_floor,
            cost_weight=cost_weight,
            count_flagged=count_flagged,
        )
        start_tree = resolve_tree(start).validate()
    except (ValueError, TreeError) as exc:
        fail(str(exc))
    try:
        db = Store(store)
    except StoreError as exc:
        fail(str(exc))
    with db, make_executor(executor, workers, ray_address) as pool:
        _import(db, recordings or [], console)
        replayed = replay_device_for(db, evaluations, evaluated_device)
        device_key = choose_recorded_device(db, recorded_device)
        profiler = RecordedProfiler(db, device_key)
        train_set, validation_set = _split(
            recorded_problems(db, problems, profiler, console), train, seed
        )
        eval_device = resolve_device(device)
        scorer = TreeScorer(
            profiler,
            rewriter_from_spec(rewriter, llm, base_url, db),
            db,
            budget_s=budget,
            objective=objective_,
            eval_config=EvalConfig(device=device, replay_device=replayed),
            executor=pool,
            context=RewriteContext(
                device=eval_device, device_name=device_key if eval_device == "cuda" else ""
            ),
        )
        learner = TreeLearner(
            scorer,
            make_proposer(proposer, edits_per_round, llm, base_url, db),
            LearnConfig(iterations, patience, time_limit, seed),
        )
        console.print(
            f"study {study}: {len(train_set)} training and {len(validation_set)} validation "
            f"problems, recordings of {device_key}, budget {budget:g} s per problem",
            highlight=False,
        )
        try:
            result = _run(learner, study, train_set, validation_set, start_tree, resume, console)
        except StudyError as exc:
            fail(str(exc))
    _summary(result, console)
    if out is not None:
        from autoprofiler.tree import save_tree

        save_tree(result.tree, out)
        console.print(f"wrote {out}")


def _import(db: Store, files: list[Path], console: Console) -> None:
    from autoprofiler.cli import fail
    from autoprofiler.profile import ProfilerError, import_recordings

    for file in files:
        try:
            count = import_recordings(file, db)
        except ProfilerError as exc:
            fail(str(exc))
        console.print(f"imported {count} recorded profiles from {file}", highlight=False)


def choose_recorded_device(db: Store, wanted: str) -> str:
    from autoprofiler.cli import fail

    devices = sorted({device for _, device, _, _ in db.iter_profile_records()})
    if wanted:
        if wanted not in devices:
            fail(f"no recordings of {wanted!r} in the store (recorded: {', '.join(devices)})")
        return wanted
    if len(devices) != 1:
        shown = ", ".join(devices) or "none: pass --recordings"
        fail(f"choose the recordings with --recorded-device (recorded: {shown})")
    return devices[0]


def recorded_problems(
    db: Store,
    path: Path | None,
    profiler: RecordedProfiler,
    console: Console,
    levels: str | None = None,
    ids: str | None = None,
) -> list[Problem]:
    """The problems to learn from: those given (or all recorded) with recordings on the
    profiler's device (``levels`` and ``ids`` select among those given)."""
    from autoprofiler.cli import fail, load_or_fail

    if path is not None:
        candidates = load_or_fail(path, levels, ids).problems
    else:
        hashes = dict.fromkeys(
            h for h, d, _, _ in db.iter_profile_records() if d == profiler.device
        )
        candidates = [p for h in hashes if (p := db.get_problem(h)) is not None]
    recorded = [p for p in candidates if profiler.records(p.content_hash)]
    if len(recorded) < len(candidates):
        console.print(
            f"[yellow]skipped {len(candidates) - len(recorded)} problems with no recordings "
            f"on {profiler.device}[/yellow]"
        )
    if not recorded:
        fail(f"no problems with recordings on {profiler.device}")
    return recorded


def train_spec(text: str) -> float | int | list[str]:
    """A ``--train`` value: a count (``10``), a fraction (``0.7``) or names (``a,b``)."""
    try:
        return int(text)
    except ValueError:
        try:
            return float(text)
        except ValueError:
            return [name.strip() for name in text.split(",") if name.strip()]


def _split(problems: list[Problem], train: str, seed: int) -> tuple[list[Problem], list[Problem]]:
    from autoprofiler.cli import fail
    from autoprofiler.learn.split import split_problems

    try:
        return split_problems(problems, train_spec(train), seed)
    except ValueError as exc:
        fail(f"--train {train}: {exc}")


def resolve_device(device: str) -> str:
    if device != "auto":
        return device
    import torch

    return "cuda" if torch.cuda.is_available() else "cpu"


def _llm_client(llm: str | None, base_url: str | None, db: Store, what: str) -> LLMClient:
    from autoprofiler.cli import fail
    from autoprofiler.llm import LLMConfig, LLMError, make_client

    if not llm:
        fail(f"{what} needs --llm openai:MODEL or anthropic:MODEL")
    try:
        return make_client(LLMConfig.from_spec(llm, base_url=base_url), db)
    except LLMError as exc:
        fail(str(exc))


def rewriter_from_spec(spec: str, llm: str | None, base_url: str | None, db: Store) -> Rewriter:
    """The rewriter named by ``--rewriter``: rules, llm, or ``MODULE:NAME`` of a Rewriter
    subclass or factory (called with no arguments)."""
    from autoprofiler.cli import fail, make_rewriter
    from autoprofiler.rewrite.base import Rewriter

    if ":" not in spec:
        return make_rewriter(spec, llm, base_url, db)
    module, _, name = spec.partition(":")
    try:
        target = getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        fail(f"--rewriter {spec}: cannot import: {exc}")
    made = target() if callable(target) else target
    if not isinstance(made, Rewriter):
        fail(f"--rewriter {spec}: gives a {type(made).__name__}, not a Rewriter")
    return made


def make_proposer(
    kind: ProposerKind, edits: int, llm: str | None, base_url: str | None, db: Store
) -> Proposer:
    from autoprofiler.learn.proposers import LLMProposer, LocalSearchProposer

    if kind is ProposerKind.search:
        return LocalSearchProposer(edits_per_round=edits)
    return LLMProposer(_llm_client(llm, base_url, db, "--proposer llm"), edits_per_round=edits)


def _run(
    learner: TreeLearner,
    study: str,
    train: list[Problem],
    validation: list[Problem],
    start: ProfilingTree,
    resume: bool,
    console: Console,
) -> LearnResult:
    """Run the study with a progress bar showing rounds, trials and the best score."""
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

    from autoprofiler.learn.learner import LearnProgress

    columns = (
        SpinnerColumn(),
        TextColumn("{task.description}"),
        BarColumn(),
        MofNCompleteColumn(),
        TextColumn("{task.fields[status]}"),
    )
    with Progress(*columns, console=console) as progress:
        task = progress.add_task(
            f"{study} rounds", total=learner.config.iterations, status="scoring the start tree"
        )

        def show(state: LearnProgress) -> None:
            status = (
                f"trials {state.trials}, accepted {state.accepted}, best {state.best.objective} "
                f"{state.best.value:.4g}"
            )
            progress.update(task, completed=min(state.round, state.rounds), status=status)

        result = learner.learn(study, train, validation, start, resume=resume, on_progress=show)
        progress.update(task, completed=learner.config.iterations)
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


def _summary(result: LearnResult, console: Console) -> None:
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
    console.print(table)
    console.print("learned tree:")
    console.print(export_text(result.tree), highlight=False, markup=False, end="")
    cache = result.cache
    console.print(
        f"{len(result.trials)} trials, {result.accepted} accepted; cache hit rate "
        f"{cache.hit_rate:.0%} ({cache.rewrites - cache.rewrite_hits} rewrites and "
        f"{cache.evaluations_run} evaluations run); {result.wall_s:.1f} s",
        highlight=False,
    )
