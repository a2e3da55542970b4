"""The build lane (``evaluate/build.py``): extension builds run ahead, in real processes.

A real ``nvcc`` build takes a minute; these candidates stand in for one with an import that
writes into the candidate's extension folder (where ``load_inline`` would put its library),
so the tests see which process built, with what environment, and what the timed run found."""

from __future__ import annotations

import os
import time

import pytest

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.evaluate.build import BuildLane, has_triton_kernels, lane_for, needs_build
from autoprofiler.evaluate.runner import candidate_folder, sole_run, worker_env
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
    # A limit the failing run meets even on a machine whose first import of torch is cold
    # (on the H200 a limit of 4 s stopped it before it raised).
    config = EvalConfig(device="cpu", compile_timeout_s=20.0)
    failing, hanging = _candidate("raise SystemExit(3)"), _candidate("time.sleep(600)")
    with BuildLane(config, tmp_path, workers=2) as lane:
        began = time.monotonic()
        lane.submit(PROBLEM, failing)
        lane.submit(PROBLEM, hanging)
        lane.submit(PROBLEM, hanging)  # once per source
        failed = lane.wait(failing, 60)
        hung = lane.wait(hanging, 60)
        assert time.monotonic() - began < 50
    assert failed is not None and not failed.built and "SystemExit" in failed.message
    assert hung is not None and not hung.built and "no report" in hung.message
    assert _log(tmp_path, hanging).count("build") == 1
    assert lane.wait("never submitted") is None


def test_a_build_the_closing_lane_stops_is_stopped_not_failed(tmp_path, caplog):
    hanging = _candidate("time.sleep(600)")
    lane = BuildLane(EvalConfig(device="cpu", compile_timeout_s=300.0), tmp_path, workers=1)
    lane.submit(PROBLEM, hanging)
    deadline = time.monotonic() + 60
    while not (tmp_path.exists() and any(tmp_path.rglob("log.txt"))):  # the run has started
        assert time.monotonic() < deadline
        time.sleep(0.1)
    with caplog.at_level("INFO", logger="autoprofiler.evaluate.build"):
        lane.close()
    outcome = lane.wait(hanging, 5)
    assert outcome is not None and not outcome.built
    assert outcome.message == "the lane closed before it ended"
    assert "build run stopped in" in caplog.text and "failed" not in caplog.text


# Takes torch's own build lock (the baton load_inline takes) in its extension folder; its
# build run then never ends, as an nvcc build that is stopped at its limit.
BATON_CANDIDATE = """
import os, time
from pathlib import Path
import torch
import torch.nn as nn
from torch.utils.file_baton import FileBaton
folder = Path(os.environ["TORCH_EXTENSIONS_DIR"]) / "baton_ext"
folder.mkdir(parents=True, exist_ok=True)
baton = FileBaton(str(folder / "lock"))
if baton.try_acquire():  # load_inline would build here
    if os.environ.get("CUDA_VISIBLE_DEVICES") == "":
        time.sleep(600)
    baton.release()
else:
    baton.wait()

class ModelNew(nn.Module):
    def forward(self, x):
        return x.clamp_min(0)
"""


def test_a_build_run_over_its_time_is_stopped_and_its_lock_does_not_hang_the_timed_run(
    tmp_path, monkeypatch, caplog
):
    # Seen on the H100: build runs stopped by a closing lane left their locks, and the next
    # command's runs of those candidates waited on them for the whole compile limit.
    monkeypatch.setenv("AUTOPROFILER_HOME", str(tmp_path))
    config = EvalConfig(device="cpu", compile_timeout_s=20.0)
    with caplog.at_level("INFO", logger="autoprofiler"):
        [done] = list(evaluate_many([(PROBLEM, BATON_CANDIDATE)], config))
    assert done.result.correct, done.result.failure_message
    assert "build run stopped in" in caplog.text and "its timed run was due" in caplog.text
    assert "removed the build lock a stopped run left" in caplog.text


def test_only_a_run_alone_removes_the_build_locks_and_never_through_a_link(tmp_path):
    work_dir, _ = candidate_folder(tmp_path, "class ModelNew: pass\n")
    extensions, elsewhere = work_dir / "torch_extensions", tmp_path / "elsewhere"
    for folder in (extensions / "a", extensions / "b", elsewhere):
        folder.mkdir(parents=True)
        (folder / "lock").touch()
    (extensions / "linked").symlink_to(elsewhere)
    env = {"TORCH_EXTENSIONS_DIR": str(extensions)}
    with sole_run(work_dir, env) as alone:
        assert alone
        assert not (extensions / "a" / "lock").exists() and not (extensions / "b" / "lock").exists()
        assert (elsewhere / "lock").exists()
        (extensions / "a" / "lock").touch()  # this run's own build
        with sole_run(work_dir, env) as second:  # another run of the candidate, meanwhile
            assert not second
        assert (extensions / "a" / "lock").exists()
    with sole_run(work_dir, env) as alone:
        assert alone and not (extensions / "a" / "lock").exists()


