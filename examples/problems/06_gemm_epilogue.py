"""nn.Linear followed by bias, GELU and scale: a GEMM whose elementwise epilogue can be fused."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (64, 256, 256), "large": (8192, 4096, 4096)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
BATCH, IN_FEATURES, OUT_FEATURES = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, in_features: int, out_features: int, scale: float):
        super().__init__()
        self.linear = nn.Linear(in_features, out_features)
        self.bias = nn.Parameter(torch.randn(out_features) * 0.1)
        self.scale = scale

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.linear(x) + self.bias
        return torch.nn.functional.gelu(y) * self.scale


def get_inputs():
    return [torch.randn(BATCH, IN_FEATURES)]


def get_init_inputs():
    return [IN_FEATURES, OUT_FEATURES, 0.5]
