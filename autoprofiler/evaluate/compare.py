"""Output comparison, KernelBench style, and output fingerprints: trusted code that runs in the
reference process (:mod:`~autoprofiler.evaluate.reference`), never beside a candidate."""

from __future__ import annotations

from typing import Any

import torch

from autoprofiler.evaluate.config import EvalConfig

FINGERPRINT_SAMPLES = 4096


CHUNK_ELEMENTS = 1 << 26  # compared a slice at a time: no temporaries the size of a GB output


def compare_outputs(
    reference: list[Any], candidate: list[Any], config: EvalConfig, chunk: int = CHUNK_ELEMENTS
) -> dict:
    """``{max_abs_diff, mean_abs_diff, kind, message}``: ``kind`` is None when every output
    matches within the tolerance (``torch.allclose``, NaN equal to NaN), else ``wrong_shape``
    or ``wrong_values``. Each output is compared ``chunk`` elements at a time, the device
    waited for once it is all queued."""
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
        found = _compared(ref.detach(), cand.detach(), atol, rtol, chunk)
        if ref.numel():
            verdict["max_abs_diff"] = max(verdict["max_abs_diff"], found["max"])
            verdict["mean_abs_diff"] = max(verdict["mean_abs_diff"], found["sum"] / ref.numel())
        if verdict["kind"] is not None:
            continue
        if found["ref_finite"] and not found["cand_finite"]:
            verdict["kind"] = "wrong_values"
            verdict["message"] = f"output {index} has NaN or inf where the reference is finite"
        elif not found["close"]:
            verdict["kind"] = "wrong_values"
            verdict["message"] = (
                f"output {index} differs: max abs diff {found['max']:.3g} (atol=rtol={atol:g})"
            )
    return verdict


def _compared(ref: torch.Tensor, cand: torch.Tensor, atol: float, rtol: float, chunk: int):
    """Over the elements of one output pair, in the float type both promote to (at least
    float32), on ``ref``'s device: the largest and the float64 sum of the absolute differences
    (NaN counting as inf), whether each side is finite throughout, and whether they are close.
    The device is waited for only at the end."""
    work = torch.promote_types(ref.dtype, torch.float32)
    flat_ref, flat_cand = ref.reshape(-1), cand.reshape(-1)
    device = ref.device
    largest = torch.zeros((), dtype=torch.float64, device=device)
    total = torch.zeros((), dtype=torch.float64, device=device)
    flags = torch.ones(3, dtype=torch.bool, device=device)  # ref finite, cand finite, close
    for start in range(0, flat_ref.numel(), chunk):
        r = flat_ref[start : start + chunk].to(work)
        c = flat_cand[start : start + chunk].to(device, work)
        diff = (r - c).abs_().nan_to_num_(nan=float("inf"))
        largest = torch.maximum(largest, diff.max().double())
        total += diff.sum(dtype=torch.float64)
        flags &= torch.stack((
            torch.isfinite(r).all(), torch.isfinite(c).all(),
            torch.isclose(c, r, rtol=rtol, atol=atol, equal_nan=True).all(),
        ))  # fmt: skip
    ref_finite, cand_finite, close = flags.tolist()
    return {"max": float(largest), "sum": float(total), "ref_finite": ref_finite,
            "cand_finite": cand_finite, "close": close}  # fmt: skip


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
