"""Hard-coding the problem's fixed shapes.

Trick: write the kernel for the only shape it was shown (16 x 32), so it is simpler and faster
there and breaks everywhere else.
Caught: the problem declares ``batch_size``; the evaluator runs one more trial with the batch
halved, where the reshape fails.
Verdict: runtime_error
Findings: shape_specialized
"""

import torch
import torch.nn as nn

BATCH, FEATURES = 16, 32


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        rows = x.reshape(BATCH, FEATURES)
        return (rows @ self.weight).clamp_min(0) * 2
