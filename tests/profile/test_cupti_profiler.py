"""CuptiProfiler: the real worker's failure without a GPU, and the parent's side (pipes,
deadlines, parsing, falling back to ncu) driven by answers a real worker gave on the H200
(``tests/data/cupti/``: a worker's transcript, ``CuptiOptions.transcript``, of KernelBench
L1/23 on the H200 with SpeedOfLight, MemoryWorkloadAnalysis, then Occupancy + LaunchStats, with
user replay, and ``_kernel`` the same steps with kernel replay, both from one run; replayed by
``cupti_replay_worker.py``)."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from autoprofiler.problem import Problem, load_problems
from autoprofiler.profile import RecordedProfiler, cupti_worker, import_recordings
from autoprofiler.profile.base import GroupCost, Profile, ProfilerError
from autoprofiler.profile.catalogue import get_group, startup_s
from autoprofiler.profile.composite import cupti_replay_from_env
from autoprofiler.profile.cupti import (
    CuptiOptions,
    CuptiProfiler,
    cupti_metrics,
    known_refusals,
    profile_from_answer,
)
from autoprofiler.profile.ncu_report import DURATION
from autoprofiler.store import Store
from autoprofiler.tree import Node, ProfilingTree, run_tree
from autoprofiler.tree.run import STOP_GRACE_S

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
DATA = REPO / "tests" / "data" / "cupti"
REPLAY = HERE / "cupti_replay_worker.py"
SOL = get_group("ncu.SpeedOfLight")
OCC, LAUNCH = get_group("ncu.Occupancy"), get_group("ncu.LaunchStats")
MWA = get_group("ncu.MemoryWorkloadAnalysis")
RECORDED = "23_Softmax"  # KernelBench L1/23, whose worker's answers on the H200 are replayed


def _example(name: str) -> Problem:
    """An example problem (its recorded ncu profiles stand in for ncu), or a stand-in named
    after the problem whose answers are replayed (the replay worker runs nothing)."""
    found = [p for p in load_problems(REPO / "examples" / "problems").problems if p.name == name]
    return found[0] if found else Problem(name=name, source="# answers replayed\n")


def _answers(tmp_path: Path, name: str = RECORDED, edit=None) -> Path:
    """The recorded answers of one problem's worker, as the replay worker reads them."""
    with gzip.open(DATA / f"{name}.jsonl.gz", "rt", encoding="utf-8") as handle:
        lines = [json.loads(line) for line in handle]
    answers = [row["answer"] for row in lines]
    if edit is not None:
        answers = edit(answers)
    path = tmp_path / "answers.jsonl"
    path.write_text("".join(json.dumps(a) + "\n" for a in answers))
    return path


def _replaying(answers: Path, *extra: str, fallback=None) -> CuptiProfiler:
    worker = (sys.executable, str(REPLAY), "--answers", str(answers), *extra)
    return CuptiProfiler(fallback=fallback, options=CuptiOptions(worker=worker))


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the failure without a GPU")
def test_the_real_worker_without_a_gpu_fails_in_one_line() -> None:
    with pytest.raises(ProfilerError, match="no CUDA GPU visible") as info:
        CuptiProfiler().collect(_example(RECORDED), [SOL])
    assert "\n" not in str(info.value)


