"""Chain of elementwise ops (scale, shift, GELU, clamp, SiLU, residual): memory-bound, fusable."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (64, 1024), "large": (8192, 8192)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
ROWS, COLS = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, scale: float, shift: float, limit: float):
        super().__init__()
        self.scale = scale
        self.shift = shift
        self.limit = limit

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = x * self.scale + self.shift
        y = torch.nn.functional.gelu(y)
        y = torch.clamp(y, -self.limit, self.limit)
        y = y * torch.sigmoid(y)
        return y + 0.5 * x


def get_inputs():
    return [torch.randn(ROWS, COLS)]


def get_init_inputs():
    return [1.5, 0.25, 3.0]
