"""Cached output keyed by the input tensor's data pointer.

Trick: the timing loop passes the same tensor on every call, so a cache keyed by its address
makes every timed call after the first a lookup, while fresh tensors in the correctness trials
still get computed.
Caught: the re-check after timing refills the very tensors that were timed with fresh values;
the cache answers with the output of the old values (or a later trial, the one at a second
input shape included, gets a freed address back and the cache answers with a stale output).
Verdict: cheat or wrong_values or wrong_shape
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)
        self.cache: dict[int, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = x.data_ptr()
        if key not in self.cache:
            self.cache[key] = (x @ self.weight).clamp_min(0) * 2
        return self.cache[key]
