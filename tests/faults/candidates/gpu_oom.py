"""GPU out of memory: 4 TiB asked for on the device (GPU only).

Device: cuda
Verdict: out_of_memory
"""

import torch
import torch.nn as nn


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.empty(2**40, dtype=torch.float32, device=x.device)
