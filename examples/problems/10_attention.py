"""Multi-head attention written out (QK^T, softmax, @V): two GEMMs around a big softmax."""

import math
import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (2, 4, 64, 32), "large": (8, 16, 2048, 64)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
BATCH, HEADS, SEQ_LEN, HEAD_DIM = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, head_dim: int):
        super().__init__()
        self.scale = 1.0 / math.sqrt(head_dim)

    def forward(self, q: torch.Tensor, k: torch.Tensor, v: torch.Tensor) -> torch.Tensor:
        scores = torch.matmul(q, k.transpose(-2, -1)) * self.scale
        weights = torch.softmax(scores, dim=-1)
        return torch.matmul(weights, v)


def get_inputs():
    shape = (BATCH, HEADS, SEQ_LEN, HEAD_DIM)
    return [torch.randn(shape), torch.randn(shape), torch.randn(shape)]


def get_init_inputs():
    return [HEAD_DIM]
