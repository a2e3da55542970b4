"""NcuProfiler: errors without ncu, the command it builds, and its orchestration of the runner.

The orchestration tests use ``fake_ncu.py`` in place of ncu: the runner really runs (on the
CPU) and the kernel rows are a real H200 capture; what is under test is the code around ncu.
"""

from __future__ import annotations

import shutil
import stat
import sys
from pathlib import Path

import pytest

from autoprofiler.profile.base import Profile, ProfilerError
from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.profile.ncu import (
    LAUNCHES_PER_CONFIG_ENV,
    NcuOptions,
    NcuProfiler,
    options_from_env,
)
from autoprofiler.profile.render import render_profile
from autoprofiler.tree import Node, ProfilingTree, run_tree
from autoprofiler.tree.run import STOP_GRACE_S
from tests.profile.conftest import NCU_DATA, make_problem

SOL = GROUPS["ncu.SpeedOfLight"]
OCC = GROUPS["ncu.Occupancy"]
REPO = Path(__file__).resolve().parents[2]


@pytest.fixture
def fake_ncu(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    script = tmp_path / "ncu"
    fake = Path(__file__).with_name("fake_ncu.py")
    script.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{fake}" "$@"\n')
    script.chmod(script.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("FAKE_NCU_TEMPLATE", str(NCU_DATA / "sol_41_Gemm_BatchNorm_GELU_ReLU.csv"))
    monkeypatch.setenv("PYTHONPATH", str(REPO))
    return str(script)


def test_missing_ncu_is_a_one_line_error(gemm) -> None:
    profiler = NcuProfiler(NcuOptions(ncu="ncu-not-installed-here"))
    assert not profiler.available()
    with pytest.raises(ProfilerError, match="not found") as info:
        profiler.collect(gemm, [SOL])
    assert "\n" not in str(info.value)


def test_non_ncu_groups_are_refused(gemm) -> None:
    with pytest.raises(ProfilerError, match="static"):
        NcuProfiler().collect(gemm, [GROUPS["static"]])


def test_command_scopes_by_nvtx_and_merges_groups() -> None:
    profiler = NcuProfiler(NcuOptions(clock_control="none", extra_args=("--cache-control", "all")))
    groups = [SOL, GROUPS["ncu.curated24"], GROUPS["ncu.Roofline"]]
    command = profiler.command(groups, "ap_1/", Path("/t/p.jsonl"), Path("/t/report.ncu-rep"))
    text = " ".join(command)
    assert "--clock-control none" in text and "--nvtx --nvtx-include ap_1/" in text
    assert text.count("--section") == 6 and "--section SpeedOfLight_RooflineChart" in text
    metrics = command[command.index("--metrics") + 1].split(",")
    assert metrics[0] == "gpu__time_duration.sum" and len(metrics) == 24  # curated24 has it
    assert "--cache-control all -o /t/report --force-overwrite" in text
    runner = command[command.index("-m") :]
    assert runner[:4] == ["-m", "autoprofiler.profile.ncu_runner", "--problems", "/t/p.jsonl"]
    assert runner[4:6] == ["--prime-range", "ap_0"]
    full = profiler.command([GROUPS["ncu.set.full"]], "x/", Path("p"), Path("r.ncu-rep"))
    assert full[full.index("--set") + 1] == "full" and "--section" not in full


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="replay mode"):
        NcuOptions(replay_mode="range-ish")


def test_collect_many_splits_ranges_and_reports_failures(
    fake_ncu: str, gemm, conv_relu, failing
) -> None:
    profiler = NcuProfiler(NcuOptions(ncu=fake_ncu, warmup=1), device="H200")
    result = profiler.collect_many([gemm, failing, conv_relu], [SOL, OCC])
    assert set(result.profiles) == {gemm.content_hash, conv_relu.content_hash}
    assert "this problem always fails" in result.failures[failing.content_hash]
    assert result.not_run == []
    profile = result.profiles[gemm.content_hash]
    assert profile.device == "H200" and profile.groups == ["ncu.SpeedOfLight", "ncu.Occupancy"]
    assert len(profile.kernels) == 5 and profile.kernels[0].duration_ns == 10_781_536.0
    assert profile.replay_passes == 50  # 5 kernels x 10 passes from the capture's column
    sol, occ = profile.group_costs["ncu.SpeedOfLight"], profile.group_costs["ncu.Occupancy"]
    assert sol.seconds / occ.seconds == pytest.approx(SOL.cost_s / OCC.cost_s)
    assert sol.seconds + occ.seconds == pytest.approx(profile.cost_s)
    assert profile.metrics["gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed"].group == (
        "ncu.SpeedOfLight"
    )
    assert result.startup_s > 0 and result.wall_s > result.startup_s


def test_collect_charges_the_whole_run(fake_ncu: str, gemm) -> None:
    profile = NcuProfiler(NcuOptions(ncu=fake_ncu, warmup=1)).collect(gemm, [SOL])
    assert profile.cost_s > profile.startup_s > 0
    assert profile.value("gpu__time_duration.sum") == 11_187_904.0


@pytest.mark.parametrize(
    ("mode", "message"),
    [
        ("noperm", "ERR_NVGPUCTRPERM"),
        ("crash", "failed before any problem ran: .*CUDA init failed"),
        ("nokernel", "no CUDA kernel captured"),
    ],
)
def test_run_failures_are_one_line_errors(
    fake_ncu: str, gemm, monkeypatch: pytest.MonkeyPatch, mode: str, message: str
) -> None:
    monkeypatch.setenv("FAKE_NCU_MODE", mode)
    with pytest.raises(ProfilerError, match=message) as info:
        NcuProfiler(NcuOptions(ncu=fake_ncu, warmup=1)).collect(gemm, [SOL])
    assert "\n" not in str(info.value)


def test_timeout_kills_the_run(fake_ncu: str, gemm, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_NCU_MODE", "hang")
    with pytest.raises(ProfilerError, match="timed out after 1 s"):
        NcuProfiler(NcuOptions(ncu=fake_ncu, timeout_s=1.0)).collect(gemm, [SOL])


@pytest.mark.ncu
@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute (ncu) on PATH")
def test_real_ncu_on_the_gpu(gemm) -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    profile = NcuProfiler().collect(gemm, [SOL])
    assert profile.kernels and profile.value("gpu__time_duration.sum") > 0
    assert profile.replay_passes > 0 and profile.cost_s > profile.startup_s > 0


def test_sampling_profiles_few_launches_per_config_and_says_so(fake_ncu: str, gemm) -> None:
    profiler = NcuProfiler(NcuOptions(ncu=fake_ncu, launches_per_config=2))
    command = profiler.command([SOL], "ap_1/", Path("/t/p.jsonl"), Path("/t/r.ncu-rep"))
    text = " ".join(command)
    assert "--filter-mode per-launch-config --launch-count 2" in text
    assert command[-4:] == ["--warmup", "0", "--repeats", "1"]  # warm-ups would use the count
    assert "--prime-range" not in command  # and so would the priming kernel
    assert "--warmup 3" in " ".join(NcuProfiler().command([SOL], "x/", Path("p"), Path("r")))

    profile = profiler.collect(gemm, [SOL])
    assert profile.notes == [
        "ncu sampled the first 2 launches of each launch configuration (5 launches profiled):"
        " kernel counts and aggregates cover those launches, not the whole forward"
    ]
    assert "\nNote: ncu sampled the first 2 launches" in render_profile(profile, GROUPS)
    again = Profile.from_json(profile.to_json())
    assert again.notes == profile.notes and again.merge(profile).notes == profile.notes
    assert NcuProfiler(NcuOptions(ncu=fake_ncu)).collect(gemm, [SOL]).notes == []


def test_sampling_runs_one_problem_per_ncu_process(
    fake_ncu: str, gemm, conv_relu, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = tmp_path / "runs.log"
    monkeypatch.setenv("FAKE_NCU_LOG", str(log))
    sampled = NcuProfiler(NcuOptions(ncu=fake_ncu, launches_per_config=2), device="H200")
    result = sampled.collect_many([gemm, conv_relu, gemm], [SOL])
    assert set(result.profiles) == {gemm.content_hash, conv_relu.content_hash}
    assert all(p.notes for p in result.profiles.values()) and not result.failures
    assert len(log.read_text().splitlines()) == 2  # the launch count is per process
    assert result.wall_s > result.startup_s > 0 and result.device == "H200"
    log.unlink()
    NcuProfiler(NcuOptions(ncu=fake_ncu)).collect_many([gemm, conv_relu], [SOL])
    assert len(log.read_text().splitlines()) == 1  # unsampled: both in one run


def test_sampling_from_the_environment() -> None:
    assert options_from_env({}).launches_per_config == 0
    assert options_from_env({LAUNCHES_PER_CONFIG_ENV: " 3 "}).launches_per_config == 3
    for bad in ("two", "-1", "1.5"):
        with pytest.raises(ProfilerError, match="is not a whole number"):
            options_from_env({LAUNCHES_PER_CONFIG_ENV: bad})
    with pytest.raises(ValueError, match="negative"):
        NcuOptions(launches_per_config=-1)


MANY_LAUNCHES = """
    class Model(nn.Module):
        def forward(self, x):
            for _ in range(40):
                x = torch.tanh(x * 1.01)
            return x

    def get_inputs():
        return [torch.randn(64, 64)]

    def get_init_inputs():
        return []
    """


@pytest.mark.ncu
@pytest.mark.skipif(shutil.which("ncu") is None, reason="needs Nsight Compute (ncu) on PATH")
def test_real_ncu_sampling_captures_the_first_launches_of_each_config() -> None:
    torch = pytest.importorskip("torch")
    if not torch.cuda.is_available():
        pytest.skip("needs a CUDA GPU")
    problem = make_problem("many_launches", MANY_LAUNCHES)
    full = NcuProfiler().collect(problem, [SOL])
    sampled = NcuProfiler(NcuOptions(launches_per_config=4)).collect(problem, [SOL])
    assert sorted(k.count for k in full.kernels) == [40, 40]  # multiplications and tanh
    # Both kernels have one launch configuration (grid, block), so they share the 4 launches.
    assert sorted(k.count for k in sampled.kernels) == [2, 2]
    assert sampled.replay_passes <= full.replay_passes / 10 and sampled.notes


SLOW = """
    class Model(nn.Module):
        def forward(self, a):
            for _ in range(10**8):  # hours on any CPU: 2 cores here run 1e5 in 12 s
                a = torch.tanh(a @ a)
            return a

    def get_inputs():
        return [torch.randn(256, 256) / 16]

    def get_init_inputs():
        return []
    """


def test_a_step_over_its_limit_is_stopped_charged_and_cut(fake_ncu: str) -> None:
    """The runner really runs a forward that takes minutes on the CPU; the limit stops it."""
    slow = make_problem("slow_forward", SLOW)
    profile = NcuProfiler(NcuOptions(ncu=fake_ncu, warmup=0)).collect(slow, [SOL], limit_s=3.0)
    assert profile.cut == [SOL.name]
    assert not profile.metrics
    assert 3.0 <= profile.cost_s <= 3.0 + STOP_GRACE_S
    assert "stopped at the time limit" in profile.notes[0]


def test_a_live_tree_spends_at_most_its_budget_and_the_grace(fake_ncu: str) -> None:
    slow = make_problem("slow_forward", SLOW)
    profiler = NcuProfiler(NcuOptions(ncu=fake_ncu, warmup=0))
    budget = profiler.estimate_cost_s(slow, [SOL]) + 0.5  # admitted on its estimate
    tree = ProfilingTree(Node("n0", ("ncu.SpeedOfLight",)))
    profile = run_tree(tree, slow, profiler, budget_s=budget)
    assert profile.cut == [SOL.name]
    assert profile.cost_s <= budget + STOP_GRACE_S
