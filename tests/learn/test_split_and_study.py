"""Splitting problems, and the study records in the store (no evaluation)."""

from __future__ import annotations

import pytest

from autoprofiler.learn import (
    Objective,
    StudyError,
    StudySpec,
    StudyStorage,
    Trial,
    TrialState,
    split_problems,
)
from autoprofiler.problem import Problem
from autoprofiler.store import Store


def problem(name: str) -> Problem:
    return Problem(name=name, source=f"# {name}\n")


PROBLEMS = [problem(f"p{i}") for i in range(10)]


def test_a_split_is_seeded_and_independent_of_order() -> None:
    train, validation = split_problems(PROBLEMS, 0.7, seed=3)
    assert len(train) == 7 and len(validation) == 3
    assert not {p.name for p in train} & {p.name for p in validation}
    again = split_problems(list(reversed(PROBLEMS)), 0.7, seed=3)
    assert again == (train, validation)
    assert split_problems(PROBLEMS, 0.7, seed=4) != (train, validation)


def test_a_split_by_count_or_by_names() -> None:
    assert len(split_problems(PROBLEMS, 4)[0]) == 4
    train, validation = split_problems(PROBLEMS, ["p2", "p5"])
    assert [p.name for p in train] == ["p2", "p5"]
    assert len(validation) == 8
    with pytest.raises(ValueError, match="no problem named p99"):
        split_problems(PROBLEMS, ["p99"])
    with pytest.raises(ValueError, match="cannot train on 11"):
        split_problems(PROBLEMS, 11)


def spec(name: str = "s", budget_s: float = 20.0) -> StudySpec:
    return StudySpec(
        name=name,
        start_tree={"root": {"id": "n0"}},
        train=("a", "b"),
        validation=("c",),
        budget_s=budget_s,
        objective=Objective().to_dict(),
        rewriter="r",
        proposer="p",
        recorded_device="H200",
        evaluation={"device": "cpu"},
        seed=0,
    )


def trial(number: int) -> Trial:
    return Trial(
        number=number,
        round=number,
        index=0,
        round_size=1,
        state=TrialState.INVALID,
        reason="edit 1: unknown node 'x'",
        edit=None,
        parent_hash="t0",
        proposed={"kind": "prune", "node_id": "x"},
    )


def test_a_study_is_created_once_and_resumed_only_with_the_same_settings() -> None:
    storage = StudyStorage(Store(":memory:"))
    started = storage.open(spec(), resume=True)  # nothing to resume yet: started
    assert storage.get("s") == started
    with pytest.raises(StudyError, match="exists"):
        storage.open(spec(), resume=False)
    fresh = StudyStorage(Store(":memory:"))
    fresh.open(spec(), resume=False)
    with pytest.raises(StudyError, match="exists"):
        storage.open(spec(), resume=False)
    assert storage.open(spec(), resume=True) == storage.get("s")
    with pytest.raises(StudyError, match="different budget_s"):
        storage.open(spec(budget_s=5.0), resume=True)


def test_trials_are_written_once_and_read_back_in_order() -> None:
    storage = StudyStorage(Store(":memory:"))
    storage.open(spec(), resume=False)
    for number in range(3):
        storage.add_trial("s", trial(number))
    assert storage.trials("s") == [trial(0), trial(1), trial(2)]
    assert storage.trials("other") == []
    with pytest.raises(StudyError, match="already has trial 1"):
        storage.add_trial("s", trial(1))
