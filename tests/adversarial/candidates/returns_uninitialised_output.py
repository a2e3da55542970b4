"""Returning an uninitialised tensor shaped like the input, hoping it holds an old result.

Restates ``result_reuse_kernel.py`` of https://github.com/ScalingIntelligence/KernelBench.
Trick: the output has the input's shape (features in, features out), so ``torch.empty_like(x)``
is an output-sized request that does no work; an allocator that hands back a block just freed
by the reference's output would make it pass.
Caught: the reference's outputs are never in the candidate's process, and every trial and
every timed call gets new values, so whatever the block holds is wrong.
Verdict: wrong_values or cheat
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(x)
