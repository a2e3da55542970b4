"""``autoprofiler eval``: check candidates against their problems and time both."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from autoprofiler.cli.console import fail, print_table, warn
from autoprofiler.cli.executors import evaluate_all, make_executor
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    AtolOption,
    CompileBaselineOption,
    CountFlaggedOption,
    DeviceOption,
    ExecutorOption,
    IdsOption,
    JsonOption,
    LevelsOption,
    NoCacheOption,
    OutputOption,
    RayAddressOption,
    RtolOption,
    StoreOption,
    WorkersOption,
    checked,
    must_exist,
)
from autoprofiler.cli.results import emit, keyed
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store
from autoprofiler.problem import Problem


def candidate_sources(problems: list[Problem], candidate: Path) -> list[tuple[Problem, str]]:
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
        warn(f"no candidate for {len(missing)} problems: {', '.join(missing)}")
    return [(p, read(path)) for p, path in found if path.is_file()]


def eval_command(
    problem: Annotated[
        Path,
        typer.Argument(
            callback=checked(must_exist),
            help="The reference problem (.py), or problems: a folder or a JSONL file.",
        ),
    ],
    candidate: Annotated[
        Path,
        typer.Argument(
            callback=checked(must_exist),
            help="The candidate defining ModelNew, or a folder of <problem name>.py.",
        ),
    ],
    as_json: JsonOption = False,
    output: OutputOption = None,
    trials: Annotated[
        int, typer.Option("--trials", min=1, help="Correctness trials with fresh inputs.")
    ] = 5,
    atol: AtolOption = None,
    rtol: RtolOption = None,
    device: DeviceOption = "auto",
    compile_baseline: CompileBaselineOption = False,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    store: StoreOption = DEFAULT_STORE,
    no_cache: NoCacheOption = False,
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
    count_flagged: CountFlaggedOption = False,
) -> None:
    """Check CANDIDATE against PROBLEM in an isolated worker and time both.

    With many problems, CANDIDATE is a folder holding <problem name>.py for each (what
    optimize --candidates-dir writes); the evaluations run in parallel on the executor's
    workers. Exits 1 when a candidate is not correct.
    """
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.report.verdict import results_table, verdict_table

    pairs = candidate_sources(load_or_fail(problem, levels, ids).problems, candidate)
    config = EvalConfig(
        device=device,
        correctness_trials=trials,
        atol=atol,
        rtol=rtol,
        time_compile_baseline=compile_baseline,
    )
    with open_store(store) as db, make_executor(executor, workers, ray_address) as pool:
        rows = evaluate_all(pairs, config, pool, db, use_cache=not no_cache)
    if len(rows) == 1:
        key, result = rows[0]
        emit(
            result.to_dict(),
            as_json=as_json,
            output=output,
            show=lambda: print_table(verdict_table(key, candidate.name, result)),
            text=result.to_json(),
        )
    else:
        title = f"{len(rows)} candidates from {candidate}"
        emit(
            keyed(rows),
            as_json=as_json,
            output=output,
            show=lambda: print_table(results_table(title, rows, count_flagged)),
        )
    raise typer.Exit(0 if all(r.correct for _, r in rows) else 1)
