"""Changing the process's thread count: ``torch.set_num_threads(1)`` at import.

Trick: the math is honest, but the candidate changes a process-wide setting that outlives
its calls: whatever runs in the process after it (a reference timed there included) runs on
one thread.
Caught: flagged. Process-wide settings that the candidate changes are reported; the verdict
stands on the values, which are right.
Verdict: correct
Findings: changes_settings
"""

import torch
import torch.nn as nn

torch.set_num_threads(1)


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return (x @ self.weight).clamp_min(0) * 2
