"""Square GEMM in bfloat16: compute-bound on tensor cores, half the bytes of fp32."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (256,), "large": (8192,)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
(N,) = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self):
        super().__init__()

    def forward(self, a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        return torch.matmul(a, b)


def get_inputs():
    return [torch.randn(N, N, dtype=torch.bfloat16), torch.randn(N, N, dtype=torch.bfloat16)]


def get_init_inputs():
    return []
