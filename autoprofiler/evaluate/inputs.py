"""Trial inputs made from seeds, and the outputs a candidate may hand over.

Both sides make a trial's inputs the same way from its seed (:func:`make_inputs`), so the
trusted reference process recomputes what the candidate was given without receiving anything
from the candidate's process. An output crosses as plain tensors and numbers only
(:func:`plain_leaves`): in a GPU slab (:mod:`~autoprofiler.evaluate.cuda_ipc`) or a file
(:mod:`~autoprofiler.evaluate.output_files`).
"""

from __future__ import annotations

import types
from dataclasses import dataclass
from typing import Any

import torch

from autoprofiler.evaluate.shapes import OtherShape

SEED_MODULUS = 2**62


@dataclass(frozen=True)
class TrialSeeds:
    """The seeds of one evaluation, drawn by the trusted side at run time.

    ``correctness`` seeds the correctness trials, ``timing`` the pool of timed inputs (input
    ``j`` of the pool from :meth:`pool_seed`), ``other_shape`` the trial at a second shape.
    The candidate's process learns ``timing`` only when its timing phase starts.
    """

    correctness: tuple[int, ...]
    timing: int
    other_shape: int

    def pool_seed(self, index: int) -> int:
        """The seed of the ``index``-th input of the timing pool (all distinct)."""
        return (self.timing + 1_000_003 * (index + 1)) % SEED_MODULUS

    def to_dict(self) -> dict[str, Any]:
        return {
            "correctness": list(self.correctness),
            "timing": self.timing,
            "other_shape": self.other_shape,
        }


def flatten(value: Any) -> list[Any]:
    """The leaves of nested lists and tuples, in order."""
    if isinstance(value, (list, tuple)):
        return [item for part in value for item in flatten(part)]
    return [value]


def make_inputs(
    module: types.ModuleType, seed: int, device: torch.device, shape: OtherShape | None = None
) -> list[Any]:
    """The problem's ``get_inputs()`` (or ``shape``'s inputs) under ``seed``, on ``device``."""
    torch.manual_seed(seed)
    with torch.device(device):
        values = shape.inputs(module) if shape is not None else list(module.get_inputs())
    return [v.to(device) if isinstance(v, torch.Tensor) else v for v in values]


def clone_inputs(values: list[Any]) -> list[Any]:
    return [v.clone() if isinstance(v, torch.Tensor) else v for v in values]


def nbytes(values: list[Any]) -> int:
    """Bytes held by the tensors among ``values`` (nested outputs flattened)."""
    return sum(v.numel() * v.element_size() for v in flatten(values) if torch.is_tensor(v))


class OutputError(ValueError):
    """An output that cannot be handed over (not a plain tensor, or an unreadable file);
    ``cheat`` when it is a tensor subclass (a lazy tensor that computes when read)."""

    def __init__(self, message: str, cheat: bool = False) -> None:
        super().__init__(message)
        self.cheat = cheat


def plain_leaves(value: Any) -> list[Any]:
    """The forward's output flattened into plain tensors (detached) and numbers.

    Raises :class:`OutputError` for a leaf that is not a plain ``torch.Tensor`` or number.
    """
    leaves: list[Any] = []
    for index, leaf in enumerate(flatten(value)):
        if isinstance(leaf, torch.Tensor):
            if type(leaf) is not torch.Tensor and not isinstance(leaf, torch.nn.Parameter):
                message = f"output {index} is a tensor subclass {type(leaf).__name__}"
                raise OutputError(message, cheat=True)
            leaves.append(leaf.detach())
        elif isinstance(leaf, (bool, int, float)):
            leaves.append(leaf)
        else:
            raise OutputError(f"output {index} is {type(leaf).__name__}, not a tensor")
    return leaves
