"""Calling the same high-level torch ops as the reference, spelled differently.

Trick: ``F.relu(torch.mm(...)).mul(2)`` is the reference's ``torch.relu(torch.matmul(...)) * 2``;
no kernel was written.
Caught: correct, but flagged: the candidate's torch calls cover every op of the reference.
Verdict: correct
Findings: same_op_as_reference
"""

import torch
import torch.nn as nn
import torch.nn.functional as F


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return F.relu(torch.mm(x, self.weight)).mul(2)
