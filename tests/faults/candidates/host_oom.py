"""Host out of memory: 4 GiB asked for in forward (run under a 2 GiB cap).

Verdict: out_of_memory
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.ones(2**30, dtype=torch.float32)
