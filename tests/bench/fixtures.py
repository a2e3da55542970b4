"""One real bench for the bench and report tests: four example problems (small size) with
their real H200 recordings, the ``GatedRewriter`` of the learner's tests (the reference itself
when the profile holds ``static.flops``, else a far slower correct candidate), two budgets, and
every candidate and ``torch.compile`` baseline evaluated for real on the CPU. The gated
rewriter's candidates run the reference's own ops, which the evaluator flags on some problems
(``same_op_as_reference``): the bench counts flagged candidates at their speedups
(``--count-flagged``).

Mounted by ``conftest.py`` in ``tests/bench`` and ``tests/report``; it runs once a session.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import pytest
from typer.testing import CliRunner, Result

from autoprofiler.bench import LEARNED, BenchResult, BudgetResult, ConfigScore
from autoprofiler.cli.main import app
from autoprofiler.learn import Objective, ProblemOutcome
from autoprofiler.problem import load_problems
from autoprofiler.tree.model import Node, ProfilingTree
from autoprofiler.tree.serialize import tree_to_dict

ROOT = Path(__file__).resolve().parents[2]
RECORDINGS = ROOT / "tests" / "data" / "recordings" / "examples_h200.jsonl.gz"
PROBLEMS = ("05_elementwise_chain", "09_reduction", "12_transpose_copy", "15_max_pool")
TEST = ("12_transpose_copy", "15_max_pool")
BUDGETS = "5,20"
REWRITER = "tests.learn.gated_rewriter:GatedRewriter"
ENV = {"AUTOPROFILER_EXAMPLE_SIZE": "small", "OMP_NUM_THREADS": "1"}


@dataclass(frozen=True)
class BenchRun:
    """The bench's store, its problems file, the results JSON and what the command printed."""

    store: Path
    problems: Path
    results: Path
    output: str

    def results_data(self) -> dict:
        return json.loads(self.results.read_text(encoding="utf-8"))


def bench_args(store: Path, problems: Path, *extra: str) -> list[str]:
    """The bench command line of the session's bench (``extra`` appended)."""
    return [
        "bench", "--store", str(store), "--problems", str(problems), "--replay",
        "--recordings", str(RECORDINGS), "--test", ",".join(TEST), "--budgets", BUDGETS,
        "--rewriter", REWRITER, "--iterations", "2", "--edits-per-round", "3",
        "--device", "cpu", "--seed", "0", "--count-flagged", *extra,
    ]  # fmt: skip


def invoke(args: list[str], home: Path | None = None) -> Result:
    """Run ``autoprofiler ARGS`` in this process with the bench's environment (candidate
    folders under ``home`` when given)."""
    with pytest.MonkeyPatch.context() as patch:
        for name, value in ENV.items():
            patch.setenv(name, value)
        if home is not None:
            patch.setenv("AUTOPROFILER_HOME", str(home))
        return CliRunner().invoke(app, args)


def write_problems(path: Path) -> Path:
    """The four example problems as a JSONL file."""
    loaded = {p.name: p for p in load_problems(ROOT / "examples" / "problems").problems}
    rows = [{"name": name, "source": loaded[name].source} for name in PROBLEMS]
    path.write_text("".join(json.dumps(row) + "\n" for row in rows), encoding="utf-8")
    return path


_done: list[BenchRun] = []  # each conftest mounts its own fixture: the bench runs once


@pytest.fixture(scope="session")
def bench_run(tmp_path_factory: pytest.TempPathFactory) -> BenchRun:
    if not _done:
        folder = tmp_path_factory.mktemp("bench")
        problems = write_problems(folder / "problems.jsonl")
        results = folder / "results.json"
        args = bench_args(folder / "store.sqlite", problems, "-o", str(results))
        done = invoke(args, folder / "home")
        assert done.exit_code == 0, done.output
        _done.append(BenchRun(folder / "store.sqlite", problems, results, done.output))
    return _done[0]


def flagged_bench(count_flagged: bool) -> BenchResult:
    """A bench of one budget whose learned tree (collecting static) gave three test problems a
    2.0x candidate, a 5.0x one flagged for ``side_channel``, and a failed one."""
    outcomes = [
        ProblemOutcome(
            problem=name,
            problem_hash=name,
            profile_hash="p",
            groups=("static",),
            skipped=(),
            cost_s=1.0,
            correct=speedup is not None,
            speedup=speedup,
            failure="" if speedup is not None else "wrong_values: off by one",
            flagged=flagged,
        )
        for name, speedup, flagged in (
            ("a", 2.0, ()),
            ("b", 5.0, ("side_channel",)),
            ("c", None, ()),
        )
    ]
    objective = Objective(count_flagged=count_flagged)
    score = objective.score(outcomes)
    tree = tree_to_dict(ProfilingTree(Node("n0", ("static",))))
    learned = ConfigScore(LEARNED, tree, 5.0, score, (1, 1, 1))
    return BenchResult(
        name="flagged",
        spec={"objective": objective.to_dict()},
        names={},
        train=(),
        test=("a", "b", "c"),
        compile_baselines={},
        fixed=(),
        budgets=(BudgetResult(5.0, "flagged/budget=5", learned, score, score, (), "patience"),),
    )
