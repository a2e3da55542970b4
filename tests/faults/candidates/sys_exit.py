"""``sys.exit(4)`` inside forward: ``SystemExit`` is not an ``Exception``.

Verdict: runtime_error
"""

import sys

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        sys.exit(4)
