"""The ``autoprofiler`` command. Each command is a thin layer over the public API."""

from __future__ import annotations

import dataclasses
import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

from autoprofiler.learn.cli import (
    CountFlaggedOption,
    EvaluatedDeviceOption,
    EvaluationsOption,
    ExecutorOption,
    RayAddressOption,
    WorkersOption,
)
from autoprofiler.problem import LoadReport, Problem, ProblemError, load_problems

app = typer.Typer(
    help="Learn what to profile when optimizing GPU kernels.",
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    add_completion=False,
)
console = Console(soft_wrap=True)
errors = Console(stderr=True, soft_wrap=True)

StoreOption = Annotated[
    Path, typer.Option("--store", help="SQLite store file (results are cached there).")
]
DEFAULT_STORE = Path(".autoprofiler/store.sqlite")
ProblemsArgument = Annotated[
    Path, typer.Argument(help="Problems: file, folder, KernelBench or JSONL.")
]
LevelsOption = Annotated[str | None, typer.Option(help="KernelBench levels, e.g. 1,2.")]
IdsOption = Annotated[str | None, typer.Option(help="Problem ids, e.g. 1-20,41.")]
RecordingsOption = Annotated[
    list[Path] | None, typer.Option(help="Recordings (.jsonl.gz) to import into the store.")
]
# Also shared, defined in autoprofiler.learn.cli (which this module imports): EvaluationsOption,
# EvaluatedDeviceOption, and for where evaluations run (make_executor), ExecutorOption,
# WorkersOption and RayAddressOption.


def fail(message: str, code: int = 2) -> None:
    """Print one red line and leave with ``code``."""
    errors.print(f"[red]error:[/red] {message}", highlight=False, markup=True)
    raise typer.Exit(code)


def _levels_ids(levels: str | None, ids: str | None) -> tuple[list[int] | None, list[int] | None]:
    def parse(text: str | None, what: str) -> list[int] | None:
        if not text:
            return None
        values: list[int] = []
        try:
            for part in text.split(","):
                if "-" in part:
                    low, high = part.split("-")
                    values.extend(range(int(low), int(high) + 1))
                else:
                    values.append(int(part))
        except ValueError:
            fail(f"--{what} takes numbers and ranges like 1,3,10-20, not {text!r}")
        return values

    return parse(levels, "levels"), parse(ids, "ids")


def load_or_fail(path: Path, levels: str | None = None, ids: str | None = None) -> LoadReport:
    """Load problems for a command, turning a bad path into one error line."""
    level_list, id_list = _levels_ids(levels, ids)
    try:
        report = load_problems(path, level_list, id_list)
    except ProblemError as exc:
        fail(str(exc))
    if not report.problems:
        if len(report.errors) == 1:
            fail(report.errors[0])
        fail(
            f"{path}: no usable problems ({len(report.errors)} rejected; first: {report.errors[0]})"
            if report.errors
            else f"{path}: no problems selected"
        )
    return report


def _print_version(asked: bool) -> None:
    if asked:
        from autoprofiler import __version__

        typer.echo(f"autoprofiler {__version__}")
        raise typer.Exit(0)


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
    version: Annotated[
        bool,
        typer.Option(
            "--version", callback=_print_version, is_eager=True, help="Print the version."
        ),
    ] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )
    from autoprofiler.profile.base import ProfilerError
    from autoprofiler.profile.ncu import options_from_env

    try:
        options_from_env()  # a bad sampling setting stops every command before it starts
    except ProfilerError as exc:
        fail(str(exc))


@app.command()
def problems(
    path: Annotated[
        Path, typer.Argument(help="A .py file, folder, KernelBench checkout or JSONL.")
    ],
    levels: LevelsOption = None,
    ids: IdsOption = None,
) -> None:
    """List the problems that load from PATH, and those that fail and why."""
    level_list, id_list = _levels_ids(levels, ids)
    try:
        report = load_problems(path, level_list, id_list)
    except ProblemError as exc:
        fail(str(exc))
    table = Table(title=f"{len(report.problems)} problems from {path}")
    for column in ("problem", "hash", "origin"):
        table.add_column(column)
    for problem in report.problems:
        table.add_row(problem.key, problem.content_hash, problem.origin)
    console.print(table)
    for message in report.errors:
        errors.print(f"[yellow]rejected:[/yellow] {message}", highlight=False)
    if not report.problems:
        raise typer.Exit(1)


