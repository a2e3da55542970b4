"""LayerNorm over the last dim with affine weights: memory-bound, two reductions per row."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (128, 512), "large": (16384, 4096)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
TOKENS, HIDDEN = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, hidden: int):
        super().__init__()
        self.norm = nn.LayerNorm(hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x)


def get_inputs():
    return [torch.randn(TOKENS, HIDDEN)]


def get_init_inputs():
    return [HIDDEN]
