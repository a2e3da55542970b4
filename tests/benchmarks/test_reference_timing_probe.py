"""benchmarks/reference_timing_probe.py on the CPU: the adapter to our timer and refusals (the
timing itself runs on the GPU machine)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest
import torch

from .conftest import import_benchmark

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "reference_timing_probe.py"


@pytest.fixture(scope="module")
def probe() -> ModuleType:
    return import_benchmark("reference_timing_probe")


def test_the_adapter_times_with_our_current_timer(probe) -> None:
    run, name = probe.timing_adapter()
    assert name.startswith(("run_timing_loop(", "time_callable("))
    ms, trials = run(torch.nn.ReLU(), lambda j: [torch.rand(64, 64)], torch.device("cpu"))
    assert ms > 0 and trials >= 10


def test_the_adapter_refuses_an_unknown_signature_clearly(
    probe, monkeypatch: pytest.MonkeyPatch
) -> None:
    from autoprofiler.evaluate import timing

    monkeypatch.setattr(timing, "run_timing_loop", lambda fn, inputs: None, raising=False)
    with pytest.raises(probe.ProbeError, match=r"run_timing_loop\(fn, inputs\).*update"):
        probe.timing_adapter()
    monkeypatch.delattr(timing, "run_timing_loop")
    monkeypatch.delattr(timing, "time_callable", raising=False)
    with pytest.raises(probe.ProbeError, match="neither run_timing_loop nor time_callable"):
        probe.timing_adapter()


def test_summary_ratios_are_to_do_bench(probe) -> None:
    rows = [
        probe._row("L1/19_ReLU", i, variant, ms, 30, "")
        for i in range(3)
        for variant, ms in (("do_bench median (no_grad)", 2.0 + i / 100), ("slow", 2.2))
    ]
    summary = {s["variant"]: s for s in probe.summarize(rows)}
    assert summary["do_bench median (no_grad)"]["ratio_to_do_bench"] == 1.0
    assert summary["slow"]["ratio_to_do_bench"] == pytest.approx(2.2 / 2.01)
    assert summary["do_bench median (no_grad)"]["spread"] == pytest.approx(2.02 / 2.0)


@pytest.mark.skipif(torch.cuda.is_available(), reason="the refusal is for CPU-only machines")
def test_without_a_gpu_the_probe_refuses_in_one_line(tmp_path: Path) -> None:
    problems = ROOT / "examples" / "problems"
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--problems", str(problems), "--ids", "7",
         "--out", str(tmp_path / "p.json")],
        capture_output=True, text=True, check=False, cwd=ROOT, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        "error: no CUDA device: this probe times on the GPU"
    ]
    assert not (tmp_path / "p.json").exists()
