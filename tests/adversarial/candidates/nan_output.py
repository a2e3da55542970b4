"""NaN and inf in the output.

Trick: a kernel that writes NaN or inf in a few places (a missing bounds check, an overflow)
and hopes a loose comparison lets it through.
Caught: any NaN or inf where the reference is finite fails the trial.
Verdict: wrong_values
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = (x @ self.weight).clamp_min(0) * 2
        out[0, 0] = float("nan")
        out[-1, -1] = float("inf")
        return out
