"""Outputs handed over in a GPU slab the trusted side owns (``evaluate/cuda_ipc.py``).

The layout rules run everywhere; the slab itself needs a GPU and is exercised across two real
processes and through ``evaluate()``."""

from __future__ import annotations

import subprocess
import sys
import textwrap

import pytest
import torch

from autoprofiler.evaluate import EvalConfig, evaluate
from autoprofiler.evaluate.cuda_ipc import OpenedSlab, OutputSlab
from autoprofiler.evaluate.inputs import OutputError, plain_leaves
from autoprofiler.evaluate.layout import SLOT_ALIGN, describe, layout_bytes, leaf_layout, mismatch
from autoprofiler.evaluate.reference import SlabOffer
from autoprofiler.problem import Problem

needs_gpu = pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")


def test_an_ipc_handle_keeps_its_zero_bytes():
    from autoprofiler.evaluate.cuda_ipc import _Handle

    raw = bytes([7, 0, 0, 9] * 16)
    assert bytes(_Handle.from_buffer_copy(raw).reserved) == raw


def test_layout_aligns_each_tensor_and_keeps_numbers():
    leaves = [torch.zeros(3, 5), 2.5, torch.zeros((), dtype=torch.int64), torch.zeros(0)]
    layout = leaf_layout(leaves)
    assert layout[0] == {"dtype": "float32", "shape": [3, 5], "offset": 0, "nbytes": 60}
    assert layout[1] == {"number": 2.5}
    assert layout[2]["offset"] == SLOT_ALIGN and layout[2]["nbytes"] == 8
    assert layout[3]["offset"] == 2 * SLOT_ALIGN and layout[3]["nbytes"] == 0
    assert layout_bytes(layout) == 2 * SLOT_ALIGN
    assert layout_bytes([{"number": 1}]) == 0


@pytest.mark.parametrize(
    ("told", "why"),
    [
        ([{"dtype": "float32", "shape": [3, 5]}], None),
        ([{"dtype": "float32", "shape": [5, 3]}], "output 0 has shape (5, 3), expected (3, 5)"),
        ([{"dtype": "float16", "shape": [3, 5]}], "output 0 has dtype float16, expected float32"),
        ([{"number": 1.0}], "output 0 is a number, not a tensor"),
        ([], "0 outputs where the reference has 1"),
        ("garbage", "its output description is malformed"),
        ([1, 2], "its output description is malformed"),
    ],
)
def test_mismatch_words_it_as_compare_outputs_does(told, why):
    assert mismatch(leaf_layout([torch.zeros(3, 5)]), told) == why


@pytest.mark.parametrize(
    ("told", "why"),
    [
        ([{"number": 3}], None),
        ([{"number": [1, 2]}], "output 0 is described as a number but is not one"),
        ([{"number": None}], "output 0 is described as a number but is not one"),
        ([{"dtype": "float32", "shape": [2]}], "output 0 is a tensor, not a number"),
        ([{"dtype": "float32", "shape": [-1]}], "output 0 has a malformed shape"),
    ],
)
def test_a_number_slot_takes_a_plain_number_only(told, why):
    """The slab's reader takes a number output from the description itself: anything but a
    plain number there would reach the trusted comparison as whatever the candidate wrote."""
    assert mismatch(leaf_layout([7]), told) == why


def test_describe_and_plain_leaves():
    class Lazy(torch.Tensor):
        pass

    assert describe([torch.zeros(2, dtype=torch.bool), 3]) == [
        {"dtype": "bool", "shape": [2]},
        {"number": 3},
    ]
    assert plain_leaves((torch.ones(2, requires_grad=True), [1.5]))[1] == 1.5
    with pytest.raises(OutputError, match="tensor subclass"):
        plain_leaves(torch.zeros(2).as_subclass(Lazy))
    with pytest.raises(OutputError, match="is str, not a tensor"):
        plain_leaves(["no"])


def test_opening_a_slab_without_a_gpu_driver_fails_cleanly():
    if torch.cuda.is_available():
        pytest.skip("this machine has a GPU")
    from autoprofiler.evaluate.cuda_ipc import CudaIpcError

    with pytest.raises((CudaIpcError, RuntimeError, AssertionError)):
        OpenedSlab({"handle": "00" * 64, "size": 256, "slots": {}}, torch.device("cuda"))


WRITER = """
import sys, json, torch
from autoprofiler.evaluate.cuda_ipc import OpenedSlab
offer = json.loads(sys.stdin.read())
slab = OpenedSlab(offer, torch.device("cuda"))
x = torch.arange(15, dtype=torch.float32, device="cuda").reshape(5, 3).t()  # not contiguous
print(json.dumps(slab.write("a", [x, 7])))
slab.write("b", [torch.zeros(4, device="cuda")])  # the wrong shape: nothing is written
"""


