"""``autoprofiler optimize``: profile each problem with a tree, rewrite it once, then check and
time the candidate; with ``--keep best`` (the default) also the rule rewriter's pick,
torch.compile and the reference, and write the fastest correct one."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

import typer

from autoprofiler.cli.console import fail, print_table
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
    RetimeReferenceOption,
    RewriterOption,
    RtolOption,
    StoreOption,
    TreeOption,
    checked,
    choice,
)
from autoprofiler.cli.profiling import (
    profile_device,
    profiler_for,
    profiling_tree,
    with_recordings,
)
from autoprofiler.cli.progress import Progress, eval_verdict
from autoprofiler.cli.results import emit
from autoprofiler.cli.rewriting import make_rewriter, require_llm, rewrite_context
from autoprofiler.cli.runlog import ResumeOption, final_output, open_run_log, sigterm_as_ctrl_c
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store, replay_device_for

if TYPE_CHECKING:
    from autoprofiler.evaluate import EvalResult
    from autoprofiler.problem import Problem
    from autoprofiler.profile import Profile
    from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter
    from autoprofiler.rewrite.contenders import Contender
    from autoprofiler.store import Store

Row = dict[str, Any]
KEEP = ("best", "rewrite")


def _folder(path: Path) -> None:
    if path.is_file():
        raise ValueError(f"{path} is a file: give the folder to write the candidates to")


def optimize_command(
    ctx: typer.Context,
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
    retime_reference: RetimeReferenceOption = False,
    as_json: JsonOption = False,
    output: OutputOption = None,
    count_flagged: CountFlaggedOption = False,
    resume: ResumeOption = False,
    keep: Annotated[
        str,
        typer.Option(
            "--keep",
            callback=choice(*KEEP),
            help="best: also judge the rule rewriter's pick, torch.compile and the reference, "
            "and write the fastest correct one (flagged ones count with --count-flagged); "
            "rewrite: the rewriter's candidate only.",
        ),
    ] = "best",
) -> None:
    """Profile each problem with the tree, rewrite it once, then check and time the candidate.

    With --keep best (the default) the rule rewriter's pick for the same profile,
    torch.compile of the reference and the reference itself are judged too, and the fastest
    correct one is written (the table's "kept" column says which), so optimize is never
    slower than the reference, nor than torch.compile where that is correct.

    The candidate is told the device it runs on: on a machine without a GPU (--device auto
    or cpu), only what runs on a CPU is considered. Each problem's result is written as it
    finishes to the results log: -o FILE when FILE ends in .jsonl, else
    <store>-optimize.jsonl beside the store (its first line records the options). A run cut
    short keeps what finished; --resume, with the same options, does only the rest.
    """
    from autoprofiler.evaluate import EvalConfig, evaluate, evaluate_compiled_reference
    from autoprofiler.profile import ProfilerError, RecordedProfiler
    from autoprofiler.report.verdict import optimize_table

    require_llm(llm, rewriter)
    problems = load_or_fail(path, levels, ids).problems
    chosen_tree = profiling_tree(tree, [])
    config = EvalConfig(device=device, atol=atol, rtol=rtol, time_compile_baseline=compile_baseline)
    log = open_run_log(ctx, "optimize", store, output, resume)
    rows = []
    with open_store(store, recordings) as db, sigterm_as_ctrl_c():
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

        def optimized(problem: Problem) -> Row:
            try:
                profile = chosen_tree.run(problem, profiler, budget)
            except ProfilerError as exc:
                fail(f"{problem.key}: {exc}")
            candidate = chosen_rewriter.rewrite(problem, profile, context)

            def judged(source: str, compiled_reference: bool = False) -> EvalResult:
                how = evaluate_compiled_reference if compiled_reference else evaluate
                return how(
                    problem, source, config, store=db, use_cache=not no_cache,
                    retime_reference=retime_reference,
                )  # fmt: skip

            if keep == "best":
                return _kept_best(
                    problem, profile, candidate, (chosen_rewriter, context, db),
                    judged, candidates_dir, count_flagged,
                )  # fmt: skip
            written, result = None, None
            if candidate.usable:
                written = _write(candidates_dir, problem, candidate.source)
                candidate.save(db, problem.content_hash)
                result = judged(candidate.source)
            return _row(problem, profile, candidate, written, result)

        todo = [p for p in problems if p.key not in log.done]
        try:
            with Progress("optimize", len(todo)) as progress:
                for problem in problems:
                    if problem.key not in log.done:
                        progress.status(f"{problem.key}: profiling, rewriting, evaluating")
                        log.add(optimized(problem))
                        progress.finished(problem.key, _verdict(log.done[problem.key]))
                    rows.append(_table_row(problem, log.done[problem.key]))
        except KeyboardInterrupt:
            fail(
                f"interrupted: {len(log.done)} of {len(problems)} problems kept in {log.path}; "
                "--resume goes on from there",
                130,
            )
    emit(
        [log.done[problem.key] for problem, *_ in rows],
        as_json=as_json,
        output=final_output(output),
        # A builtin rewriter's flags are no suspicion (see Rewriter.builtin): its speedups count.
        show=lambda: print_table(optimize_table(rows, count_flagged or chosen_rewriter.builtin)),
    )


def _write(folder: Path, problem: Problem, source: str) -> Path:
    written = folder / f"{problem.name}.py"
    written.write_text(source, encoding="utf-8")
    return written


def _kept_best(
    problem: Problem,
    profile: Profile,
    candidate: Candidate,
    rewriting: tuple[Rewriter, RewriteContext, Store],
    judged: Callable[[str, bool], EvalResult],
    folder: Path,
    count_flagged: bool,
) -> Row:
    """Judge every contender (``autoprofiler.rewrite.contenders``), write the best one, and
    the row with the rewriter's own verdict and what was kept. torch.compile of the reference
    (whoever's pick it is) is judged in the trusted reference process (``judged(source,
    True)``), not as a candidate process: it is autoprofiler's own code, and its verdict is
    then stored once per problem."""
    from autoprofiler.rewrite.contenders import best, contenders, reference_source

    rewriter, context, db = rewriting
    running = contenders(problem, profile, context, rewriter, candidate)
    done = []
    for contender in running:
        if contender.candidate is not None:
            contender.candidate.save(db, problem.content_hash)
            result = judged(contender.candidate.source, contender.compiled_reference)
            contender = dataclasses.replace(contender, result=result)
        done.append(contender)
    winner = best(done, count_flagged)
    source = winner.candidate.source if winner.candidate else reference_source(problem)
    written = _write(folder, problem, source)
    own = next((c.result for c in done if c.candidate is candidate), None)
    row = _row(problem, profile, candidate, written if winner.candidate is candidate else None, own)
    row["kept"] = {
        "by": winner.label,
        "speedup": winner.counted(count_flagged),
        "written": str(written),
        "contenders": [_contender_row(c, count_flagged) for c in done],
    }
    return row


def _contender_row(contender: Contender, count_flagged: bool) -> dict:
    result, candidate = contender.result, contender.candidate
    return {
        "by": contender.label,
        "transformation": candidate.info.get("transformation") if candidate else None,
        "counted": contender.counted(count_flagged),
        "result": result.to_dict() if result else None,
    }


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


def _table_row(
    problem: Problem, row: Row
) -> tuple[Problem, Profile, Candidate, Path | None, EvalResult | None, dict | None]:
    """A row as ``optimize_table`` takes it (read back from the log when resumed)."""
    from autoprofiler.evaluate import EvalResult
    from autoprofiler.profile import Profile
    from autoprofiler.rewrite.base import Candidate

    profile = Profile(
        problem.content_hash,
        groups=row["profile_groups"],
        path=row["profile_path"],
        cost_s=row["profile_cost_s"],
    )
    written = row["candidate"].get("written")
    result = EvalResult.from_dict(row["result"]) if row["result"] else None
    return (
        problem,
        profile,
        Candidate.from_dict(row["candidate"]),
        written and Path(written),
        result,
        row.get("kept"),
    )


def _verdict(row: Row) -> str:
    """A row's verdict in a few words, for progress."""
    from autoprofiler.evaluate import EvalResult

    result = EvalResult.from_dict(row["result"]) if row["result"] else None
    said = eval_verdict(result, f"no candidate: {row['candidate']['failure']}")
    kept = row.get("kept")
    if kept:
        said += f"; kept {kept['by']} {kept['speedup']:.2f}x"
    return said
