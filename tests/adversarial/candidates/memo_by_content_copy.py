"""Memoising on the input's values, handing back copies: a known gap.

Trick: as ``memo_by_content``, keyed on a hash of the input's bytes, but every call returns a
copy of the remembered output, so that overwriting what it returned does not reach the cache.
Caught: once a gap (timing repeated identical inputs); now every timed call gets an input it
has not seen, so the cache never answers and the candidate shows no speedup.
Verdict: correct or cheat
Speedup-at-most: 1.5
"""

import hashlib

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)
        self.remembered: dict[str, torch.Tensor] = {}

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        key = hashlib.sha256(x.detach().cpu().contiguous().numpy().tobytes()).hexdigest()
        output = self.remembered.get(key)
        if output is None:
            output = self.remembered[key] = (x @ self.weight).clamp_min(0) * 2
        return output.clone()
