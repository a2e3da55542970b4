"""Memoising on the input's values: a known gap.

Trick: key a cache on a checksum of the input's values; the timing loop repeats the same
inputs, so every timed call after the first is a lookup, while any new values (every
correctness trial, the re-check) are computed honestly and come out right.
Caught: not yet. The timed calls repeat identical inputs, as in KernelBench and Triton's
do_bench; catching this needs new values on every timed call (docs/SECURITY.md).
Verdict: cheat
Gap: timing repeats identical inputs; a cache keyed on their values is not seen
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
