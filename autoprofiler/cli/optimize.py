"""``autoprofiler optimize``: profile each problem with a tree, rewrite it once, then check and
time the candidate."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from autoprofiler.cli.console import fail, messages, print_table
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    AtolOption,
    BaseURLOption,
    BudgetOption,
    CompileBaselineOption,
    CountFlaggedOption,
    DeviceOption,
    EvaluatedDeviceOption,
    EvaluationsOption,
    IdsOption,
    JsonOption,
    LevelsOption,
    LLMOption,
    NoCacheOption,
    OutputOption,
    ProblemsArgument,
    ProfileDeviceOption,
    RecordingsOption,
    ReplayOption,
    RewriterOption,
    RtolOption,
    StoreOption,
    TreeOption,
    checked,
)
from autoprofiler.cli.profiling import (
    profile_device,
    profiler_for,
    profiling_tree,
    with_recordings,
)
from autoprofiler.cli.results import emit
from autoprofiler.cli.rewriting import make_rewriter, require_llm, rewrite_context
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store, replay_device_for

if TYPE_CHECKING:
    from autoprofiler.evaluate import EvalResult
    from autoprofiler.problem import Problem
    from autoprofiler.profile import Profile
    from autoprofiler.rewrite.base import Candidate


def _folder(path: Path) -> None:
    if path.is_file():
        raise ValueError(f"{path} is a file: give the folder to write the candidates to")


def optimize_command(
    path: ProblemsArgument,
    tree: TreeOption = "none",
    budget: BudgetOption = None,
    rewriter: RewriterOption = "rules",
    llm: LLMOption = None,
    base_url: BaseURLOption = None,
    replay: ReplayOption = False,
    recordings: RecordingsOption = None,
    evaluations: EvaluationsOption = None,
    evaluated_device: EvaluatedDeviceOption = "",
    profile_device_name: ProfileDeviceOption = "",
    device: DeviceOption = "auto",
    atol: AtolOption = None,
    rtol: RtolOption = None,
    compile_baseline: CompileBaselineOption = False,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    candidates_dir: Annotated[
        Path,
        typer.Option(
            "--candidates-dir",
            callback=checked(_folder),
            help="Folder the candidates are written to, as <problem name>.py.",
        ),
    ] = Path(".autoprofiler/candidates"),
    store: StoreOption = DEFAULT_STORE,
    no_cache: NoCacheOption = False,
    as_json: JsonOption = False,
    output: OutputOption = None,
    count_flagged: CountFlaggedOption = False,
) -> None:
    """Profile each problem with the tree, rewrite it once, then check and time the candidate.

    The candidate is told the device it runs on: on a machine without a GPU (--device auto
    or cpu), only what runs on a CPU is considered.
    """
    from autoprofiler.evaluate import EvalConfig, evaluate
    from autoprofiler.profile import ProfilerError, RecordedProfiler
    from autoprofiler.report.verdict import optimize_table

    require_llm(llm, rewriter)
    problems = load_or_fail(path, levels, ids).problems
    chosen_tree = profiling_tree(tree, [])
    config = EvalConfig(device=device, atol=atol, rtol=rtol, time_compile_baseline=compile_baseline)
    rows = []
    with open_store(store, recordings) as db:
        device_key = profile_device(db, profile_device_name, replay)
        context = rewrite_context(device, device_key, config)
        profiler = profiler_for(db, device_key, replay)
        if isinstance(profiler, RecordedProfiler) and chosen_tree.groups():
            problems = with_recordings(problems, profiler)
        config = dataclasses.replace(
            config, replay_device=replay_device_for(db, evaluations, evaluated_device)
        )
        chosen_rewriter = make_rewriter(rewriter, llm, base_url, db)
        try:
            candidates_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            fail(f"{candidates_dir}: cannot make the folder: {exc.strerror or exc}")
        for problem in problems:
            with messages().status(f"{problem.key}: profiling, rewriting, evaluating"):
                try:
                    profile = chosen_tree.run(problem, profiler, budget)
                except ProfilerError as exc:
                    fail(f"{problem.key}: {exc}")
                candidate = chosen_rewriter.rewrite(problem, profile, context)
                written, result = None, None
                if candidate.usable:
                    written = candidates_dir / f"{problem.name}.py"
                    written.write_text(candidate.source, encoding="utf-8")
                    db.put_candidate(
                        candidate.content_hash,
                        problem.content_hash,
                        candidate.source,
                        candidate.producer,
                        candidate.profile_hash,
                        candidate.info,
                    )
                    result = evaluate(
                        problem, candidate.source, config, store=db, use_cache=not no_cache
                    )
            rows.append((problem, profile, candidate, written, result))
    emit(
        [_row(*row) for row in rows],
        as_json=as_json,
        output=output,
        show=lambda: print_table(optimize_table(rows, count_flagged)),
    )


def _row(
    problem: Problem,
    profile: Profile,
    candidate: Candidate,
    written: Path | None,
    result: EvalResult | None,
) -> dict:
    """One optimized problem as JSON: the profile taken, the candidate, its verdict."""
    return {
        "problem": problem.key,
        "profile_path": profile.path,
        "profile_groups": profile.groups,
        "profile_cost_s": profile.cost_s,
        "candidate": candidate.to_dict() | {"written": str(written) if written else None},
        "result": result.to_dict() if result else None,
    }
