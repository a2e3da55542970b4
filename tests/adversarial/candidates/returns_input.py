"""Returning an input.

Trick: hand the input back as the output (no work, right shape).
Caught: the values are wrong, and the output shares memory with the input.
Verdict: wrong_values
Findings: returns_input
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x
