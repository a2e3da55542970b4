"""Conv2d + BatchNorm2d + ReLU block: a compute-bound conv followed by fusable memory-bound ops."""

import os

import torch
import torch.nn as nn

SIZE = os.environ.get("AUTOPROFILER_EXAMPLE_SIZE", "small")
SIZES = {"small": (2, 16, 32, 32), "large": (32, 64, 112, 112)}
if SIZE not in SIZES:
    raise ValueError(f"AUTOPROFILER_EXAMPLE_SIZE must be 'small' or 'large', not {SIZE!r}")
BATCH, CHANNELS, HEIGHT, WIDTH = SIZES[SIZE]


class Model(nn.Module):
    def __init__(self, in_channels: int, out_channels: int):
        super().__init__()
        self.conv = nn.Conv2d(in_channels, out_channels, 3, padding=1, bias=False)
        self.bn = nn.BatchNorm2d(out_channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(self.bn(self.conv(x)))


def get_inputs():
    return [torch.randn(BATCH, CHANNELS, HEIGHT, WIDTH)]


def get_init_inputs():
    return [CHANNELS, CHANNELS]
