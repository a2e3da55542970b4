"""A C++ extension that does not compile (``load_inline`` with broken source).

Verdict: build_error
"""

import torch
import torch.nn as nn
from torch.utils.cpp_extension import load_inline

SOURCE = """
#include <torch/extension.h>
torch::Tensor scale(torch::Tensor x) { return x * 2 }  // the semicolon is missing
"""

extension = load_inline("redteam_broken", cpp_sources=SOURCE, functions=["scale"])


class ModelNew(nn.Module):
    def __init__(self, features: int) -> None:
        super().__init__()

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return extension.scale(x)
