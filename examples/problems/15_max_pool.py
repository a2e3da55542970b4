"""3x3 stride-2 max-pool over an image batch: memory-bound windowed reduction."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (2, 16, 64, 64), "large": (32, 64, 224, 224)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
BATCH, CHANNELS, HEIGHT, WIDTH = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, kernel_size: int, stride: int):
        super().__init__()
        self.pool = nn.MaxPool2d(kernel_size, stride=stride, padding=kernel_size // 2)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.pool(x)


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [3, 2]
