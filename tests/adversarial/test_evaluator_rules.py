"""The evaluator's new rules in isolation: static checks, the second-shape convention, the
run-time guard and audit watch, and how findings turn into a verdict."""

from __future__ import annotations

import gc
import textwrap
import types
import weakref
from pathlib import Path

import pytest
import torch

from autoprofiler.evaluate import EvalResult, FailureKind, Finding
from autoprofiler.evaluate.audit import AuditWatch
from autoprofiler.evaluate.checks import scan_source
from autoprofiler.evaluate.guard import RuntimeGuard, background_work
from autoprofiler.evaluate.sandbox import exit_status
from autoprofiler.evaluate.shapes import other_shape

from .cases import PROBLEM_PATH

REFERENCE = PROBLEM_PATH.read_text(encoding="utf-8")
FALLBACK = "fallback_path"


def names(source: str, reference: str | None = None) -> set[str]:
    return {f.name for f in scan_source(textwrap.dedent(source), reference)}


@pytest.mark.parametrize(
    ("source", "finding"),
    [
        ("import time\ntime.perf_counter = lambda: 0.0\n", "patches_timer"),
        ("import time\nsetattr(time, 'perf_counter', lambda: 0.0)\n", "patches_timer"),
        ("import torch\ntorch.Tensor.__matmul__ = None\n", "patches_runtime"),
        ("from gc import get_objects\nget_objects()\n", "inspects_runtime"),
        ("import sys\nsys.modules['__main__']\n", "inspects_runtime"),
        ("def f(frame):\n    return frame.f_back\n", "inspects_runtime"),
        ("import autoprofiler.evaluate.candidate\n", "touches_evaluator"),
        ("open('job.json')\n", "touches_evaluator"),
        ("exec('x = 1')\n", "dynamic_code"),
        ("from threading import Thread\nThread(target=print).start()\n", "side_channel"),
        ("try:\n    pass\nexcept Exception:\n    pass\n", "fallback_path"),
        ("def f():\n    try:\n        pass\n    except ImportError:\n        return 1\n", FALLBACK),
    ],
)
def test_static_checks_find(source: str, finding: str) -> None:
    assert finding in names(source)


@pytest.mark.parametrize(
    "source",
    [
        "class M:\n    def start(self):\n        self.time = 0\n        self.synchronize = True\n",
        "import torch\ntorch.backends.cudnn.benchmark = True\n",
        "import os\nSIZE = os.environ.get('AUTOPROFILER_EXAMPLE_SIZE', 'small')\n",
        '"""Written for autoprofiler.evaluate, which judges it."""\n',
        "try:\n    import triton\nexcept ImportError:\n    triton = None\n",
        "import re\nimport torch\nre.compile('x')\nmodel = torch.compile(torch.nn.Linear(2, 2))\n",
        "if __name__ == '__main__':\n    pass\n",
    ],
)
def test_static_checks_leave_ordinary_code_alone(source: str) -> None:
    assert names(source) == set()


def test_same_op_needs_every_op_of_the_reference() -> None:
    every_op = """
        import torch
        import torch.nn.functional as F

        class ModelNew(torch.nn.Module):
            def forward(self, x):
                return F.relu(torch.mm(x, self.weight)) * 2
    """
    only_the_matmul = every_op.replace("F.relu(torch.mm(x, self.weight))", "fused(x @ self.weight)")
    assert "same_op_as_reference" in names(every_op, REFERENCE)
    assert "same_op_as_reference" not in names(only_the_matmul, REFERENCE)
    assert "same_op_as_reference" not in names(every_op)  # no reference, no comparison


def test_a_copied_reference_does_not_count_as_the_candidates_ops() -> None:
    tail = "class ModelNew(torch.nn.Module):\n    def forward(self, x):\n        return fused(x)\n"
    copied = f"{REFERENCE}\n{tail}"
    assert "same_op_as_reference" not in names(copied, REFERENCE)


def _module(**names: object) -> types.ModuleType:
    module = types.ModuleType("problem")
    module.__dict__.update(names)
    return module


def test_a_batch_knob_is_halved_and_restored() -> None:
    module = _module(batch_size=16, get_inputs=lambda: [torch.zeros(module.batch_size, 3)])
    shape = other_shape(module)
    assert shape.label == "batch_size=8 instead of 16"
    assert shape.inputs(module)[0].shape == (8, 3) and module.batch_size == 16
    assert other_shape(_module(BATCH=1)).value == 2


