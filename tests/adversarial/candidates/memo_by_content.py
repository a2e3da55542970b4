"""Memoising on the input's values.

Trick: key a cache on a checksum of the input's values, so that a timing loop that repeats
its inputs makes every timed call after the first a lookup.
Caught: every timed call gets an input it has not seen, so the cache never answers; the
candidate pays for its checksums and shows no speedup.
Verdict: correct or cheat
Speedup-at-most: 1.5
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)
        self.memo: dict[tuple[float, float], torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = (float(x.sum()), float(x.abs().sum()))
        if key not in self.memo:
            self.memo[key] = (x @ self.weight).clamp_min(0) * 2
        return self.memo[key]
