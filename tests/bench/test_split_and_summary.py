"""The bench's pure parts: the stratified split, budgets and cost weights, a table row's numbers
and the Pareto front of learned trees (on outcomes written by hand; no evaluation)."""

from __future__ import annotations

import json
import math

import pytest

from autoprofiler.bench import (
    LEARNED,
    BenchResult,
    BudgetResult,
    CompileBaseline,
    ConfigScore,
    parse_budgets,
    parse_cost_weights,
    stratified_split,
    summarize,
)
from autoprofiler.learn import Objective, ProblemOutcome
from autoprofiler.problem import Problem
from autoprofiler.report.tables import COLUMNS, bench_tables, pareto_rows, row_cells
from autoprofiler.tree.model import Node, ProfilingTree
from autoprofiler.tree.serialize import tree_to_dict
from tests.bench.fixtures import ROOT, flagged_bench


def problem(name: str, level: int | None) -> Problem:
    return Problem(name=name, source=f"# {name}\n", origin="<test>", level=level)


LEVELS = [problem(f"a{i}", 1) for i in range(6)] + [problem(f"b{i}", 2) for i in range(4)]


def test_a_fraction_is_drawn_from_each_level_in_proportion() -> None:
    train, test = stratified_split(LEVELS, 0.5, seed=3)
    assert [p.level for p in train].count(1) == 3 and [p.level for p in train].count(2) == 2
    assert len(test) == 5 and not {p.key for p in train} & {p.key for p in test}
    again, _ = stratified_split(list(reversed(LEVELS)), 0.5, seed=3)
    assert again == train  # seeded, whatever the order of the problems
    other_seeds = {
        tuple(p.name for p in stratified_split(LEVELS, 0.5, seed=s)[0]) for s in range(6)
    }
    assert len(other_seeds) > 1


def test_a_count_and_names_and_test_names() -> None:
    train, test = stratified_split(LEVELS, 4)
    assert len(train) == 4 and len(test) == 6
    assert [p.level for p in train].count(2) in (1, 2)
    train, test = stratified_split(LEVELS, ["a0", "L2/b1"])
    assert [p.name for p in train] == ["a0", "b1"] and len(test) == 8
    train, test = stratified_split(LEVELS, 0.9, test=["a5"])
    assert [p.name for p in test] == ["a5"] and len(train) == 9


@pytest.mark.parametrize(
    ("train", "test", "message"),
    [
        (1.0, (), "must be in (0, 1)"),
        (10, (), "cannot train on 10 of 10"),
        (0, (), "cannot train on 0 of 10"),
        (["zz"], (), "no problem named zz"),
        (0.5, [p.name for p in LEVELS], "no training problems"),
    ],
)
def test_a_split_that_leaves_a_side_empty_is_refused(train, test, message) -> None:
    with pytest.raises(ValueError, match=message.replace("(", r"\(").replace(")", r"\)")):
        stratified_split(LEVELS, train, test)


def test_cost_weights() -> None:
    assert parse_cost_weights("0, 0.01,0.05,0.01") == (0.0, 0.01, 0.05)
    for bad in ("", "0,,1", "x", "-0.1", "inf", "nan"):
        with pytest.raises(ValueError, match="bad cost weight"):
            parse_cost_weights(bad)


def _learned(budget_s, weight: float, collect: list[str], speedup: float, cost_s: float):
    """A BudgetResult whose learned tree (collecting ``collect``) scored ``speedup`` at
    ``cost_s`` on two test problems."""
    score = Objective().score([outcome("a", speedup, cost_s), outcome("b", speedup, cost_s)])
    tree = tree_to_dict(ProfilingTree(Node("n0", tuple(collect))))
    return BudgetResult(
        budget_s=budget_s,
        study=f"s/{budget_s}/{weight}",
        learned=ConfigScore(LEARNED, tree, budget_s, score, (1, 1)),
        train_score=score,
        start_train_score=score,
        trials=(),
        stop_reason="patience",
        cost_weight=weight,
    )


def test_the_pareto_front_keeps_the_learned_trees_nothing_beats_on_both_axes() -> None:
    free = _learned(5.0, 0.0, [], 1.2, 0.0)
    free_again = _learned(20.0, 0.05, [], 1.2, 0.0)  # the same tree: listed once
    sol = _learned(20.0, 0.0, ["ncu.SpeedOfLight"], 1.5, 12.0)
    worse_and_dearer = _learned(None, 0.01, ["ncu.set.basic"], 1.4, 13.0)
    full = _learned(None, 0.0, ["ncu.set.full"], 1.6, 29.0)
    bench = BenchResult(
        name="b",
        spec={},
        names={},
        train=(),
        test=("a", "b"),
        compile_baselines={},
        fixed=(),
        budgets=(free, free_again, sol, worse_and_dearer, full),
    )
    assert bench.pareto_front() == [free, sol, full]
    assert [row[0] for row in pareto_rows(bench)] == ["5 s", "20 s", "unlimited"]
    assert pareto_rows(bench)[1][1:] == ["1.500x", "-", "12.00", "ncu.SpeedOfLight"]
    again = BenchResult.from_dict(bench.to_dict())
    assert [b.cost_weight for b in again.budgets] == [0.0, 0.05, 0.0, 0.01, 0.0]
    assert again.budgets[3].label == "unlimited, cost weight 0.01"


