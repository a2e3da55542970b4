"""``autoprofiler baselines``: torch.compile against eager for every problem."""

from __future__ import annotations

from autoprofiler.cli.console import print_table
from autoprofiler.cli.executors import evaluate_all, make_executor
from autoprofiler.cli.options import (
    DEFAULT_STORE,
    DeviceOption,
    ExecutorOption,
    IdsOption,
    JsonOption,
    LevelsOption,
    NoCacheOption,
    OutputOption,
    ProblemsArgument,
    RayAddressOption,
    StoreOption,
    WorkersOption,
)
from autoprofiler.cli.results import emit, keyed
from autoprofiler.cli.selection import load_or_fail
from autoprofiler.cli.stores import open_store


def baselines_command(
    path: ProblemsArgument,
    levels: LevelsOption = None,
    ids: IdsOption = None,
    device: DeviceOption = "auto",
    store: StoreOption = DEFAULT_STORE,
    no_cache: NoCacheOption = False,
    as_json: JsonOption = False,
    output: OutputOption = None,
    executor: ExecutorOption = "local",
    workers: WorkersOption = None,
    ray_address: RayAddressOption = None,
) -> None:
    """Time eager and torch.compile for each problem and check the compiled one is correct."""
    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.evaluate.baselines import compiled_candidate
    from autoprofiler.report.verdict import results_table

    pairs = [(p, compiled_candidate(p)) for p in load_or_fail(path, levels, ids).problems]
    with open_store(store) as db, make_executor(executor, workers, ray_address) as pool:
        rows = evaluate_all(pairs, EvalConfig(device=device), pool, db, use_cache=not no_cache)
    emit(
        keyed(rows),
        as_json=as_json,
        output=output,
        show=lambda: print_table(results_table("torch.compile vs eager", rows)),
    )
