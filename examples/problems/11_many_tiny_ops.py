"""Hundreds of tiny elementwise ops on a 32x32 tensor: launch-bound, the GPU mostly waits."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (32, 20), "large": (32, 200)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
DIM, STEPS = SIZES[SIZE]  # each step is 4 ops, so small runs 80 ops and large 800


class Model(nn.Module):
    def __init__(self, steps: int):
        super().__init__()
        self.steps = steps

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        for i in range(self.steps):
            x = x * (1.0 + 0.01 * (i % 7))
            x = x + 0.05
            x = torch.tanh(x)
            x = torch.relu(x) if i % 2 else torch.sin(x)
        return x


def get_inputs():
    return [torch.randn(DIM, DIM)]


def get_init_inputs():
    return [STEPS]
