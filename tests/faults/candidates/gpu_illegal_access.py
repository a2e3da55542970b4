"""An illegal memory access in a Triton kernel (a store far out of bounds; GPU only).

Device: cuda
Verdict: cuda_error or killed_by_signal or runtime_error
"""

import torch
import torch.nn as nn
import triton
import triton.language as tl


@triton.jit
def _scribble(out_ptr, offset):
    tl.store(out_ptr + offset, 1.0)


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out = torch.empty_like(x)
        _scribble[(1,)](out, 2**40)
        torch.cuda.synchronize()
        return out
