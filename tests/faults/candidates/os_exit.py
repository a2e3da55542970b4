"""``os._exit(3)`` inside forward: the worker vanishes without a verdict.

Verdict: runtime_error
"""

import os

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        os._exit(3)
