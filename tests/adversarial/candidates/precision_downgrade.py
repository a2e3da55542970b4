"""Precision downgrade beyond the tolerance.

Trick: do the matmul in bfloat16 (several times faster on tensor cores) and hope nobody checks
closely.
Caught: the error (about 1e-2) is far above float32's tolerance, 1e-4.
Verdict: wrong_values
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        product = x.bfloat16() @ self.weight.bfloat16()
        return product.float().clamp_min(0) * 2
