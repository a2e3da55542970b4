"""The build lane (``evaluate/build.py``): extension builds run ahead, in real processes.

A real ``nvcc`` build takes a minute; these candidates stand in for one with an import that
writes into the candidate's extension folder (where ``load_inline`` would put its library),
so the tests see which process built, with what environment, and what the timed run found."""

from __future__ import annotations

import time

import pytest

from autoprofiler.evaluate import EvalConfig
from autoprofiler.evaluate.build import BuildLane, lane_for, needs_build
from autoprofiler.evaluate.runner import candidate_folder
from autoprofiler.execute import evaluate_many
from autoprofiler.problem import Problem

PROBLEM = Problem(
    name="lane_relu",
    source="""
import torch
import torch.nn as nn

class Model(nn.Module):
    def forward(self, x):
        return torch.relu(x)

def get_inputs():
    return [torch.randn(64, 64)]

def get_init_inputs():
    return []
""",
    origin="<test>",
)

# Stands in for `load_inline(...)` at import: the build run (no GPU visible) "builds", the
# timed run records whether it found the build already there.
CANDIDATE = """
import os, time
from pathlib import Path
import torch
import torch.nn as nn
# torch.utils.cpp_extension.load_inline would compile here
folder = Path(os.environ["TORCH_EXTENSIONS_DIR"])
folder.mkdir(parents=True, exist_ok=True)
built = folder / "library.so"
in_build_lane = os.environ.get("CUDA_VISIBLE_DEVICES") == ""
with open(folder / "log.txt", "a") as log:
    lane = "build" if in_build_lane else "timed"
    log.write(f"{lane} found={built.exists()} pid={os.getpid()}\\n")
if in_build_lane:
    BEHAVIOUR
    time.sleep(0.3)
    built.write_text("compiled")

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
"""


def _candidate(behaviour: str = "pass") -> str:
    return CANDIDATE.replace("BEHAVIOUR", behaviour)


def _log(root, source) -> list[str]:
    folder, _ = candidate_folder(root, source)
    return (folder / "torch_extensions" / "log.txt").read_text().split()


def test_needs_build():
    assert needs_build("from torch.utils.cpp_extension import load_inline\nm = load_inline(...)")
    assert needs_build("ext = torch.utils.cpp_extension.load(name='x', sources=[])")
    assert not needs_build("import triton\n@triton.jit\ndef k(): pass")


def test_the_timed_run_finds_the_build_the_lane_made(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOPROFILER_HOME", str(tmp_path))
    source = _candidate()
    config = EvalConfig(device="cpu")
    [done] = list(evaluate_many([(PROBLEM, source)], config))
    assert done.result.correct, done.result.failure_message
    lines = _log(tmp_path, source)
    build, timed = lines[0:3], lines[3:6]
    assert build[:2] == ["build", "found=False"] and timed[:2] == ["timed", "found=True"]
    assert build[2] != timed[2]  # two processes


def test_a_failing_or_hanging_build_run_changes_nothing_but_time(tmp_path):
    config = EvalConfig(device="cpu", compile_timeout_s=4.0)
    failing, hanging = _candidate("raise SystemExit(3)"), _candidate("time.sleep(600)")
    with BuildLane(config, tmp_path, workers=2) as lane:
        began = time.monotonic()
        lane.submit(PROBLEM, failing)
        lane.submit(PROBLEM, hanging)
        lane.submit(PROBLEM, hanging)  # once per source
        failed = lane.wait(failing, 60)
        hung = lane.wait(hanging, 60)
        assert time.monotonic() - began < 30
    assert failed is not None and not failed.built and "SystemExit" in failed.message
    assert hung is not None and not hung.built and "no report" in hung.message
    assert _log(tmp_path, hanging).count("build") == 1
    assert lane.wait("never submitted") is None


def test_no_lane_in_a_sandbox_or_when_turned_off(monkeypatch):
    assert lane_for(EvalConfig(device="cpu", sandbox="bwrap")) is None
    monkeypatch.setenv("AUTOPROFILER_BUILD_LANE", "0")
    assert lane_for(EvalConfig(device="cpu")) is None


@pytest.mark.parametrize("source", ["import torch\nclass ModelNew: pass\n"])
def test_a_candidate_without_a_build_is_not_started(tmp_path, source):
    with BuildLane(EvalConfig(device="cpu"), tmp_path) as lane:
        lane.submit(PROBLEM, source)
        assert lane.wait(source) is None


RELU_EXTENSION = r'''
import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

source = """
#include <torch/extension.h>
__global__ void relu_kernel(const float* x, float* y, long n) {
    long i = blockIdx.x * (long)blockDim.x + threadIdx.x;
    if (i < n) y[i] = x[i] > 0.f ? x[i] : 0.f;
}
torch::Tensor relu(torch::Tensor x) {
    auto y = torch::empty_like(x);
    long n = x.numel();
    relu_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
    return y;
}
"""
extension = load_inline(
    name="lane_relu_ext",
    cpp_sources="torch::Tensor relu(torch::Tensor x);",
    cuda_sources=source,
    functions=["relu"],
)


class ModelNew(nn.Module):
    def forward(self, x):
        return extension.relu(x.contiguous())
'''


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU and nvcc")
def test_a_real_extension_builds_in_the_lane_and_its_run_only_loads_it(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOPROFILER_HOME", str(tmp_path))
    config = EvalConfig(device="cuda")
    with BuildLane(config) as lane:
        lane.submit(PROBLEM, RELU_EXTENSION)
        outcome = lane.wait(RELU_EXTENSION, config.compile_timeout_s)
    assert outcome is not None and outcome.built, outcome
    folder, _ = candidate_folder(tmp_path, RELU_EXTENSION)
    assert list((folder / "torch_extensions").rglob("*.so"))  # built where the run looks
    [done] = list(evaluate_many([(PROBLEM, RELU_EXTENSION)], config))
    assert done.result.correct, done.result.failure_message


def test_a_lane_on_a_gpu(monkeypatch):
    from autoprofiler.evaluate import runner

    monkeypatch.setitem(runner._device_cache, "cuda", "cuda:NVIDIA H200")
    lane = lane_for(EvalConfig(device="cuda"))
    assert isinstance(lane, BuildLane)
    lane.close()
