"""A segfault inside forward (a read through a null pointer).

Verdict: killed_by_signal
"""

import ctypes

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return ctypes.string_at(0)