def _candidate_sources(problems: list[Problem], candidate: Path) -> list[tuple[Problem, str]]:
    """Each problem with its candidate: CANDIDATE for one problem, else CANDIDATE/<name>.py."""

    def read(path: Path) -> str:
        try:
            return path.read_text(encoding="utf-8")
        except (OSError, UnicodeDecodeError) as exc:
            fail(f"{path}: cannot read: {exc}")

    if not candidate.is_dir():
        if len(problems) != 1:
            fail(f"{len(problems)} problems: give a folder of <problem name>.py candidates")
        return [(problems[0], read(candidate))]
    found = [(p, candidate / f"{p.name}.py") for p in problems]
    missing = [p.name for p, path in found if not path.is_file()]
    if len(missing) == len(problems):
        fail(f"{candidate}: no <problem name>.py for any of the {len(problems)} problems")
    if missing:
        errors.print(
            f"[yellow]no candidate for {len(missing)} problems:[/yellow] {', '.join(missing)}",
            highlight=False,
        )
    return [(p, read(path)) for p, path in found if path.is_file()]


def make_executor(kind: str, workers: int | None, ray_address: str | None):
    """The executor ``--executor``, ``--workers`` and ``--ray-address`` ask for (a context
    manager), or one error line."""
    from autoprofiler.execute import ExecutorError, open_executor

    try:
        return open_executor(kind, workers, ray_address)
    except ExecutorError as exc:
        fail(str(exc))


def evaluate_all(pairs: list[tuple[Problem, str]], config, executor, db, use_cache: bool = True):
    """``{(problem hash, candidate source): EvalResult}`` for ``pairs``, evaluated on
    ``executor`` (stored as they finish) under a progress line. Ctrl-C keeps what finished and
    leaves with 130; an executor error is one line."""
    from autoprofiler.execute import ExecutorError, evaluate_many

    results = {}
    try:
        with console.status(f"evaluating {len(pairs)} candidates") as status:
            for done in evaluate_many(
                pairs, config, executor=executor, store=db, use_cache=use_cache
            ):
                results[(done.problem.content_hash, done.source)] = done.result
                status.update(f"evaluated {len(results)} of {len(pairs)}; {done.problem.key}")
    except ExecutorError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail(f"interrupted: {len(results)} of {len(pairs)} results kept in the store", 130)
    return results


@app.command(name="eval")
def eval_command(
    problem: Annotated[
        Path, typer.Argument(help="The reference problem (.py), or problems: folder or JSONL.")
    ],
    candidate: Annotated[
        Path,
        typer.Argument(help="The candidate defining ModelNew, or a folder of <problem name>.py."),
    ],
    as_json: Annotated[bool, typer.Option("--json", help="Print the result as JSON.")] = False,
    trials: Annotated[int, typer.Option(help="Correctness trials with fresh inputs.")] = 5,
    atol: Annotated[
        float | None, typer.Option(help="Absolute tolerance (default per dtype).")
    ] = None,
    rtol: Annotated[
        float | None, typer.Option(help="Relative tolerance (default per dtype).")
    ] = None,
    device: Annotated[str, typer.Option(help="auto, cuda or cpu.")] = "auto",
    compile_baseline: Annotated[
        bool, typer.Option("--compile-baseline", help="Also time torch.compile of the reference.")
    ] = False,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    store: StoreOption = DEFAULT_STORE,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Evaluate again.")] = False,
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    count_flagged: CountFlaggedOption = False,
) -> None:
    """Check CANDIDATE against PROBLEM in an isolated worker and time both.

    With many problems, CANDIDATE is a folder holding <problem name>.py for each (what
    optimize --out writes); the evaluations run in parallel on the executor's workers.
    """
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.report.verdict import results_table, verdict_table

    pairs = _candidate_sources(load_or_fail(problem, levels, ids).problems, candidate)
    config = EvalConfig(
        device=device,
        correctness_trials=trials,
        atol=atol,
        rtol=rtol,
        time_compile_baseline=compile_baseline,
    )
    with open_store(store, None) as db, make_executor(executor, workers, ray_address) as pool:
        found = evaluate_all(pairs, config, pool, db, use_cache=not no_cache)
    rows = [(p.key, found[(p.content_hash, source)]) for p, source in pairs]
    if len(rows) == 1 and as_json:
        typer.echo(rows[0][1].to_json())
    elif len(rows) == 1:
        console.print(verdict_table(rows[0][0], candidate.name, rows[0][1]))
    elif as_json:
        typer.echo(json.dumps([{"problem": k, **r.to_dict()} for k, r in rows], indent=1))
    else:
        title = f"{len(rows)} candidates from {candidate}"
        console.print(results_table(title, rows, count_flagged))
    raise typer.Exit(0 if all(r.correct for _, r in rows) else 1)


