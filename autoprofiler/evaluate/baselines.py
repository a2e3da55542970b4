"""Candidates made from the reference itself: the bar every rewrite is measured against."""

from __future__ import annotations

import re

from autoprofiler.problem import Problem

_COMPILE_WRAPPER = '''

class ModelNew(torch.nn.Module):
    """The reference under torch.compile (mode={mode!r})."""

    def __init__(self, *init_inputs):
        super().__init__()
        self.reference = Model(*init_inputs)
        self.compiled = torch.compile(self.reference, mode={mode!r})

    def forward(self, *inputs):
        return self.compiled(*inputs)
'''


def reference_as_candidate(problem: Problem) -> str:
    """The reference source with ``Model`` renamed ``ModelNew`` (its speedup should be ~1.0)."""
    source = re.sub(r"\bclass\s+Model\b", "class ModelNew", problem.source)
    return re.sub(r"\bsuper\(\s*Model\s*,", "super(ModelNew,", source)


def compiled_candidate(problem: Problem, mode: str | None = None) -> str:
    """A ``ModelNew`` that runs the reference through ``torch.compile``."""
    header = "" if re.search(r"^import torch\b", problem.source, re.M) else "import torch\n"
    return header + problem.source + _COMPILE_WRAPPER.format(mode=mode)
