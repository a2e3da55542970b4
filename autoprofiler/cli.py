"""The ``autoprofiler`` command. Each command is a thin layer over the public API."""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Annotated

import typer
from rich.console import Console
from rich.table import Table

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


@app.callback()
def main(
    verbose: Annotated[bool, typer.Option("--verbose", "-v", help="Log progress.")] = False,
) -> None:
    logging.basicConfig(
        level=logging.INFO if verbose else logging.WARNING,
        format="%(levelname)s %(name)s: %(message)s",
    )


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


def _single_problem(path: Path) -> Problem:
    report = load_or_fail(path)
    if len(report.problems) != 1:
        fail(f"{path}: holds {len(report.problems)} problems; name one file")
    return report.problems[0]


@app.command(name="eval")
def eval_command(
    problem: Annotated[Path, typer.Argument(help="The reference problem (.py).")],
    candidate: Annotated[Path, typer.Argument(help="The candidate source defining ModelNew.")],
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
    store: StoreOption = DEFAULT_STORE,
    no_cache: Annotated[bool, typer.Option("--no-cache", help="Evaluate again.")] = False,
) -> None:
    """Check CANDIDATE against PROBLEM in an isolated worker and time both."""
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.report.verdict import verdict_table

    reference = _single_problem(problem)
    try:
        source = candidate.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        fail(f"{candidate}: cannot read: {exc}")
    config = EvalConfig(
        device=device,
        correctness_trials=trials,
        atol=atol,
        rtol=rtol,
        time_compile_baseline=compile_baseline,
    )
    with _open_store(store, None) as db:
        result = evaluate(reference, source, config, store=db, use_cache=not no_cache)
    if as_json:
        typer.echo(result.to_json())
    else:
        console.print(verdict_table(reference.key, candidate.name, result))
    raise typer.Exit(0 if result.correct else 1)


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
    with _open_store(store, None) as db:
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


def _open_store(store: Path, recordings: list[Path] | None):
    """The store at ``store`` with ``recordings`` imported into it, or one error line."""
    from autoprofiler.profile import import_recordings
    from autoprofiler.store import Store, StoreError

    try:
        db = Store(store)
    except StoreError as exc:
        fail(str(exc))
    for file in recordings or []:
        try:
            count = import_recordings(file, db)
        except (OSError, ValueError) as exc:
            db.close()
            fail(f"{file}: cannot import recordings: {exc}")
        console.print(f"imported {count} recordings from {file}")
    return db


def _profiler_for(db, device_key: str, replay: bool):
    """Recorded profiles from the store when replaying, else the live profilers."""
    from autoprofiler.profile import RecordedProfiler, default_profiler

    return RecordedProfiler(db, device_key) if replay else default_profiler(device_key)


def _current_device_key(fallback: str) -> str:
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
) -> None:
    """Profile problems with a tree (or a list of groups) within a budget, or record them."""
    from autoprofiler.profile import (
        GROUPS,
        ProfilerError,
        record_profiles,
        render_profile,
    )

    report = load_or_fail(path, levels, ids)
    names = _group_list(groups)
    device_key = device or _current_device_key("cpu" if record else "H200")
    with _open_store(store, recordings) as db:
        profiler = _profiler_for(db, device_key, replay)
        try:
            if record:
                wanted = names or list(GROUPS)
                done = record_profiles(report.problems, wanted, db, device_key, profiler)
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


def make_rewriter(kind: str, llm: str | None, base_url: str | None, store):
    """The rewriter a command asked for, or one error line."""
    if kind == "rules":
        from autoprofiler.rewrite.rules import RuleRewriter

        return RuleRewriter()
    if kind != "llm":
        fail(f"--rewriter must be rules or llm, not {kind!r}")
    from autoprofiler.llm import LLMConfig, LLMError, make_client
    from autoprofiler.rewrite.llm_rewriter import LLMRewriter

    if not llm:
        fail("--rewriter llm needs --llm openai:MODEL or anthropic:MODEL")
    try:
        return LLMRewriter(make_client(LLMConfig.from_spec(llm, base_url=base_url), store))
    except LLMError as exc:
        fail(str(exc))


@app.command()
def optimize(
    path: ProblemsArgument,
    tree: Annotated[
        str, typer.Option(help="Profiling tree: a JSON file or a fixed name (none, full, ...).")
    ] = "none",
    budget: Annotated[
        float | None, typer.Option(help="Profiling budget in seconds per problem.")
    ] = None,
    rewriter: Annotated[str, typer.Option(help="rules (built in) or llm.")] = "rules",
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
) -> None:
    """Profile each problem with the tree, rewrite it once, then check and time the candidate."""
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.profile import ProfilerError
    from autoprofiler.report.verdict import optimize_table
    from autoprofiler.rewrite import RewriteContext

    report = load_or_fail(path, levels, ids)
    chosen_tree = _profiling_tree(tree, [])
    config = EvalConfig(device=device, atol=atol, rtol=rtol, time_compile_baseline=compile_baseline)
    default_tol = config.tolerance_for("float32")
    context = RewriteContext(
        device="cpu" if device == "cpu" else "cuda",
        device_name=profile_device,
        atol=default_tol[0],
        rtol=default_tol[1],
    )
    device_key = profile_device or _current_device_key("H200")
    out.mkdir(parents=True, exist_ok=True)
    rows = []
    with _open_store(store, recordings) as db:
        profiler = _profiler_for(db, device_key, replay)
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
    console.print(optimize_table(rows))
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
    from autoprofiler.learn.cli import learn_command
    from autoprofiler.tree.cli import tree_app

    app.add_typer(tree_app, name="tree", help="Show, check and draw profiling trees.")
    app.command(name="learn")(learn_command)


_mount_subcommands()