@app.command()
def baselines(
    path: ProblemsArgument,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    device: Annotated[str, typer.Option(help="auto, cuda or cpu.")] = "auto",
    store: StoreOption = DEFAULT_STORE,
    output: Annotated[Path | None, typer.Option("-o", help="Write the results as JSON.")] = None,
) -> None:
    """Time eager and torch.compile for each problem and check the compiled one is correct."""
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.evaluate.baselines import compiled_candidate
    from autoprofiler.report.verdict import results_table

    report = load_or_fail(path, levels, ids)
    config = EvalConfig(device=device)
    rows = []
    with open_store(store, None) as db:
        for problem in report.problems:
            with console.status(f"{problem.key}: torch.compile vs eager"):
                result = evaluate(problem, compiled_candidate(problem), config, store=db)
            rows.append((problem.key, result))
    console.print(results_table("torch.compile vs eager", rows))
    if output:
        output.write_text(
            json.dumps([{"problem": k, **r.to_dict()} for k, r in rows], indent=1),
            encoding="utf-8",
        )


def _group_list(groups: list[str] | None) -> list[str]:
    return [g.strip() for text in groups or [] for g in text.split(",") if g.strip()]


def _profiling_tree(tree: str | None, groups: list[str]):
    from autoprofiler.tree import Node, ProfilingTree, TreeError, resolve_tree

    try:
        if tree:
            return resolve_tree(tree)
        built = ProfilingTree(Node("n0", tuple(groups)), description="collect the given groups")
        built.validate()
        return built
    except TreeError as exc:
        fail(str(exc))


def open_store(store: Path, recordings: list[Path] | None):
    """The store at ``store`` with ``recordings`` imported into it, or one error line."""
    from autoprofiler.profile import ProfilerError, import_recordings
    from autoprofiler.store import Store, StoreError

    try:
        db = Store(store)
    except StoreError as exc:
        fail(str(exc))
    for file in recordings or []:
        try:
            count = import_recordings(file, db)
        except ProfilerError as exc:  # already names the file
            db.close()
            fail(str(exc))
        except (OSError, ValueError) as exc:
            db.close()
            fail(f"{file}: cannot import recordings: {exc}")
        console.print(f"imported {count} recordings from {file}")
    return db


def replay_device_for(db, files: list[Path] | None, wanted: str = "") -> str | None:
    """Import recorded evaluations into ``db`` and choose the device whose results are
    replayed: ``wanted``, else the only one in ``files``; None (evaluate for real) with
    neither. Bad input is one error line."""
    from autoprofiler.evaluate import EvaluationsFileError, evaluated_devices, import_evaluations

    devices: dict[str, None] = {}
    for file in files or []:
        try:
            imported = import_evaluations(file, db)
        except EvaluationsFileError as exc:
            fail(str(exc))
        devices.update(dict.fromkeys(imported.devices))
        console.print(f"imported {imported.evaluations} recorded evaluations from {file}")
    if wanted:
        if wanted not in evaluated_devices(db):
            recorded = ", ".join(evaluated_devices(db)) or "none"
            fail(f"no evaluations recorded on {wanted!r} in the store (recorded: {recorded})")
        return wanted
    if not files:
        return None
    if len(devices) != 1:
        shown = ", ".join(devices) or "none"
        fail(f"choose the evaluations to replay with --evaluated-device (recorded: {shown})")
    return next(iter(devices))


def _profiler_for(db, device_key: str, replay: bool):
    """Recorded profiles from the store when replaying, else the live profilers."""
    from autoprofiler.profile import RecordedProfiler, default_profiler

    return RecordedProfiler(db, device_key) if replay else default_profiler(device_key)


def current_device_key(fallback: str) -> str:
    import torch

    from autoprofiler.profile import device_key

    return device_key(torch.cuda.get_device_name()) if torch.cuda.is_available() else fallback