def test_each_candidate_has_an_extension_folder_of_its_own_under_the_callers(tmp_path, monkeypatch):
    # One folder for all: two candidates with an extension of one name built over each other.
    monkeypatch.setenv("TORCH_EXTENSIONS_DIR", str(tmp_path / "extensions"))
    config = EvalConfig(device="cpu")
    folders = [
        worker_env(candidate_folder(tmp_path, source)[0], config)[0]["TORCH_EXTENSIONS_DIR"]
        for source in ("a = 1\n", "b = 2\n")
    ]
    assert folders[0] != folders[1]
    assert all(os.path.dirname(folder) == str(tmp_path / "extensions") for folder in folders)
    monkeypatch.delenv("TORCH_EXTENSIONS_DIR")  # none named: the candidate's folder's
    work_dir = candidate_folder(tmp_path, "a = 1\n")[0]
    env = worker_env(work_dir, config)[0]
    assert env["TORCH_EXTENSIONS_DIR"] == str(work_dir / "torch_extensions")


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


TRITON_RELU = """
import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def relu_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.maximum(tl.load(x_ptr + offsets, mask=mask), 0.0), mask=mask)


@triton.autotune(
    configs=[
        triton.Config({"BLOCK": 256}, num_warps=4),
        triton.Config({"BLOCK": 1024}, num_warps=8),
    ],
    key=["n"],
)
@triton.jit
def double_kernel(x_ptr, y_ptr, n, BLOCK: tl.constexpr):
    offsets = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offsets < n
    tl.store(y_ptr + offsets, tl.load(x_ptr + offsets, mask=mask) * 2.0, mask=mask)


class ModelNew(nn.Module):
    def forward(self, x):
        if not x.is_cuda:
            raise RuntimeError("this candidate runs on the GPU only")
        x = x.contiguous()
        n = x.numel()
        y = torch.empty_like(x)
        relu_kernel[(triton.cdiv(n, 1024),)](x, y, n, BLOCK=1024)
        z = torch.empty(x.shape, device="cuda")
        double_kernel[lambda meta: (triton.cdiv(n, meta["BLOCK"]),)](y, z, n)
        AFTER
        return z * 0.5
"""


def _triton_candidate(after: str = "pass") -> str:
    return TRITON_RELU.replace("AFTER", after)


def _kernel_files(root, source) -> set[str]:
    folder, _ = candidate_folder(root, source)
    return {str(p.relative_to(folder)) for p in (folder / "triton_cache").rglob("*.cubin")}


def test_has_triton_kernels():
    assert has_triton_kernels(_triton_candidate())
    assert has_triton_kernels("import triton\n\n@triton.heuristics({})\n@triton.jit\ndef k(): pass")
    assert not has_triton_kernels("import triton  # a comment: @triton.jit\nx = 1")


def test_triton_kernels_compile_in_the_lane_with_no_gpu(tmp_path, monkeypatch):
    pytest.importorskip("triton.backends.nvidia.driver", reason="Triton's CUDA backend")
    monkeypatch.setenv("TRITON_INTERPRET", "0")  # compiled for the GPU named, not interpreted
    # Inductor names a Triton cache in os.environ once it has compiled in this process (an
    # earlier test's torch.compile); a caller's cache would then be every candidate's.
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)
    source = _triton_candidate()
    with BuildLane(EvalConfig(device="cpu"), tmp_path, triton_target="9.0") as lane:
        lane.submit(PROBLEM, source)
        outcome = lane.wait(source, 240)
    assert outcome is not None and outcome.built, outcome
    # the plain kernel, and the autotuned one at each of its two configurations
    assert outcome.triton_kernels == 3 and not outcome.message, outcome
    kernels = _kernel_files(tmp_path, source)
    assert sorted(name.rsplit("/", 1)[1] for name in kernels) == [
        "double_kernel.cubin", "double_kernel.cubin", "relu_kernel.cubin",
    ]  # fmt: skip


