"""``RayExecutor`` on a local Ray cluster on the CPU: the same verdicts and recordings as the
``LocalExecutor`` on the example suite, and a task whose worker dies retried, then lost."""

from __future__ import annotations

import os
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from autoprofiler.execute import (
    Executor,
    JobState,
    LocalExecutor,
    RayExecutor,
    evaluate_many,
    record_many,
)
from autoprofiler.execute.base import Job
from autoprofiler.problem import Problem
from autoprofiler.store import Store

from .conftest import CONFIG, suite, verdicts
from .jobs import kill_self

ray = pytest.importorskip("ray")


@pytest.fixture(scope="module")
def cluster() -> Iterator[None]:
    """One local two-CPU cluster for the module (it takes seconds to start); its workers
    import from this checkout and see the examples at their small size."""
    env = {
        "PYTHONPATH": os.pathsep.join(p for p in sys.path if p),
        "AUTOPROFILER_EXAMPLE_SIZE": "small",
        "OMP_NUM_THREADS": "1",
    }
    ray.init(
        num_cpus=2, include_dashboard=False, log_to_driver=False, runtime_env={"env_vars": env}
    )
    yield
    ray.shutdown()


def run_suite(executor: Executor, problems: list[Problem], store_path: Path):
    with Store(store_path) as store:
        results = [
            done.result
            for done in evaluate_many(suite(problems), CONFIG, executor=executor, store=store)
        ]
        record_many(executor, store, problems, ["static"], "cpu")
        keys = {row[0] for row in store.iter_evaluations()}
        records = {(h, g): p["metrics"] for h, _, g, p in store.iter_profile_records()}
    return verdicts(results), keys, records


def test_ray_and_local_executors_agree_on_the_examples(
    cluster: None, examples: list[Problem], tmp_path: Path
) -> None:
    with RayExecutor() as on_ray:
        assert on_ray.slots == 2
        ray_run = run_suite(on_ray, examples[:2], tmp_path / "ray.sqlite")
    with LocalExecutor(workers=2) as local:
        local_run = run_suite(local, examples[:2], tmp_path / "local.sqlite")
    assert ray_run == local_run
    ray_verdicts, keys, records = ray_run
    assert len(ray_verdicts) == len(keys) == 3 and len(records) == 2
    assert sorted(v[1] for v in ray_verdicts.values()) == [False, True, True]
    assert ray.is_initialized()  # an executor leaves a cluster it did not start running


def test_a_ray_task_whose_worker_dies_runs_once_more_then_is_lost(
    cluster: None, tmp_path: Path
) -> None:
    jobs = [
        Job("once", kill_self, (str(tmp_path), "once", 1)),
        Job("always", kill_self, (str(tmp_path), "always", 5)),
    ]
    with RayExecutor(workers=2) as executor:
        results = {r.key: r for r in executor.run(jobs)}
    assert results["once"].state is JobState.DONE and results["once"].value == 2
    always = results["always"]
    assert always.state is JobState.LOST and always.attempts == 2
    assert "2 attempts" in always.error
    assert len(list(tmp_path.glob("always.*.try"))) == 2  # not a third time
