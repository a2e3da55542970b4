"""Fixtures for the profiler tests: real ncu captures (``tests/data/ncu``) and tiny problems."""

from __future__ import annotations

import gzip
import textwrap
from pathlib import Path

import pytest

from autoprofiler.problem import Problem

NCU_DATA = Path(__file__).resolve().parents[1] / "data" / "ncu"


def ncu_text(name: str) -> str:
    """A captured ncu output from ``tests/data/ncu`` (``.gz`` files are unpacked)."""
    path = NCU_DATA / name
    if path.suffix == ".gz":
        return gzip.decompress(path.read_bytes()).decode("utf-8")
    return path.read_text(encoding="utf-8")


def make_problem(name: str, body: str) -> Problem:
    """A problem from the body of a KernelBench-style source (imports added)."""
    source = "import torch\nimport torch.nn as nn\n\n" + textwrap.dedent(body)
    return Problem(name=name, source=source, origin="<test>")


GEMM = """
    class Model(nn.Module):
        def forward(self, a, b):
            return a @ b

    M, N, K = 64, 32, 128

    def get_inputs():
        return [torch.randn(M, K), torch.randn(K, N)]

    def get_init_inputs():
        return []
    """

CONV_RELU = """
    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.conv = nn.Conv2d(3, 8, 3)

        def forward(self, x):
            return torch.relu(self.conv(x))

    def get_inputs():
        return [torch.randn(2, 3, 16, 16)]

    def get_init_inputs():
        return []
    """

FAILING = """
    class Model(nn.Module):
        def forward(self, x):
            raise RuntimeError("this problem always fails")

    def get_inputs():
        return [torch.randn(4)]

    def get_init_inputs():
        return []
    """


@pytest.fixture
def gemm() -> Problem:
    return make_problem("gemm", GEMM)


@pytest.fixture
def conv_relu() -> Problem:
    return make_problem("conv_relu", CONV_RELU)


@pytest.fixture
def failing() -> Problem:
    return make_problem("failing", FAILING)