@needs_gpu
def test_a_slab_crosses_processes_and_is_read_after_the_writer_is_gone():
    device = torch.device("cuda")
    expected = torch.arange(15, dtype=torch.float32, device="cuda").reshape(5, 3).t()
    slab = OutputSlab({"a": leaf_layout([expected, 7]), "b": leaf_layout([expected])}, device)
    try:
        import json

        done = subprocess.run(
            [sys.executable, "-c", textwrap.dedent(WRITER)],
            input=json.dumps(slab.offer()),
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert done.returncode == 0, done.stderr[-3000:]
        told = json.loads(done.stdout.strip().splitlines()[-1])
        got = slab.read("a", told)
        assert torch.equal(got[0], expected) and got[1] == 7
        untouched = slab.read("b", [{"dtype": "float32", "shape": [3, 5]}])
        assert torch.isnan(untouched[0]).all()  # filled with NaN until written
        assert slab.read("b", [{"dtype": "float32", "shape": [4]}]).startswith("output 0 has")
    finally:
        slab.close()
    slab.close()  # twice is fine


PROBLEM = """
import torch
import torch.nn as nn

class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return torch.relu(x) * 2.0

def get_inputs():
    return [torch.randn(1024, 4096)]

def get_init_inputs():
    return []
"""

HONEST = """
import torch
import torch.nn as nn

class ModelNew(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, x):
        return x.clamp_min(0) * 2.0
"""

WRONG_SHAPE = HONEST.replace("x.clamp_min(0) * 2.0", "(x.clamp_min(0) * 2.0)[:, :10]")
WRONG_VALUES = HONEST.replace("* 2.0", "* 2.5")


@needs_gpu
@pytest.mark.parametrize(
    ("source", "correct", "kind"),
    [
        (HONEST, True, None),
        (WRONG_SHAPE, False, "wrong_shape"),
        (WRONG_VALUES, False, "wrong_values"),
    ],
)
def test_evaluate_hands_outputs_over_in_a_slab(tmp_path, source, correct, kind):
    from autoprofiler.evaluate.runner import REFERENCES, _offer_slab, _reference_env

    problem = Problem(name="slab_relu", source=PROBLEM, origin="<test>")
    config = EvalConfig(device="cuda")
    result = evaluate(problem, source, config, use_cache=False, work_root=tmp_path)
    assert result.correct is correct
    assert (result.failure_kind.value if result.failure_kind else None) == kind
    reference = REFERENCES.get(problem, config, _reference_env(config), tmp_path)
    offered = _offer_slab(config, reference, 1024 * 4096 * 4)
    assert offered is not None  # the run above had one too: no fallback to files here
    reference.free_slab(offered.slab_id, 60)


@needs_gpu
@pytest.mark.parametrize(
    ("source", "correct", "kind"),
    [(HONEST, True, None), (WRONG_VALUES, False, "wrong_values")],
)
def test_outputs_a_partial_slab_has_no_slot_for_cross_on_the_host(
    tmp_path, monkeypatch, caplog, source, correct, kind
):
    """A slab of three slots (the first three correctness trials): the other two trials,
    the timed outputs and the second shape cross as files, and the verdict is the same."""
    import logging

    from autoprofiler.evaluate import runner

    offer = runner._offer_slab
    three_outputs = 3 * 1024 * 4096 * 4
    monkeypatch.setattr(
        runner, "_offer_slab", lambda *args: offer(*args[:3], max_bytes=three_outputs)
    )
    problem = Problem(name="partial_slab_relu", source=PROBLEM, origin="<test>")
    with caplog.at_level(logging.INFO, logger="autoprofiler.evaluate.reference"):
        result = evaluate(problem, source, EvalConfig(device="cuda"), use_cache=False,
                          work_root=tmp_path)  # fmt: skip
    assert "holds 3 of the run's outputs" in caplog.text
    assert result.correct is correct
    assert (result.failure_kind.value if result.failure_kind else None) == kind


class _Reference:
    """Stands in for the reference process's client: records what it was asked."""

    def __init__(self) -> None:
        self.asked: list[tuple[int, int]] = []

    def offer_slab(self, correctness: int, timed: int, timeout_s: float, max_bytes=None):
        self.asked.append((correctness, timed))
        return SlabOffer("slab-id", {"handle": "00" * 64, "size": 0, "slots": {}}, 1.0, 0, 0)


@pytest.mark.parametrize(
    ("label", "sandbox", "output_bytes", "asked"),
    [
        ("cuda:NVIDIA H200", None, 4, [(5, 200)]),  # small outputs: every timed trial
        ("cuda:NVIDIA H200", None, 2**30, [(5, 4)]),  # large ones: the sample of four
        ("cuda:NVIDIA H200", "bwrap", 4, []),  # a sandbox's process namespace: files
        ("cpu", None, 4, []),
    ],
)
def test_a_slab_is_offered_on_a_gpu_only(monkeypatch, label, sandbox, output_bytes, asked):
    from autoprofiler.evaluate import runner

    monkeypatch.setitem(runner._device_cache, "cuda", label)
    reference = _Reference()
    offered = runner._offer_slab(
        EvalConfig(device="cuda", sandbox=sandbox), reference, output_bytes
    )
    assert reference.asked == asked and (offered is not None) == bool(asked)


def test_a_slab_leaves_the_candidate_room_on_the_gpu() -> None:
    from autoprofiler.evaluate.reference import slab_fits

    gib = 2**30
    # KernelBench L1/23 Softmax on an H200: 6 GiB outputs, ten slots, 135 GiB free.
    assert slab_fits(57 * gib, 135 * gib, 6 * gib)
    # Over the share of free memory, or leaving too little for the candidate's own trials.
    assert not slab_fits(85 * gib, 135 * gib, 8 * gib)
    assert not slab_fits(20 * gib, 40 * gib, 4 * gib)
    assert slab_fits(1 * gib, 40 * gib, 100 * 2**20)
