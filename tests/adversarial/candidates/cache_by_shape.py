"""Cached output keyed by the input's shape.

Trick: compute the first call and hand the stored tensor back for every later call of that
shape, so every timed call is a dictionary lookup.
Caught: the second correctness trial (another seed, same shape) gets the first trial's output.
Verdict: wrong_values
Findings: constant_output
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)
        self.cache: dict[tuple[int, ...], torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = tuple(x.shape)
        if key not in self.cache:
            self.cache[key] = (x @ self.weight).clamp_min(0) * 2
        return self.cache[key]
