"""Inheriting from the reference ``Model`` and calling its forward.

Trick: copy the reference and subclass it; the "rewrite" is the reference itself.
Caught: correct, but flagged as inheriting from the reference.
Verdict: correct
Findings: inherits_reference
"""

import torch
import torch.nn as nn


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(x, self.weight)) * 2


class ModelNew(Model):
    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return super().forward(x)
