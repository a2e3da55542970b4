"""The trusted comparison of outputs: a slice at a time, with the verdicts and differences of
the whole-tensor comparison it replaced (``benchmarks/output_comparison.py`` times both)."""

from __future__ import annotations

import pytest
import torch

from autoprofiler.evaluate import EvalConfig
from autoprofiler.evaluate.compare import compare_outputs
from tests.benchmarks.conftest import import_benchmark

CONFIG = EvalConfig(device="cpu")
# the comparison on whole tensors, as it was until session 35 (the benchmark's baseline)
whole_comparison = import_benchmark("output_comparison").whole_comparison


def _pairs() -> list[tuple[str, torch.Tensor, torch.Tensor]]:
    generator = torch.Generator().manual_seed(7)
    ref = torch.randn(1000, 3, generator=generator)
    close = ref + 1e-6
    far_in_one_slice = ref.clone()
    far_in_one_slice[999, 2] += 1.0  # in the last slice only
    nan_both = ref.clone()
    nan_both[5, 0] = float("nan")
    nan_cand = ref.clone()
    nan_cand[500, 1] = float("nan")
    inf_cand = ref.clone()
    inf_cand[0, 0] = float("inf")
    return [
        ("close", ref, close),
        ("one far element", ref, far_in_one_slice),
        ("NaN on both sides", nan_both, nan_both.clone()),
        ("NaN in the candidate", ref, nan_cand),
        ("inf in the candidate", ref, inf_cand),
        ("half precision", ref.half(), close.half()),
    ]


@pytest.mark.parametrize("chunk", [1, 7, 1000, 1 << 26])
@pytest.mark.parametrize(("name", "reference", "candidate"), _pairs(), ids=lambda v: str(v)[:20])
def test_slices_judge_as_the_whole_tensor_does(name, reference, candidate, chunk) -> None:
    got = compare_outputs([reference], [candidate], CONFIG, chunk=chunk)
    whole = whole_comparison(reference, candidate, CONFIG)
    assert (got["kind"] is not None) == whole["wrong"], name
    assert got["max_abs_diff"] == whole["max_abs_diff"]
    assert got["mean_abs_diff"] == pytest.approx(whole["mean_abs_diff"], rel=1e-9)


def test_what_is_wrong_is_said_in_one_line() -> None:
    ref = torch.zeros(10)
    nan = ref.clone()
    nan[3] = float("nan")
    assert (
        "NaN or inf where the reference is finite"
        in compare_outputs([ref], [nan], CONFIG)["message"]
    )
    far = compare_outputs([ref, ref], [ref, ref + 1.0], CONFIG, chunk=3)
    assert far["kind"] == "wrong_values" and far["message"].startswith("output 1 differs")
    assert compare_outputs([ref], [ref[:5]], CONFIG)["kind"] == "wrong_shape"
    assert compare_outputs([ref], [1.0], CONFIG)["kind"] == "wrong_shape"
    assert compare_outputs([torch.zeros(0)], [torch.zeros(0)], CONFIG)["kind"] is None
    assert compare_outputs([torch.tensor(2.0)], [torch.tensor(2.0)], CONFIG)["kind"] is None


def test_the_benchmark_reports_each_way_against_the_whole_tensor_one(tmp_path) -> None:
    benchmark = import_benchmark("output_comparison")
    rows = tmp_path / "rows.jsonl"
    assert benchmark.main(["--elements", "4096", "--repeats", "2", "--device", "cpu",
                           "--out", str(rows)]) == 0  # fmt: skip
    text = benchmark.report(rows)
    assert "| whole | 2 |" in text and "| 1.00x | - |" in text and "| sliced | 2 |" in text