def test_a_dry_run_that_stops_keeps_what_it_compiled(tmp_path, monkeypatch):
    pytest.importorskip("triton.backends.nvidia.driver", reason="Triton's CUDA backend")
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    source = _triton_candidate("z.sum().item()  # needs data: a meta tensor has none")
    with BuildLane(EvalConfig(device="cpu"), tmp_path, triton_target="9.0") as lane:
        lane.submit(PROBLEM, source)
        outcome = lane.wait(source, 240)
    assert outcome is not None and outcome.built
    assert outcome.triton_kernels == 3 and "stopped" in outcome.message, outcome


COUNT_COMPILES = """
import importlib.util, json, sys
import torch, triton
from autoprofiler.evaluate.triton_build import TritonCompiles, prebuild_triton

compiles = TritonCompiles()
assert compiles.listen()
counts = []
for name in ("first", "second"):  # the second: new JIT functions, the same source and cache
    spec = importlib.util.spec_from_file_location(name, sys.argv[1])
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    prebuild_triton(module.ModelNew(), [torch.randn(64, 64, device="meta")], (9, 0))
    counts.append([compiles.kernels, compiles.cache_hits, compiles.seconds > 0])
print(json.dumps(counts))
"""


def test_triton_compiles_are_counted_with_their_cache_hits(tmp_path):
    import json
    import os
    import subprocess
    import sys

    pytest.importorskip("triton.backends.nvidia.driver", reason="Triton's CUDA backend")
    candidate = tmp_path / "candidate.py"
    candidate.write_text(_triton_candidate())
    env = {**os.environ, "TRITON_CACHE_DIR": str(tmp_path / "cache"), "TRITON_INTERPRET": "0"}
    done = subprocess.run([sys.executable, "-c", COUNT_COMPILES, str(candidate)], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    # three kernels compiled, then the same three found in the cache
    assert json.loads(done.stdout.splitlines()[-1]) == [[3, 0, True], [6, 3, True]]


def test_triton_is_built_only_for_a_gpu(tmp_path):
    with BuildLane(EvalConfig(device="cpu"), tmp_path) as lane:
        assert lane.triton_target is None  # on the CPU Triton interprets: nothing to build
        lane.submit(PROBLEM, _triton_candidate())
        assert lane.wait(_triton_candidate()) is None


@pytest.mark.skipif(not __import__("torch").cuda.is_available(), reason="needs a CUDA GPU")
def test_the_timed_run_loads_the_triton_kernels_the_lane_compiled(tmp_path, monkeypatch):
    monkeypatch.setenv("AUTOPROFILER_HOME", str(tmp_path))
    monkeypatch.delenv("TRITON_CACHE_DIR", raising=False)  # the candidate's own, as above
    config = EvalConfig(device="cuda", compile_timeout_s=120.0)
    source = _triton_candidate()
    with BuildLane(config) as lane:
        lane.submit(PROBLEM, source)
        outcome = lane.wait(source, config.compile_timeout_s)
    assert outcome is not None and outcome.built and outcome.triton_kernels == 3, outcome
    folder, _ = candidate_folder(tmp_path, source)
    before = {p for p in (folder / "triton_cache").rglob("*") if p.is_file()}
    result = evaluate(PROBLEM, source, config)
    assert result.correct, result.failure_message
    after = {p for p in (folder / "triton_cache").rglob("*") if p.is_file()}
    # a kernel or launcher compiled by the timed run would be a new file under a new key
    assert not [p.name for p in after - before if p.suffix in (".cubin", ".so")]
    # and one compiled again under the same key would be a cache miss
    assert result.triton_compiles["kernels"] == result.triton_compiles["cache_hits"] == 3


def test_only_an_extension_holds_its_timed_run_back(tmp_path, monkeypatch):
    """A candidate with an extension waits for its build run; one with Triton kernels only
    does not (its timed run compiles whatever the lane has not)."""
    from autoprofiler.execute import evaluate_many, evaluation

    waited = []

    class WatchedLane(BuildLane):
        def wait(self, source, timeout_s=None):
            waited.append(source)
            return super().wait(source, timeout_s)

    config = EvalConfig(device="cpu")
    monkeypatch.setattr(
        evaluation, "lane_for", lambda c: WatchedLane(c, tmp_path, triton_target="9.0")
    )
    monkeypatch.setenv("AUTOPROFILER_HOME", str(tmp_path))
    extension, triton = _candidate(), _triton_candidate()
    done = list(evaluate_many([(PROBLEM, triton), (PROBLEM, extension)], config))
    assert [d.source for d in done] == [triton, extension]  # (the Triton one needs a GPU)
    assert done[1].result.correct, done[1].result.failure_message
    assert waited == [extension]
