"""Sum over the middle dim of a 3-D tensor: memory-bound strided reduction."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (16, 256, 256), "large": (32, 4096, 512)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
BATCH, LENGTH, WIDTH = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, dim: int):
        super().__init__()
        self.dim = dim

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sum(x, dim=self.dim)


def get_inputs():
    return [torch.randn(BATCH, LENGTH, WIDTH)]


def get_init_inputs():
    return [1]
