"""Recording profiles into a real SQLite store, replaying them, and moving them as a file.

``ScriptedNcu`` stands in for ncu (the thing under test is the recording, not ncu): it answers
``collect_many`` with fixed profiles, a failure, and a problem lost once to a crash elsewhere.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest

from autoprofiler.problem import Problem
from autoprofiler.profile.base import (
    BatchResult,
    GroupCost,
    MetricGroup,
    MetricValue,
    Profile,
    Profiler,
)
from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.profile.composite import CompositeProfiler
from autoprofiler.profile.recorded import RecordedProfiler
from autoprofiler.profile.recording import (
    export_recordings,
    import_recordings,
    record_profiles,
    recorded_failure,
    recorded_startup_s,
)
from autoprofiler.profile.static import StaticProfiler
from autoprofiler.store import Store
from tests.profile.conftest import GEMM, make_problem

NCU_GROUPS = ["ncu.SpeedOfLight", "ncu.Occupancy"]


class ScriptedNcu(Profiler):
    """Profiles every problem in 1.5 s per group, fails ``bad``, loses ``lost`` the first time."""

    name = "ncu"

    def __init__(self) -> None:
        self.calls: list[tuple[list[str], list[str]]] = []
        self.lost_once = False

    def collect(
        self, problem: Problem, groups: Sequence[MetricGroup], limit_s: float | None = None
    ) -> Profile:
        raise NotImplementedError

    def estimated_startup_s(self) -> float:
        return 5.0

    def collect_many(self, problems, groups) -> BatchResult:
        self.calls.append(([p.name for p in problems], [g.name for g in groups]))
        result = BatchResult(wall_s=5.0 + 1.5 * len(problems), startup_s=5.0, device="H200")
        for index, problem in enumerate(problems):
            if problem.name == "bad":
                result.failures[problem.content_hash] = "illegal memory access"
            elif problem.name == "lost" and not self.lost_once:
                self.lost_once = True
                result.not_run.append(problem.content_hash)
            else:
                group = groups[0].name
                result.profiles[problem.content_hash] = Profile(
                    problem_hash=problem.content_hash,
                    metrics={f"{group}.x": MetricValue(float(index), "%", group)},
                    groups=[group],
                    group_costs={group: GroupCost(1.5, 10)},
                    cost_s=1.5,
                    replay_passes=10,
                )
        return result


@pytest.fixture
def problems() -> list[Problem]:
    return [make_problem(name, GEMM + f"    # {name}\n") for name in ("good", "bad", "lost")]


@pytest.fixture
def store(tmp_path: Path) -> Store:
    with Store(tmp_path / "store.sqlite") as opened:
        yield opened


def test_records_each_pair_once_and_resumes(problems, store) -> None:
    ncu = ScriptedNcu()
    report = record_profiles(problems, NCU_GROUPS, store, "H200", ncu, chunk_size=3)
    assert (report.recorded, report.failed, report.skipped) == (4, 2, 0)
    assert len(ncu.calls) == 3  # one per group, plus the retry of the lost problem
    assert ncu.calls[1] == (["lost"], ["ncu.SpeedOfLight"])
    bad = problems[1].content_hash
    assert recorded_failure(store, "H200", "ncu.Occupancy", bad) == "illegal memory access"
    assert recorded_startup_s(store, "H200", "ncu") == 5.0
    assert store.count("profile_records") == 4 and store.get_problem(bad) is not None

    again = record_profiles(problems, NCU_GROUPS, store, "H200", ncu, chunk_size=3)
    assert (again.recorded, again.skipped) == (0, 6) and len(ncu.calls) == 3


def test_deadline_stops_before_a_batch_that_would_overrun(problems, store) -> None:
    report = record_profiles(problems, NCU_GROUPS, store, "H200", ScriptedNcu(), deadline_s=1.0)
    assert report.stopped_early and report.recorded == 0


def test_deadline_passes_over_a_group_that_would_overrun_and_records_cheaper_ones(
    problems, store
) -> None:
    expensive = MetricGroup("ncu.expensive", "ncu", "costs 100 s", cost_s=100.0)
    cheap = GROUPS["ncu.Occupancy"]  # 5 s start-up + 3 x (0.1 + 1.0) s: fits in 30 s
    ncu = ScriptedNcu()
    report = record_profiles(
        problems, [], store, "H200", ncu, deadline_s=30.0, groups=[expensive, cheap]
    )
    assert report.stopped_early
    assert [groups for _, groups in ncu.calls] == [["ncu.Occupancy"], ["ncu.Occupancy"]]
    assert report.recorded == 2 and report.failed == 1


def test_recorded_profiler_replays_merged_groups_with_their_costs(problems, store) -> None:
    record_profiles(problems, NCU_GROUPS, store, "H200", ScriptedNcu())
    replay = RecordedProfiler(store, "H200")
    groups = [GROUPS[name] for name in NCU_GROUPS]
    profile = replay.collect(problems[0], groups)
    assert set(profile.metrics) == {"ncu.SpeedOfLight.x", "ncu.Occupancy.x"}
    assert profile.startup_s == 5.0 and profile.cost_s == pytest.approx(5.0 + 1.5 + 1.5)
    assert profile.replay_passes == 20 and profile.skipped == []
    assert replay.estimate_cost_s(problems[0], groups) == pytest.approx(profile.cost_s)

    failed = replay.collect(problems[1], groups)
    assert failed.metrics == {} and failed.cost_s == 0.0
    assert "illegal memory access" in failed.skipped[0].reason
    unknown = replay.collect(problems[0], [GROUPS["ncu.set.full"]])
    assert unknown.skipped[0].reason == "not recorded on H200"


def test_export_import_round_trip(problems, store, tmp_path: Path) -> None:
    record_profiles(problems, NCU_GROUPS, store, "H200", ScriptedNcu())
    path = tmp_path / "recordings.jsonl.gz"
    assert export_recordings(store, path) == 4
    with Store(tmp_path / "copy.sqlite") as copy:
        assert import_recordings(path, copy) == 4
        assert list(copy.iter_profile_records()) == list(store.iter_profile_records())
        bad = problems[1].content_hash
        assert recorded_failure(copy, "H200", "ncu.SpeedOfLight", bad) == "illegal memory access"
        assert recorded_startup_s(copy, "H200", "ncu") == 5.0
        assert copy.get_problem(problems[0].content_hash) == store.get_problem(
            problems[0].content_hash
        )


def test_import_rejects_other_files(tmp_path: Path, store) -> None:
    from autoprofiler.profile.base import ProfilerError

    path = tmp_path / "not.jsonl.gz"
    path.write_bytes(b"not gzip")
    with pytest.raises(ProfilerError, match="cannot read recordings"):
        import_recordings(path, store)


def test_recording_with_the_real_static_profiler(problems, store) -> None:
    profiler = CompositeProfiler({"static": StaticProfiler("H200")})
    report = record_profiles(problems[:1], ["static"], store, "H200", profiler)
    assert report.recorded == 1
    profile = RecordedProfiler(store, "H200").collect(problems[0], [GROUPS["static"]])
    assert profile.value("static.flops") == 2 * 64 * 32 * 128
