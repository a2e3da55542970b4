"""Changing cuDNN's process-wide flags at import: ``benchmark`` and ``deterministic``.

Trick: the math is honest, but ``torch.backends.cudnn.benchmark = True`` and
``torch.backends.cudnn.deterministic = True`` change how every later convolution in the
process picks its algorithm, the reference's included (the flags exist, and can be set,
without a GPU).
Caught: flagged. Process-wide settings that the candidate changes are reported; the verdict
stands on the values, which are right.
Verdict: correct
Findings: changes_settings
"""

import torch
import torch.nn as nn

torch.backends.cudnn.benchmark = True
torch.backends.cudnn.deterministic = True


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight).clamp_min(0) * 2