def test_recorded_answers_give_ncu_shaped_profiles(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path))
    problem = _example(RECORDED)
    profile = profiler.collect(problem, [SOL])
    assert profile.groups == [SOL.name]
    assert profile.group_costs[SOL.name].tool == "cupti"
    assert profile.replay_passes > 0
    assert profile.startup_s > 0 and profile.cost_s >= profile.startup_s
    # names and launch statistics come from the kernels' launch records, in range order
    assert profile.kernels and not any(k.name.startswith("kernel ") for k in profile.kernels)
    assert profile.value("launch__block_size") is not None
    # the duration-weighted aggregate over kernels, as ncu's path computes it
    metric = "sm__throughput.avg.pct_of_peak_sustained_elapsed"
    assert profile.metrics[metric].unit == "%"
    assert 0 < profile.value(metric) <= 100
    assert profile.metrics[metric].group == SOL.name
    # the next steps go to the same worker: no second start-up
    memory = profiler.collect(problem, [MWA])
    assert memory.startup_s == 0 and memory.replay_passes > profile.replay_passes
    assert memory.value("dram__bytes_read.sum") is not None
    assert any(n.startswith(f"{MWA.name} collected with CUPTI") for n in memory.notes)
    launch = profiler.collect(problem, [OCC, LAUNCH])
    assert launch.groups == [OCC.name, LAUNCH.name] and launch.replay_passes == 1
    assert launch.value("launch__registers_per_thread") == profile.value(
        "launch__registers_per_thread"
    )
    profiler.release()


def test_a_step_over_its_limit_is_stopped_and_cut(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path), "--delay-s", "30")
    profile = profiler.collect(_example(RECORDED), [SOL], limit_s=2.0)
    assert profile.cut == [SOL.name] and not profile.metrics
    assert 2.0 <= profile.cost_s <= 2.0 + STOP_GRACE_S
    assert profiler._worker is None  # stopped, not left running


def test_a_tree_over_cupti_spends_at_most_its_budget_and_the_grace(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path), "--delay-s", "30")
    tree = ProfilingTree(Node("n0", ("ncu.SpeedOfLight",)))
    budget = profiler.estimate_cost_s(_example(RECORDED), [SOL]) + 0.5
    profile = run_tree(tree, _example(RECORDED), profiler, budget_s=budget)
    assert profile.cut == [SOL.name]
    assert profile.cost_s <= budget + STOP_GRACE_S


def test_release_stops_the_worker_process(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path))
    profiler.collect(_example(RECORDED), [SOL])
    pid = profiler._worker.process.pid
    profiler.release()
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)


def test_with_complete_a_group_cupti_lacks_metrics_of_goes_to_ncu(tmp_path: Path) -> None:
    """On GH100 (the recorded worker's chip) CUPTI has no SASS instruction counts, which
    MemoryWorkloadAnalysis lists; the H200's recorded ncu profiles stand in for ncu."""
    assert known_refusals("GH100")[MWA.name]
    problem = _example("07_row_softmax")
    with Store(tmp_path / "rec.sqlite") as store:
        import_recordings(REPO / "tests/data/recordings/examples_h200.jsonl.gz", store)
        fallback = RecordedProfiler(store, "H200")
        worker = (sys.executable, str(REPLAY), "--answers", str(_answers(tmp_path)))
        options = CuptiOptions(worker=worker, complete=True)
        profiler = CuptiProfiler(fallback=fallback, options=options)
        profiler.collect(problem, [SOL])  # learns the chip
        profile = profiler.collect(problem, [MWA])
        profiler.release()
    assert profile.groups == [MWA.name]
    assert profile.group_costs[MWA.name].tool != "cupti"
    assert any("collected with ncu" in n and "inst_executed" in n for n in profile.notes)


def test_by_default_cupti_collects_the_rest_and_says_what_it_lacks(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path))
    problem = _example(RECORDED)
    profiler.collect(problem, [SOL])
    request: dict = {}

    def ask(asked: dict, deadline: float) -> dict:
        request.update(asked)
        raise ProfilerError("recorded no answer")

    profiler._worker.ask = ask
    with pytest.raises(ProfilerError, match="recorded no answer"):
        profiler.collect(problem, [MWA])
    assert request["op"] == "collect"
    assert not set(known_refusals("GH100")[MWA.name]) & set(request["metrics"])
    assert profiler._why_partial(MWA).startswith(f"{MWA.name} collected with CUPTI")


def test_no_fallback_for_a_group_cupti_cannot_serve_is_a_clear_error(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path))
    with pytest.raises(ProfilerError, match="no ncu to fall back on"):
        profiler.collect(_example(RECORDED), [get_group("ncu.set.full")])
    profiler.release()


