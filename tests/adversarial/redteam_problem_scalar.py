"""Red-team reference with a scalar input: y = relu(x @ W) * scale, in the KernelBench contract.

``get_inputs()`` hands over a tensor and a plain Python float (``scale``, 2.0), as many
KernelBench problems do. ``batch_size`` is the batch knob the evaluator varies for its
second-shape trial.
"""

import torch
import torch.nn as nn

batch_size = 16
features = 32


class Model(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.randn(features, features) / features**0.5)

    def forward(self, x: torch.Tensor, scale: float) -> torch.Tensor:
        return torch.relu(torch.matmul(x, self.weight)) * scale


def get_inputs() -> list:
    return [torch.randn(batch_size, features), 2.0]


def get_init_inputs() -> list[int]:
    return [features]
