"""Inputs of a second shape: does the candidate work beyond the shapes it was shown?

The convention (docs/SECURITY.md): a problem may define ``get_inputs_alt()``, returning inputs
of another shape. Otherwise, when its module holds a positive integer batch knob
(``batch_size``, ``BATCH_SIZE``, ``BATCH`` or ``batch``), ``get_inputs()`` is called again with
the knob halved (2 when it is 1) and then restored; the knob stays set while the reference runs
on those inputs, for a ``forward`` that reads it. A problem with neither, or whose
``get_inputs()`` ignores the knob, gets no extra trial.
"""

from __future__ import annotations

import contextlib
import types
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import torch

ALT_INPUTS = "get_inputs_alt"
BATCH_KNOBS = ("batch_size", "BATCH_SIZE", "BATCH", "batch")


@dataclass(frozen=True)
class OtherShape:
    """How to make the problem's inputs at another shape."""

    label: str
    knob: str | None = None
    value: int | None = None

    @contextlib.contextmanager
    def applied(self, module: types.ModuleType) -> Iterator[None]:
        """The problem module with the knob set to the other value, restored after."""
        if self.knob is None:
            yield
            return
        saved = getattr(module, self.knob)
        setattr(module, self.knob, self.value)
        try:
            yield
        finally:
            setattr(module, self.knob, saved)

    def inputs(self, module: types.ModuleType) -> list[Any]:
        with self.applied(module):
            make = getattr(module, ALT_INPUTS) if self.knob is None else module.get_inputs
            return list(make())


def other_shape(module: types.ModuleType) -> OtherShape | None:
    """The problem's way to another input shape under the convention, or None."""
    if callable(getattr(module, ALT_INPUTS, None)):
        return OtherShape(f"{ALT_INPUTS}()")
    for knob in BATCH_KNOBS:
        value = vars(module).get(knob)
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            other = value // 2 if value > 1 else 2
            return OtherShape(f"{knob}={other} instead of {value}", knob, other)
    return None


def shapes(values: list[Any]) -> list[tuple[int, ...] | None]:
    """The shape of each tensor in ``values`` (None for other arguments)."""
    return [tuple(v.shape) if isinstance(v, torch.Tensor) else None for v in values]