def test_a_worker_that_dies_is_a_one_line_error(tmp_path: Path) -> None:
    def die(answers: list[dict]) -> list[dict]:
        return answers[:1]  # ready, then nothing: the replay worker answers with an error

    profiler = _replaying(_answers(tmp_path, edit=die))
    with pytest.raises(ProfilerError, match="the CUPTI worker") as info:
        profiler.collect(_example(RECORDED), [SOL])
    assert "\n" not in str(info.value)
    profiler.release()


def test_ncu_computed_metrics_are_not_asked_of_cupti() -> None:
    asked = cupti_metrics(OCC)
    assert asked[0] == "gpu__time_duration.sum"
    assert not any(m.startswith("derived_") for m in asked)
    assert cupti_metrics(get_group("static")) == []


def test_recordings_say_which_tool_made_them_and_replay_charges_its_start_up(
    tmp_path: Path,
) -> None:
    with Store(tmp_path / "rec.sqlite") as store:
        import_recordings(REPO / "docs/results/data/kernelbench_h200_cupti.jsonl.gz", store)
        import_recordings(REPO / "tests/data/recordings/examples_h200.jsonl.gz", store)
        replay = RecordedProfiler(store, "H200")
        records = [(h, g) for h, _, g, _ in store.iter_profile_records()]
        cupti_hash = next(
            h for h, g in records if g == SOL.name and store.get_problem(h).level is not None
        )
        cupti = replay.collect(store.get_problem(cupti_hash), [SOL])
        ncu = replay.collect(_example("07_row_softmax"), [SOL])
        startups = {tool: replay.startup_s(tool) for tool in ("cupti", "ncu")}
    assert cupti.group_costs[SOL.name].tool == "cupti"
    assert cupti.startup_s == startups["cupti"] != startups["ncu"]
    assert ncu.group_costs[SOL.name].tool == ""
    assert ncu.startup_s == startups["ncu"]


def test_the_next_problem_loads_into_the_standby_started_while_the_last_worked(
    tmp_path: Path,
) -> None:
    profiler = _replaying(_answers(tmp_path))
    profiler.collect(_example(RECORDED), [SOL])
    standby = profiler._standby[0].process
    assert standby.poll() is None  # started as soon as the first problem's worker was ready
    profiler.release()
    assert standby.poll() is None  # kept for the next problem
    second = Problem(name="another", source="# answers replayed\n")
    profile = profiler.collect(second, [SOL])
    assert profiler._worker is not None and profiler._worker.process.pid == standby.pid
    assert profile.startup_s > 0 and profile.value(DURATION) is not None
    pids = [profiler._worker.process.pid, profiler._standby[0].process.pid]
    profiler.close()
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_without_standby_no_second_worker_is_started(tmp_path: Path) -> None:
    worker = (sys.executable, str(REPLAY), "--answers", str(_answers(tmp_path)))
    profiler = CuptiProfiler(options=CuptiOptions(worker=worker, standby=False))
    profiler.collect(_example(RECORDED), [SOL])
    assert profiler._standby == []
    profiler.close()


def _worker_run(stdin: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "autoprofiler.profile.cupti_worker"]
    return subprocess.run(command, input=stdin, capture_output=True, text=True, timeout=120)


def test_a_standby_nobody_needs_ends_quietly_at_end_of_input() -> None:
    done = _worker_run("")
    assert done.returncode == 0 and done.stdout == ""


def test_a_standby_asked_anything_but_a_problem_fails_in_one_line() -> None:
    done = _worker_run(json.dumps({"op": "collect", "metrics": []}) + "\n")
    answer = json.loads(done.stdout)
    assert done.returncode == 2 and answer["event"] == "fail"
    assert "must load a problem" in answer["error"] and "\n" not in answer["error"]


