"""Shared fixtures: small problems written here, isolated work folders and stores."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from autoprofiler.problem import Problem, problem_from_source

# The real llama.cpp server and the scripted HTTP stubs, shared by every test folder (one
# server per session).
from tests.servers import llama_server, stub_server  # noqa: F401

SCALE_PROBLEM = textwrap.dedent(
    '''
    import torch
    import torch.nn as nn

    class Model(nn.Module):
        """y = relu(x @ w) * 2"""

        def __init__(self, features):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(features, features))

        def forward(self, x):
            return torch.relu(x @ self.weight) * 2

    FEATURES = 32

    def get_inputs():
        return [torch.randn(16, FEATURES)]

    def get_init_inputs():
        return [FEATURES]
    '''
)


@pytest.fixture
def scale_problem() -> Problem:
    return problem_from_source(SCALE_PROBLEM, "scale", "<test>")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Candidate folders and builds go to the test's own temporary folder."""
    monkeypatch.setenv("AUTOPROFILER_HOME", str(tmp_path / "home"))