@app.command()
def profile(
    path: ProblemsArgument,
    tree: Annotated[
        str | None, typer.Option(help="Profiling tree: a JSON file or a fixed name (full, ...).")
    ] = None,
    groups: Annotated[
        list[str] | None, typer.Option("--groups", "-g", help="Metric groups (repeat or a,b).")
    ] = None,
    budget: Annotated[
        float | None, typer.Option(help="Profiling budget in seconds per problem.")
    ] = None,
    record: Annotated[
        bool, typer.Option("--record", help="Record every given group into the store.")
    ] = False,
    replay: Annotated[
        bool, typer.Option("--replay", help="Replay recorded profiles instead of profiling.")
    ] = False,
    recordings: RecordingsOption = None,
    device: Annotated[
        str, typer.Option(help="Device the recordings are of (default: this GPU, else H200).")
    ] = "",
    levels: LevelsOption = None,
    ids: IdsOption = None,
    store: StoreOption = DEFAULT_STORE,
    quiet: Annotated[bool, typer.Option("--quiet", "-q", help="Only the summary lines.")] = False,
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Profile problems with a tree (or a list of groups) within a budget, or record them.

    --record runs chunks of problems on the executor's workers (one per GPU by default).
    """
    from autoprofiler.profile import GROUPS, ProfilerError, render_profile

    if record and replay:
        fail("--record profiles for real: it cannot take --replay")
    report = load_or_fail(path, levels, ids)
    names = _group_list(groups)
    device_key = device or current_device_key("cpu" if record else "H200")
    with open_store(store, recordings) as db:
        profiler = _profiler_for(db, device_key, replay)
        try:
            if record:
                wanted = names or list(GROUPS)
                with make_executor(executor, workers, ray_address) as pool:
                    done = _record(pool, db, report.problems, wanted, device_key)
                console.print(
                    f"recorded {done.recorded}, already there {done.skipped}, "
                    f"failed {done.failed} ({device_key}, {done.seconds:.0f} s)"
                )
                return
            chosen = _profiling_tree(tree, names)
            for problem in report.problems:
                result = chosen.run(problem, profiler, budget)
                console.rule(problem.key)
                console.print(
                    f"path {' -> '.join(result.path)}; collected "
                    f"{', '.join(result.groups) or 'nothing'}; cost {result.cost_s:.2f} s",
                    highlight=False,
                )
                if not quiet:
                    console.print(render_profile(result, GROUPS), highlight=False, markup=False)
        except ProfilerError as exc:
            fail(str(exc))


def _record(executor, db, problems: list[Problem], groups: list[str], device_key: str):
    """``record_many`` under a progress line; Ctrl-C keeps the chunks that finished."""
    from autoprofiler.execute import ExecutorError, record_many

    try:
        with console.status(f"recording {len(groups)} groups of {len(problems)} problems"):
            return record_many(executor, db, problems, groups, device_key)
    except ExecutorError as exc:
        fail(str(exc))
    except KeyboardInterrupt:
        fail("interrupted: the chunks recorded so far are kept in the store", 130)


def make_rewriter(kind: str, llm: str | None, base_url: str | None, store):
    """The rewriter a command asked for, or one error line.

    ``rules-without-A-B`` is the rule rewriter with transformations A and B left out (the name
    that rewriter gives itself), e.g. ``rules-without-compile_max_autotune``.
    """
    if kind != "llm":
        from autoprofiler.rewrite.rules import RuleRewriter

        try:
            return RuleRewriter.from_name(kind)
        except ValueError:
            fail(f"--rewriter must be rules, rules-without-NAME or llm, not {kind!r}")
        except KeyError as exc:
            fail(f"--rewriter {kind}: {exc.args[0]}")
    from autoprofiler.llm import LLMConfig, LLMError, make_client
    from autoprofiler.rewrite.llm_rewriter import LLMRewriter

    if not llm:
        fail("--rewriter llm needs --llm openai:MODEL, anthropic:MODEL or recorded:PROVIDER:MODEL")
    try:
        return LLMRewriter(make_client(LLMConfig.from_spec(llm, base_url=base_url), store))
    except LLMError as exc:
        fail(str(exc))


def rewrite_context(device: str, profile_device: str, config):
    """What the rewriter is told of the target: the same for ``optimize`` and ``prompts
    export``, so that an exported request is the one ``optimize`` would send."""
    from autoprofiler.rewrite import RewriteContext

    atol, rtol = config.tolerance_for("float32")
    kind = "cpu" if device == "cpu" else "cuda"
    return RewriteContext(device=kind, device_name=profile_device, atol=atol, rtol=rtol)


@app.command()
def optimize(
    path: ProblemsArgument,
    tree: Annotated[
        str, typer.Option(help="Profiling tree: a JSON file or a fixed name (none, full, ...).")
    ] = "none",
    budget: Annotated[
        float | None, typer.Option(help="Profiling budget in seconds per problem.")
    ] = None,
    rewriter: Annotated[
        str, typer.Option(help="rules (built in), rules-without-NAME (one rule left out) or llm.")
    ] = "rules",
    llm: Annotated[
        str | None, typer.Option(help="openai:MODEL or anthropic:MODEL (with --rewriter llm).")
    ] = None,
    base_url: Annotated[
        str | None, typer.Option(help="OpenAI-compatible server URL (vLLM, Ollama, ...).")
    ] = None,
    replay: Annotated[
        bool, typer.Option("--replay", help="Take profiles from recordings in the store.")
    ] = False,
    recordings: RecordingsOption = None,
    evaluations: EvaluationsOption = None,
    evaluated_device: EvaluatedDeviceOption = "",
    profile_device: Annotated[
        str, typer.Option(help="Device of the recordings / roofline (default: this GPU or H200).")
    ] = "",
    device: Annotated[str, typer.Option(help="Evaluate on auto, cuda or cpu.")] = "auto",
    atol: Annotated[float | None, typer.Option(help="Tolerance (default per dtype).")] = None,
    rtol: Annotated[float | None, typer.Option(help="Tolerance (default per dtype).")] = None,
    compile_baseline: Annotated[
        bool, typer.Option("--compile-baseline", help="Also time torch.compile of the reference.")
    ] = False,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    out: Annotated[Path, typer.Option(help="Folder for the candidates written.")] = Path(
        ".autoprofiler/candidates"
    ),
    store: StoreOption = DEFAULT_STORE,
    output: Annotated[Path | None, typer.Option("-o", help="Write results as JSON.")] = None,
    count_flagged: CountFlaggedOption = False,
) -> None:
    """Profile each problem with the tree, rewrite it once, then check and time the candidate."""
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.profile import ProfilerError
    from autoprofiler.report.verdict import optimize_table

    report = load_or_fail(path, levels, ids)
    chosen_tree = _profiling_tree(tree, [])
    config = EvalConfig(device=device, atol=atol, rtol=rtol, time_compile_baseline=compile_baseline)
    context = rewrite_context(device, profile_device, config)
    device_key = profile_device or current_device_key("H200")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with open_store(store, recordings) as db:
        profiler = _profiler_for(db, device_key, replay)
        replayed = replay_device_for(db, evaluations, evaluated_device)
        config = dataclasses.replace(config, replay_device=replayed)
        chosen_rewriter = make_rewriter(rewriter, llm, base_url, db)
        for problem in report.problems:
            with console.status(f"{problem.key}: profiling, rewriting, evaluating"):
                try:
                    profile = chosen_tree.run(problem, profiler, budget)
                except ProfilerError as exc:
                    fail(f"{problem.key}: {exc}")
                candidate = chosen_rewriter.rewrite(problem, profile, context)
                written = out / f"{problem.name}.py"
                if candidate.usable:
                    written.write_text(candidate.source, encoding="utf-8")
                    db.put_candidate(
                        candidate.content_hash,
                        problem.content_hash,
                        candidate.source,
                        candidate.producer,
                        candidate.profile_hash,
                        candidate.info,
                    )
                    result = evaluate(problem, candidate.source, config, store=db)
                else:
                    written, result = None, None
            rows.append((problem, profile, candidate, written, result))
    console.print(optimize_table(rows, count_flagged))
    if output:
        output.write_text(
            json.dumps(
                [
                    {
                        "problem": p.key,
                        "profile_path": prof.path,
                        "profile_groups": prof.groups,
                        "profile_cost_s": prof.cost_s,
                        "candidate": cand.to_dict() | {"written": str(w) if w else None},
                        "result": r.to_dict() if r else None,
                    }
                    for p, prof, cand, w, r in rows
                ],
                indent=1,
            ),
            encoding="utf-8",
        )


def _mount_subcommands() -> None:
    from autoprofiler.bench.cli import bench_command
    from autoprofiler.learn.cli import learn_command
    from autoprofiler.llm.cli import prompts_app, replies_app
    from autoprofiler.report.cli import report_command
    from autoprofiler.tree.cli import tree_app

    app.add_typer(tree_app, name="tree", help="Show, check and draw profiling trees.")
    app.add_typer(prompts_app, name="prompts")
    app.add_typer(replies_app, name="replies")
    app.command(name="learn")(learn_command)
    app.command(name="bench")(bench_command)
    app.command(name="report")(report_command)


_mount_subcommands()
