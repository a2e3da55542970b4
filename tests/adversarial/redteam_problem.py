"""Red-team reference: y = relu(x @ W) * 2 over a batch of rows, in the KernelBench contract.

``batch_size`` is the batch knob the evaluator varies for its second-shape trial.
"""

import torch
import torch.nn as nn

batch_size = 16
features = 32


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.relu(torch.matmul(x, self.weight)) * 2


def get_inputs() -> list[torch.Tensor]:
    return [torch.randn(batch_size, features)]


def get_init_inputs() -> list[int]:
    return [features]
