"""Output comparison, KernelBench style, and output fingerprints: trusted code that runs in the
reference process (:mod:`~autoprofiler.evaluate.reference`), never beside a candidate."""

from __future__ import annotations

from typing import Any

import torch

from autoprofiler.evaluate.config import EvalConfig

FINGERPRINT_SAMPLES = 4096


def compare_outputs(reference: list[Any], candidate: list[Any], config: EvalConfig) -> dict:
    """``{max_abs_diff, mean_abs_diff, kind, message}``: ``kind`` is None when every output
    matches within the tolerance, else ``wrong_shape`` or ``wrong_values``."""
    verdict: dict[str, Any] = {"max_abs_diff": 0.0, "mean_abs_diff": 0.0, "kind": None}
    if len(reference) != len(candidate):
        message = f"{len(candidate)} outputs where the reference has {len(reference)}"
        return {**verdict, "kind": "wrong_shape", "message": message}
    for index, (ref, cand) in enumerate(zip(reference, candidate)):
        ref = ref if torch.is_tensor(ref) else torch.as_tensor(ref)
        if not torch.is_tensor(cand):
            message = f"output {index} is {type(cand).__name__}, not a tensor"
            return {**verdict, "kind": "wrong_shape", "message": message}
        if tuple(cand.shape) != tuple(ref.shape):
            message = f"output {index} has shape {tuple(cand.shape)}, expected {tuple(ref.shape)}"
            return {**verdict, "kind": "wrong_shape", "message": message}
        atol, rtol = config.tolerance_for(str(ref.dtype).removeprefix("torch."))
        work = torch.promote_types(ref.dtype, torch.float32)
        ref_w = ref.detach().to(work)
        cand_w = cand.detach().to(ref_w.device, work)
        diff = (ref_w - cand_w).abs().nan_to_num(nan=float("inf"))
        if diff.numel():
            verdict["max_abs_diff"] = max(verdict["max_abs_diff"], float(diff.max()))
            verdict["mean_abs_diff"] = max(verdict["mean_abs_diff"], float(diff.double().mean()))
        if verdict["kind"] is not None:
            continue
        if not bool(torch.isfinite(cand_w).all()) and bool(torch.isfinite(ref_w).all()):
            verdict["kind"] = "wrong_values"
            verdict["message"] = f"output {index} has NaN or inf where the reference is finite"
        elif not torch.allclose(cand_w, ref_w, atol=atol, rtol=rtol, equal_nan=True):
            verdict["kind"] = "wrong_values"
            verdict["message"] = (
                f"output {index} differs: max abs diff {float(diff.max()):.3g} (atol=rtol={atol:g})"
            )
    return verdict


def fingerprint(leaves: list[Any]) -> list[tuple[Any, ...] | None]:
    """A small stand-in for each output (shape, dtype, float64 sum, an evenly spread sample of
    its elements): equal outputs give equal fingerprints, different ones in practice never."""
    prints: list[tuple[Any, ...] | None] = []
    for leaf in leaves:
        if not torch.is_tensor(leaf):
            prints.append(None)
            continue
        flat = leaf.detach().reshape(-1)
        step = max(1, flat.numel() // FINGERPRINT_SAMPLES)
        total = float(torch.sum(flat, dtype=torch.float64)) if flat.numel() else 0.0
        prints.append((tuple(leaf.shape), str(leaf.dtype), total, flat[::step].cpu().clone()))
    return prints


def same_fingerprint(a: list[tuple[Any, ...] | None], b: list[tuple[Any, ...] | None]) -> bool:
    return len(a) == len(b) and all(
        x is not None
        and y is not None
        and x[:3] == y[:3]
        and x[3].shape == y[3].shape
        and torch.equal(x[3], y[3])
        for x, y in zip(a, b)
    )
