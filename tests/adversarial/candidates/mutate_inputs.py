"""Mutating the input so that the reference computes the wrong thing.

Trick: zero the input in place and return zeros; a reference that read the same tensor
afterwards would compute relu(0 @ W) * 2 = 0 too.
Caught: the reference runs on its own copy of the inputs, so it computes the true output.
Verdict: wrong_values
Findings: mutates_inputs
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        x.zero_()
        return torch.zeros(x.shape[0], self.weight.shape[1], device=x.device)
