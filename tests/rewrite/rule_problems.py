"""Problems for the rule rewriter's tests; sizes are format fields (``{B}``, ``{D}``, ``{C}``).

Rule tests trace them on the meta device only, so their sizes can be realistic; codegen tests
run them small through the evaluator.
"""

from __future__ import annotations

import textwrap

from autoprofiler.problem import Problem, problem_from_source

HEADER = "import torch\nimport torch.nn as nn\nimport torch.nn.functional as F\n"


def make(name: str, body: str, **sizes: int) -> Problem:
    """A checked problem from a body whose ``{SIZE}`` fields are filled from ``sizes``."""
    return problem_from_source(HEADER + textwrap.dedent(body).format(**sizes), name, "<test>")


CHAIN = """
class Model(nn.Module):
    def forward(self, x):
        y = F.leaky_relu(x * 2.0 - 1.0, 0.1)
        return torch.sigmoid(y) + torch.tanh(x).clamp(-0.5, 0.5) / 3

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return []
"""

LINEAR_GELU = """
class Model(nn.Module):
    def __init__(self, features, out):
        super().__init__()
        self.linear = nn.Linear(features, out)
        self.act = nn.GELU(approximate="tanh")

    def forward(self, x):
        x = F.gelu(self.linear(x))
        return self.act(x * 0.5 + 0.25)

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return [{D}, {D}]
"""

SOFTMAX = """
class Model(nn.Module):
    def forward(self, x):
        return torch.softmax(x, dim=-1)

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return []
"""

LAYERNORM = """
class Model(nn.Module):
    def __init__(self, features):
        super().__init__()
        self.norm = nn.LayerNorm(features)

    def forward(self, x):
        return self.norm(x)

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return [{D}]
"""

ROW_SUM = """
class Model(nn.Module):
    def forward(self, x):
        return x.sum(dim=-1) + x.mean(-1) + torch.max(x, dim=1)[0]

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return []
"""

MANY_TINY = """
class Model(nn.Module):
    def forward(self, x):
        for _ in range(12):
            x = torch.sin(x) + torch.cos(x)
        return x

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return []
"""

CONV = """
class Model(nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = nn.Conv2d(3, channels, 3)
        self.bias = nn.Parameter(torch.randn(channels, 1, 1))
        self.scale = nn.Parameter(torch.tensor(0.5))

    def forward(self, x):
        return torch.relu(self.conv(x) + self.bias) * self.scale

def get_inputs():
    return [torch.randn({B}, 3, {D}, {D})]

def get_init_inputs():
    return [{C}]
"""

GEMM = """
class Model(nn.Module):
    def forward(self, a, b):
        return torch.matmul(a, b)

def get_inputs():
    return [torch.randn({D}, {D}), torch.randn({D}, {D})]

def get_init_inputs():
    return []
"""

UNTRACEABLE = """
class Model(nn.Module):
    def forward(self, x):
        if x.sum() > 0:  # control flow on a value: FX cannot trace it
            return torch.relu(x)
        return x

def get_inputs():
    return [torch.randn({B}, {D})]

def get_init_inputs():
    return []
"""

CONV_VIEW = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 8, 3)

    def forward(self, x):
        x = self.conv(x)
        return x.view(x.shape[0], -1)

def get_inputs():
    return [torch.randn({B}, 3, {D}, {D})]

def get_init_inputs():
    return []
"""

EVERY_OP = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.row = nn.Parameter(torch.randn({D}))
        self.act = nn.LeakyReLU(0.2)
        self.ht = nn.Hardtanh(-2.0, 2.0)
        self.sp = nn.Softplus(beta=2.0, threshold=5.0)
        self.selu = nn.SELU()

    def forward(self, x, y):  # tanh between lines keeps values near 1: errors show unscaled
        x = torch.tanh(self.act(x) / 1.5 + torch.sigmoid(x) + F.silu(x) + F.mish(x))
        x = torch.tanh(self.ht(x * 3.0) + x.clamp(min=-0.5) + torch.clamp(x, max=0.5) + F.relu6(x))
        x = torch.tanh(self.sp(x) + F.elu(x, alpha=0.7) + F.hardswish(x) + F.hardsigmoid(x))
        x = torch.tanh(self.selu(x) + x.abs().sqrt() + torch.exp(-x.square()) + x**3)
        x = torch.tanh(torch.maximum(x, -x * 0.5) + torch.log(x.abs() + 2.0) + (2 - x) + x.neg())
        x = torch.minimum(x, y) + torch.relu(x) * self.row + 1.0 / (x.abs() + 1) + x.pow(2)
        return x - F.gelu(y) + y.sub(x).mul(0.5).div(3.0).add(1.0) - torch.rsqrt(x.abs() + 1.0)


def get_inputs():
    return [torch.randn({B}, {D}) * 0.5, torch.randn({B}, 1) * 0.5]

def get_init_inputs():
    return []
"""

ROWS = """
class Model(nn.Module):
    def __init__(self):
        super().__init__()
        self.norm = nn.LayerNorm(({C}, {D}), elementwise_affine=False)
        self.weight = nn.Parameter(torch.randn({D}))
        self.softmax = nn.Softmax(dim=1)

    def forward(self, x):
        a = self.softmax(x) + F.log_softmax(x, dim=-1) + torch.softmax(x, 0)
        b = self.norm(x) + F.layer_norm(x, ({D},), self.weight, None, 1e-6)
        c = x.sum(1, keepdim=True) + x.mean(dim=-1, keepdim=True)
        c = c + torch.amax(x, dim=(2,), keepdim=True)
        d = torch.min(x, dim=0)[0] + x.max(0).values + x.sum(-1).unsqueeze(-1)
        return a + b + c + d

def get_inputs():
    return [torch.randn({B}, {C}, {D})]

def get_init_inputs():
    return []
"""

BIG = {"B": 4096, "D": 8192}
TINY = {"B": 4, "D": 4}