def test_budgets() -> None:
    assert parse_budgets("5, 20,inf,5") == (5.0, 20.0, None)
    assert parse_budgets("2.5s,unlimited") == (2.5, None)
    for bad in ("", "5,,20", "x", "-3", "nan", "1e999"):
        with pytest.raises(ValueError, match="bad budget"):
            parse_budgets(bad)


def outcome(name: str, speedup: float | None, cost_s: float, skipped: tuple[str, ...] = ()):
    return ProblemOutcome(
        problem=name,
        problem_hash=name,
        profile_hash="p",
        groups=("static",),
        skipped=skipped,
        cost_s=cost_s,
        correct=speedup is not None,
        speedup=speedup,
        failure="" if speedup is not None else "wrong_values: off by one",
    )


def test_a_row_counts_failures_as_eager_against_eager_and_torch_compile() -> None:
    outcomes = [
        outcome("a", 2.0, 4.0),
        outcome("b", 1.2, 8.0, ("ncu.set.full",)),
        outcome("c", None, 0.0),
    ]
    config = ConfigScore("x", {}, None, Objective().score(outcomes), (10, 20, 0))
    compiled = {
        "a": CompileBaseline(True, 4.0),
        "b": CompileBaseline(False, None, "build_error: no compiler"),
        "c": CompileBaseline(True, 0.5),
    }
    summary = summarize(config, compiled)
    assert summary.correct_rate == pytest.approx(2 / 3)
    assert summary.fast_1 == pytest.approx(2 / 3) and summary.fast_1_5 == pytest.approx(1 / 3)
    assert summary.geomean_speedup == pytest.approx((2.0 * 1.2 * 1.0) ** (1 / 3))
    # a: 2/4; b: torch.compile failed, so eager is the bar; c: failed (1.0) against 0.5.
    assert summary.vs_compile == pytest.approx(
        math.exp((math.log(0.5) + math.log(1.2) + math.log(2)) / 3)
    )
    assert (summary.mean_cost_s, summary.max_cost_s, summary.mean_metrics) == (4.0, 8.0, 10.0)
    assert summary.incomplete == 1 and summary.not_recorded == 0
    assert config.fits(8.0) and not config.fits(7.9) and config.fits(None)
    assert summarize(config, {"a": compiled["a"]}).vs_compile is None


def test_a_flagged_candidate_is_counted_and_shown_but_not_as_a_speedup_unless_asked() -> None:
    bench = flagged_bench(count_flagged=False)
    (row,) = bench.table(bench.budgets[0])
    summary = row.summary
    assert summary.flagged == 1 and summary.correct_rate == pytest.approx(2 / 3)
    assert summary.fast_1 == pytest.approx(1 / 3) and summary.fast_1_5 == pytest.approx(1 / 3)
    assert summary.geomean_speedup == pytest.approx(2.0 ** (1 / 3))
    cells = dict(zip(COLUMNS, row_cells(row)))
    assert cells["flagged"] == "1" and cells["fast_1"] == "33%"
    (table,) = bench_tables(bench)
    assert "flagged" in [c.header for c in table.columns]
    assert "counted as failures" in str(table.caption)

    counted = flagged_bench(count_flagged=True)
    summary = counted.table(counted.budgets[0])[0].summary
    assert summary.flagged == 1 and summary.fast_1_5 == pytest.approx(2 / 3)
    assert summary.geomean_speedup == pytest.approx(10.0 ** (1 / 3))
    assert "counted at their speedups" in str(bench_tables(counted)[0].caption)


def test_the_results_json_records_the_flagged_rule_and_old_results_load_without_it() -> None:
    for count_flagged in (False, True):
        data = flagged_bench(count_flagged).to_dict()
        assert data["count_flagged"] is count_flagged
        assert data["budgets"][0]["learned"]["score"]["flagged"] == 1
        assert BenchResult.from_dict(data).objective().count_flagged is count_flagged
    committed = json.loads((ROOT / "docs/results/data/reproduction_h200.json").read_text("utf-8"))
    assert committed["count_flagged"] is False
    old = _without(committed, {"count_flagged", "flagged"})  # as written before the rule existed
    assert "flagged" not in json.dumps(old)
    bench = BenchResult.from_dict(old)
    assert bench.objective().count_flagged is False
    for budget in bench.budgets:
        for row in bench.table(budget):
            assert row.summary.flagged == 0
            assert row.summary.geomean_speedup == pytest.approx(row.config.score.geomean_speedup)


def _without(data: object, keys: set[str]) -> object:
    """``data`` (parsed JSON) with ``keys`` dropped from every object in it."""
    if isinstance(data, dict):
        return {k: _without(v, keys) for k, v in data.items() if k not in keys}
    if isinstance(data, list):
        return [_without(v, keys) for v in data]
    return data