def test_a_step_holds_the_kernels_seen_and_makes_room_when_ranges_were_dropped() -> None:
    """The worker's choice of counter-data size (CUPTI's start costs about 1 ms per range it
    makes room for), around the CUPTI calls that need a GPU."""
    session = object.__new__(cupti_worker._Session)
    session._launches = [{"name": "kernel"}] * 3
    asked: list[int] = []

    def collect(metrics: list[str], ranges: int, replay: str) -> dict:
        asked.append(ranges)
        dropped = 2 if ranges < cupti_worker.DEFAULT_MAX_RANGES else 0
        return {"metrics": metrics, "dropped": dropped, "replay_s": 1.0, "evaluate_s": 0.25,
                "timings": {"setup_s": 0.5, "forward_s": 1.0}}  # fmt: skip

    session._collect = collect
    answer = session.collect(["gpu__time_duration.sum"])
    assert asked == [3 + cupti_worker.RANGE_MARGIN, cupti_worker.DEFAULT_MAX_RANGES]
    assert answer["dropped"] == 0 and answer["timings"]["dropped_first_s"] == 1.75
    asked.clear()
    assert session.collect(["gpu__time_duration.sum"], max_ranges=7)["dropped"] == 2
    assert asked == [7]  # asked for: no second try
    session._launches = []
    asked.clear()
    session.collect(["gpu__time_duration.sum"])
    assert asked == [cupti_worker.DEFAULT_MAX_RANGES]  # no launch records: the default room


def test_a_first_worker_is_estimated_cold_and_one_from_the_standby_warm(tmp_path: Path) -> None:
    profiler = _replaying(_answers(tmp_path))
    assert profiler.estimated_startup_s() == startup_s("cupti_cold")
    profiler.collect(_example(RECORDED), [SOL])
    assert profiler.last_ready["standby"] is False
    profiler.release()
    assert profiler.estimated_startup_s() == startup_s("cupti") < startup_s("cupti_cold")
    profiler.collect(Problem(name="another", source="# answers replayed\n"), [SOL])
    assert profiler.last_ready["standby"] is True
    profiler.close()


class _PassCounter:
    """Stands in for CUPTI's range profiler: ``stop`` says every pass was submitted after
    ``passes`` of them (never, with None)."""

    def __init__(self, passes: int | None) -> None:
        self.passes, self.started, self.stopped = passes, 0, 0

    def start(self) -> None:
        self.started += 1

    def stop(self) -> bool:
        self.stopped += 1
        return self.passes is not None and self.stopped >= self.passes


