"""A rewriter whose candidate depends on the profile, for testing the learner through the real
evaluator: with ``metric`` in the profile it returns the reference itself as ``ModelNew``
(about 1.0x); without it, a correct candidate that runs the reference ``repeats`` times (far
slower). ``delay_s`` makes each rewrite take that long (to catch a run mid-trial);
``interrupt_after`` rewrites, the next raises ``KeyboardInterrupt``, as a kill would stop a run
mid-trial (neither setting changes the candidates or the rewriter's name)."""

from __future__ import annotations

import time

from autoprofiler.problem import Problem
from autoprofiler.profile.base import Profile
from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter, profile_hash

GATE_METRIC = "static.flops"

_SLOW_TAIL = """

class ModelNew(_Reference):
    def forward(self, *args):
        for _ in range({repeats} - 1):
            super().forward(*args)
        return super().forward(*args)
"""


class GatedRewriter(Rewriter):
    def __init__(
        self,
        metric: str = GATE_METRIC,
        repeats: int = 12,
        delay_s: float = 0.0,
        interrupt_after: int | None = None,
    ) -> None:
        self.metric = metric
        self.repeats = repeats
        self.delay_s = delay_s
        self.interrupt_after = interrupt_after
        self.name = f"gated:{metric}:{repeats}:{delay_s:g}"
        self.calls = 0

    @staticmethod
    def fast_source(problem: Problem) -> str:
        return problem.source.replace("class Model(", "class ModelNew(")

    def slow_source(self, problem: Problem) -> str:
        renamed = problem.source.replace("class Model(", "class _Reference(")
        return renamed + _SLOW_TAIL.format(repeats=self.repeats)

    def rewrite(
        self, problem: Problem, profile: Profile | None, context: RewriteContext
    ) -> Candidate:
        if self.calls == self.interrupt_after:
            raise KeyboardInterrupt
        self.calls += 1
        time.sleep(self.delay_s)
        informed = profile is not None and profile.value(self.metric) is not None
        source = self.fast_source(problem) if informed else self.slow_source(problem)
        return Candidate(source, self.name, profile_hash(profile), {"informed": informed})


def slow_to_rewrite() -> GatedRewriter:
    """The CLI's plug-in: a gated rewriter that takes half a second per rewrite."""
    return GatedRewriter(delay_s=0.5)
