"""Running a tree: paths on real recorded kernels, budget accounting and its edge cases."""

import math

import pytest

from autoprofiler.tree import Condition, Node, ProfilingTree

from .conftest import MEMORY

SOL = "ncu.SpeedOfLight"


@pytest.mark.parametrize(
    ("kernel", "path", "calls", "cost_s"),
    [
        ("softmax", ["n0", "n1"], [("static", SOL), ("ncu.MemoryWorkloadAnalysis",)], 3.5 + 4),
        (
            "gemm",
            ["n0", "n2", "n3"],
            [("static", SOL), ("ncu.ComputeWorkloadAnalysis", "ncu.WarpStateStats")],
            3.5 + 4,
        ),
        (
            "tiny",
            ["n0", "n2", "n4"],
            [("static", SOL), ("ncu.LaunchStats", "ncu.Occupancy")],
            3.5 + 3,
        ),
    ],
)
def test_expert_paths_on_real_kernels(expert, problem, make_profiler, kernel, path, calls, cost_s):
    profiler = make_profiler(kernel)
    profile = expert.run(problem, profiler, budget_s=None)
    assert profile.path == path
    assert profiler.calls == calls  # one collect per node that collects; none for n2
    assert profile.groups == [g for call in calls for g in call]
    assert profile.skipped == []
    assert profile.problem_hash == problem.content_hash
    # The 2 s start-up is paid once per node step that collects, plus each group's cost.
    assert profile.cost_s == pytest.approx(cost_s)
    assert profile.startup_s == pytest.approx(2.0 * len(calls))


def test_real_values_drive_the_branch(expert, problem, make_profiler):
    profile = expert.run(problem, make_profiler("gemm"))
    assert profile.value(MEMORY) == pytest.approx(59.41)  # just under the 60 % threshold


def test_unlimited_budget_and_determinism(expert, problem, make_profiler):
    runs = [expert.run(problem, make_profiler("softmax"), b) for b in (None, math.inf, None)]
    assert runs[0].to_dict() == runs[1].to_dict() == runs[2].to_dict()


def test_missing_metric_takes_false_branch_by_default(expert, problem, make_profiler):
    profile = expert.run(problem, make_profiler(None))
    assert profile.path == ["n0", "n2", "n4"]
    assert profile.value(MEMORY) is None


def test_missing_metric_takes_explicit_missing_branch(problem, make_profiler):
    tree = ProfilingTree(
        Node(
            "n0",
            (SOL,),
            Condition(MEMORY, ">", 60),
            on_true=Node("n1", ("ncu.MemoryWorkloadAnalysis",)),
            on_false=Node("n2", ("ncu.Occupancy",)),
            on_missing=Node("n3", ("ncu.LaunchStats",)),
        )
    )
    assert tree.run(problem, make_profiler(None)).path == ["n0", "n3"]
    assert tree.run(problem, make_profiler("tiny")).path == ["n0", "n2"]


def test_exactly_at_budget_is_allowed(expert, problem, make_profiler):
    profiler = make_profiler("softmax")
    profile = expert.run(problem, profiler, budget_s=3.5)  # start-up 2 + static 0 + SOL 1.5
    assert profile.groups == ["static", SOL]
    assert profile.cost_s == pytest.approx(3.5)
    assert [s.group for s in profile.skipped] == ["ncu.MemoryWorkloadAnalysis"]
    assert "over budget" in profile.skipped[0].reason
    assert profiler.calls == [("static", SOL)]


def test_nothing_affordable_gives_an_empty_profile(expert, problem, make_profiler):
    profiler = make_profiler("softmax")
    profile = expert.run(problem, profiler, budget_s=1.9)  # less than one start-up
    assert profiler.calls == []
    assert profile.metrics == {} and profile.groups == [] and profile.cost_s == 0.0
    assert [s.group for s in profile.skipped] == [
        "static",
        SOL,
        "ncu.LaunchStats",
        "ncu.Occupancy",
    ]
    assert profile.path == ["n0", "n2", "n4"]


def test_startup_is_charged_when_choosing_groups(expert, problem, make_profiler):
    # 3.4 s would cover the groups' own 1.5 s twice over, but not with the 2 s start-up.
    profile = expert.run(problem, make_profiler("softmax"), budget_s=3.4)
    assert profile.groups == ["static"]
    assert [s.group for s in profile.skipped][:1] == [SOL]


def test_budget_charges_what_the_profiler_really_spent(expert, problem, make_profiler):
    # Estimated: n0 costs 2 + 0 + 1.5 = 3.5 s and the leaf n4 2 + 0.5 + 0.5 = 3 s.
    exact = expert.run(problem, make_profiler("tiny"), budget_s=6.5)
    assert exact.groups == ["static", SOL, "ncu.LaunchStats", "ncu.Occupancy"]
    assert exact.cost_s == pytest.approx(6.5)
    # Each call really costs 0.5 s more: after n0 (4 s) only 2.5 s are left for the leaf, where
    # LaunchStats (estimated 2.5 s) really takes 3 s: it is stopped at 2.5 s, and cut.
    over = expert.run(problem, make_profiler("tiny", extra_s=0.5), budget_s=6.5)
    assert over.groups == ["static", SOL]
    assert over.cut == ["ncu.LaunchStats"]
    assert [s.group for s in over.skipped] == ["ncu.Occupancy"]
    assert over.cost_s == pytest.approx(6.5)


def test_cheaper_group_still_collected_after_a_skip(problem, make_profiler):
    tree = ProfilingTree(Node("n0", ("ncu.MemoryWorkloadAnalysis", "ncu.Occupancy")))
    profile = tree.run(problem, make_profiler(None), budget_s=3.0)
    assert profile.groups == ["ncu.Occupancy"]
    assert [s.group for s in profile.skipped] == ["ncu.MemoryWorkloadAnalysis"]


def test_groups_are_collected_once(problem, make_profiler):
    profiler = make_profiler("softmax")
    tree = ProfilingTree(
        Node(
            "n0",
            ("ncu.set.full",),
            Condition(MEMORY, ">", 60),
            on_true=Node("n1", ("ncu.MemoryWorkloadAnalysis", SOL)),
            on_false=Node("n2"),
        )
    )
    profile = tree.run(problem, profiler)
    assert profiler.calls == [("ncu.set.full",)]  # its members are covered by the set
    assert profile.path == ["n0", "n1"]
    tree = ProfilingTree(
        Node(
            "n0",
            (SOL,),
            Condition(MEMORY, ">", 60),
            on_true=Node("n1", (SOL,)),
            on_false=Node("n2"),
        )
    )
    profiler = make_profiler("softmax")
    tree.run(problem, profiler)
    assert profiler.calls == [(SOL,)]


def test_negative_budget_is_refused(expert, problem, make_profiler):
    with pytest.raises(ValueError, match="budget_s"):
        expert.run(problem, make_profiler("tiny"), budget_s=-1)
