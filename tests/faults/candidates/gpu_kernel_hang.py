"""A kernel that never finishes: a Triton loop on a flag nobody sets (GPU only).

Device: cuda
Verdict: timeout
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _spin(flag_ptr):
    flag = tl.load(flag_ptr, volatile=True)
    while flag == 0:
        flag = tl.load(flag_ptr, volatile=True)


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        flag = torch.zeros(1, dtype=torch.int32, device=x.device)
        _spin[(1,)](flag)
        torch.cuda.synchronize()
        return x