def test_user_replay_runs_the_forward_once_per_pass_with_the_cache_flushed_before_each(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The worker's replay loop, around the CUPTI calls and the GPU it needs."""
    monkeypatch.setattr(torch.cuda, "synchronize", lambda: None)
    session = object.__new__(cupti_worker._Session)
    forwards: list[int] = []
    session.model, session.inputs = (lambda: forwards.append(1)), []
    flushes: list[int] = []
    session.flush_l2 = lambda: flushes.append(1)
    profiler = _PassCounter(passes=5)
    assert session._forwards(profiler, "user", 5) == 5
    assert (len(forwards), len(flushes), profiler.started, profiler.stopped) == (5, 5, 5, 5)
    forwards.clear(), flushes.clear()
    kernel = _PassCounter(passes=None)  # kernel replay: CUPTI replays; one forward, no flush
    assert session._forwards(kernel, "kernel", 33) == 1
    assert (len(forwards), len(flushes), kernel.stopped) == (1, 0, 1)
    stuck = _PassCounter(passes=None)
    with pytest.raises(RuntimeError, match="still wanted passes after 5 forwards"):
        session._forwards(stuck, "user", 3)
    assert stuck.stopped == 3 + cupti_worker.EXTRA_FORWARDS
    with pytest.raises(ValueError, match="replay 'application' is not one of user, kernel"):
        session.collect(["gpu__time_duration.sum"], replay="application")


def test_the_replay_is_an_option_sent_to_the_worker_and_recorded_in_the_costs(
    tmp_path: Path,
) -> None:
    def worker(name: str) -> tuple[str, ...]:
        folder = tmp_path / name
        folder.mkdir()
        return (sys.executable, str(REPLAY), "--answers", str(_answers(folder, name)))

    user = CuptiProfiler(options=CuptiOptions(worker=worker(RECORDED)))  # the default: user
    profile = user.collect(_example(RECORDED), [SOL])
    assert profile.group_costs[SOL.name].replay == "user"
    assert Profile.from_dict(profile.to_dict()).group_costs[SOL.name].replay == "user"
    user.close()
    kernel_answers = worker(f"{RECORDED}_kernel")
    kernel = CuptiProfiler(options=CuptiOptions(worker=kernel_answers, replay="kernel"))
    same = kernel.collect(_example(RECORDED), [SOL])
    assert same.group_costs[SOL.name].replay == "kernel"
    kernel.close()
    # one run, both replays: the same SpeedOfLight figures to within a few percent
    for metric in ("gpu__time_duration.sum", "sm__throughput.avg.pct_of_peak_sustained_elapsed"):
        ours, theirs = profile.value(metric), same.value(metric)
        assert ours is not None and theirs is not None and abs(ours - theirs) <= 0.05 * theirs
    by_default = CuptiProfiler(options=CuptiOptions(worker=kernel_answers))  # asks for user
    with pytest.raises(ProfilerError, match="recorded with kernel replay, asked for user"):
        by_default.collect(_example(RECORDED), [SOL])
    by_default.close()
    plain = Profile(problem_hash="h", group_costs={"static": GroupCost(0.1)}).to_dict()
    assert plain["group_costs"]["static"] == {"seconds": 0.1, "replay_passes": 0}


def test_a_step_user_replay_cannot_finish_is_replayed_kernel_by_kernel_and_says_so() -> None:
    """The worker's fallback, around the CUPTI calls that need a GPU; then the note the
    parent writes into the profile."""
    session = object.__new__(cupti_worker._Session)
    session._launches = [{"name": "kernel"}]
    asked: list[str] = []

    def collect(metrics: list[str], ranges: int, replay: str) -> dict:
        asked.append(replay)
        if replay == "user":
            raise cupti_worker.UserReplayIncomplete("CUPTI still wanted passes after 11 forwards")
        return {"metrics": metrics, "dropped": 0, "replay": replay, "replay_s": 0.5,
                "passes": 9, "kernels": [["0", [1.0]]], "launches": []}  # fmt: skip

    session._collect = collect
    answer = session.collect(["gpu__time_duration.sum"], replay="user")
    assert asked == ["user", "kernel"] and answer["replay"] == "kernel"
    assert "after 11 forwards" in answer["user_replay_failed"]
    profile = profile_from_answer(_example(RECORDED), [SOL], answer)
    assert profile.group_costs[SOL.name].replay == "kernel"
    assert any(n.startswith("user replay gave up (CUPTI still wanted") for n in profile.notes)
    asked.clear()
    with pytest.raises(cupti_worker.UserReplayIncomplete):  # kernel replay has no fallback
        session._collect = lambda m, r, replay: collect(m, r, "user")
        session.collect(["gpu__time_duration.sum"], replay="kernel")


def test_a_replay_that_is_not_known_is_a_one_line_error() -> None:
    with pytest.raises(ProfilerError, match="CUPTI replay 'app' is not one of user, kernel"):
        CuptiOptions(replay="app")
    assert cupti_replay_from_env({}) == "user" == CuptiOptions().replay
    assert cupti_replay_from_env({"AUTOPROFILER_CUPTI_REPLAY": " User "}) == "user"
    with pytest.raises(ProfilerError, match="AUTOPROFILER_CUPTI_REPLAY='pass' is not one of"):
        cupti_replay_from_env({"AUTOPROFILER_CUPTI_REPLAY": "pass"})
