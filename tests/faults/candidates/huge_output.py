"""A huge output: a 2**20 x 2**20 view (4 TiB if anyone made a copy of it).

Verdict: wrong_shape
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x.new_zeros(1).expand(2**20, 2**20)
