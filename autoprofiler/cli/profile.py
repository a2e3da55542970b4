"""``autoprofiler profile``: run a profiling tree on problems within a budget, or record every
group once per problem into the store."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Any

import typer

from autoprofiler.cli.console import console, fail
from autoprofiler.cli.executors import make_executor, record_all
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    BudgetOption,
    ExecutorOption,
    GroupsOption,
    IdsOption,
    JsonOption,
    LevelsOption,
    OutputOption,
    ProblemsArgument,
    ProfileDeviceOption,
    RayAddressOption,
    RecordingsOption,
    ReplayOption,
    StoreOption,
    TreeOption,
    WorkersOption,
    group_names,
)
from autoprofiler.cli.profiling import (
    profile_device,
    profiler_for,
    profiling_tree,
    with_recordings,
)
from autoprofiler.cli.progress import Progress
from autoprofiler.cli.results import emit
from autoprofiler.cli.runlog import ResumeOption, final_output, open_run_log, sigterm_as_ctrl_c
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store
from autoprofiler.cli.verbosity import quiet

if TYPE_CHECKING:
    from autoprofiler.profile import Profile


def profile_command(
    ctx: typer.Context,
    path: ProblemsArgument,
    tree: TreeOption = None,
    groups: GroupsOption = None,
    budget: BudgetOption = None,
    record: Annotated[
        bool, typer.Option("--record", help="Record every given group into the store.")
    ] = False,
    replay: ReplayOption = False,
    recordings: RecordingsOption = None,
    device: ProfileDeviceOption = "",
    levels: LevelsOption = None,
    ids: IdsOption = None,
    store: StoreOption = DEFAULT_STORE,
    as_json: JsonOption = False,
    output: OutputOption = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    resume: ResumeOption = False,
) -> None:
    """Profile problems with a tree (or a list of groups) within a budget, or record them.

    Prints, per problem, the path taken through the tree, what was collected and what it
    cost, then the profile as a rewriter reads it (-q: the summary lines only). --record runs
    chunks of problems on the executor's workers (one per GPU by default) and skips what the
    store holds already. Profiling with a tree, each problem's profile is written as it
    finishes to the results log: -o FILE when FILE ends in .jsonl, else <store>-profile.jsonl
    beside the store (its first line records the options); --resume, with the same options,
    does only the problems it lacks.
    """
    from autoprofiler.profile import GROUPS, ProfilerError, RecordedProfiler

    if record and replay:
        fail("--record profiles for real: it cannot take --replay")
    if record and tree:
        fail("--record records groups (-g), not a tree")
    if record and resume:
        fail("--record goes on by itself (it skips what the store holds): leave out --resume")
    names = group_names(groups)
    problems = load_or_fail(path, levels, ids).problems
    with open_store(store, recordings) as db:
        device_key = profile_device(db, device, replay, "cpu" if record else "H200")
        if record:
            with make_executor(executor, workers, ray_address) as pool:
                done = record_all(pool, db, problems, names or list(GROUPS), device_key)
            console.print(
                f"recorded {done.recorded}, already there {done.skipped}, "
                f"failed {done.failed} ({device_key}, {done.seconds:.0f} s)",
                highlight=False,
            )
            return
        profiler = profiler_for(db, device_key, replay)
        if isinstance(profiler, RecordedProfiler):
            problems = with_recordings(problems, profiler)
        chosen = profiling_tree(tree, names)
        log = open_run_log(ctx, "profile", store, output, resume)
        todo = [p for p in problems if p.key not in log.done]
        try:
            with sigterm_as_ctrl_c(), Progress("profile", len(todo)) as progress:
                for problem in problems:
                    if problem.key not in log.done:
                        progress.status(f"{problem.key}: profiling")
                        try:
                            result = chosen.run(problem, profiler, budget)
                        except ProfilerError as exc:
                            fail(f"{problem.key}: {exc}")
                        log.add({"problem": problem.key, **result.to_dict()})
                        progress.finished(problem.key, _summary(result))
                    if not as_json:
                        _show(problem.key, log.done[problem.key])
        except KeyboardInterrupt:
            fail(
                f"interrupted: {len(log.done)} of {len(problems)} problems kept in {log.path}; "
                "--resume goes on from there",
                130,
            )
    data = [log.done[p.key] for p in problems]
    emit(data, as_json=as_json, output=final_output(output), show=lambda: None)


def _summary(result: Profile) -> str:
    """What a profile took: the path, the groups collected (and shown), the cost."""
    shown = "" if result.shown is None else f"; shown {', '.join(result.shown.groups) or 'nothing'}"
    return (
        f"path {' -> '.join(result.path)}; collected "
        f"{', '.join(result.groups) or 'nothing'}{shown}; cost {result.cost_s:.2f} s"
    )


def _show(key: str, row: dict[str, Any]) -> None:
    """One problem's profile: a rule, the summary line, then (unless -q) the profile."""
    from autoprofiler.profile import GROUPS, Profile, render_profile

    result = Profile.from_dict({k: v for k, v in row.items() if k != "problem"})
    console.rule(key)
    console.print(_summary(result), highlight=False, markup=False)
    if not quiet():
        console.print(render_profile(result.seen, GROUPS), highlight=False, markup=False)