def test_get_inputs_alt_wins_and_no_convention_means_no_trial() -> None:
    alt = _module(batch_size=4, get_inputs_alt=lambda: [torch.zeros(7)])
    assert other_shape(alt).inputs(alt)[0].shape == (7,)
    assert other_shape(_module(features=32, flag=True)) is None
    assert other_shape(_module(batch_size=True)) is None


@pytest.fixture
def guard() -> tuple[RuntimeGuard, torch.nn.Module]:
    reference = torch.nn.Linear(4, 4)
    return RuntimeGuard(_module(Model=torch.nn.Linear), reference, {}), reference


def test_the_guard_sees_patched_torch_and_timers(guard, monkeypatch: pytest.MonkeyPatch) -> None:
    record, _ = guard
    assert record.check() == []
    monkeypatch.setattr(torch, "relu", torch.zeros_like)
    monkeypatch.setattr(torch.cuda.Event, "elapsed_time", lambda self, end: 0.0)
    assert {f.name for f in record.check()} == {"patches_runtime", "patches_timer"}


def test_the_guard_accepts_torch_wrapping_its_own_functions(
    guard, monkeypatch: pytest.MonkeyPatch
) -> None:
    record, _ = guard
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(torch.manual_seed))
    assert record.check() == []
    monkeypatch.setattr(torch, "manual_seed", torch._disable_dynamo(lambda seed: None))
    assert [f.name for f in record.check()] == ["patches_runtime"]


def test_the_guard_sees_the_reference_changed(guard, monkeypatch: pytest.MonkeyPatch) -> None:
    record, reference = guard
    with torch.no_grad():
        reference.weight.data.zero_()
    assert [f.name for f in record.check()] == ["tampers_reference"]


def test_the_guard_sees_precision_lowered(guard, monkeypatch: pytest.MonkeyPatch) -> None:
    record, _ = guard
    before = torch.get_float32_matmul_precision()
    torch.set_float32_matmul_precision("medium")
    try:
        assert [f.name for f in record.check()] == ["changes_precision"]
    finally:
        torch.set_float32_matmul_precision(before)
    assert record.check() == []


def test_looking_for_background_work_keeps_no_trial_alive() -> None:
    """A trial's output is freed as the trial lets go of it, not at the next garbage
    collection (a frame cycle here held 12 GiB a trial of a 6 GiB problem on the H100)."""

    class Output:
        pass

    def trial() -> weakref.ref:
        output = Output()
        assert background_work("candidate.py") == []
        return weakref.ref(output)

    gc.disable()
    try:
        assert trial()() is None
    finally:
        gc.enable()


def test_the_audit_watch_records_only_while_watching(tmp_path: Path) -> None:
    watch = AuditWatch([str(tmp_path / "work")])
    watch._hook("open", (str(tmp_path / "before.txt"), "w", 0))  # not watching yet
    with watch.watching():
        watch._hook("open", (str(tmp_path / "work" / "ok.txt"), "w", 0))
        watch._hook("open", (str(tmp_path / "read.txt"), "r", 0))
        watch._hook("open", (str(tmp_path / "out.txt"), "a", 0))
        watch._hook("gc.get_objects", (-1,))
        watch._hook("socket.connect", (None, ("10.0.0.1", 80)))
    found = {f.name: f for f in watch.findings()}
    assert found["writes_outside_workdir"].detail == f"wrote {tmp_path / 'out.txt'}"
    assert found["inspects_runtime"].severity == "reject"
    assert "10.0.0.1" in found["network_access"].detail


def test_findings_merge_by_name_and_a_reject_fails_a_correct_result() -> None:
    result = EvalResult(problem_hash="p", candidate_hash="c", correct=True)
    result.add_finding(Finding("side_channel", "starts a thread"))
    result.add_finding(Finding("side_channel", "still running", "reject"))
    result.add_finding(Finding("side_channel", "again"))
    assert result.findings == [Finding("side_channel", "still running", "reject")]
    result.apply_rejections()
    assert not result.correct and result.failure_kind is FailureKind.CHEAT
    assert result.failure_message == "side_channel: still running"


def test_bwrap_signal_exits_read_as_signals() -> None:
    assert exit_status(139) == -11 and exit_status(3) == 3 and exit_status(-9) == -9
