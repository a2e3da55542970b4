"""RuleRewriter: the built-in, offline, deterministic rewriter (no LLM)."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING, Any

from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter, profile_hash
from autoprofiler.rewrite.rules import transforms
from autoprofiler.rewrite.rules.signals import read_signals
from autoprofiler.rewrite.rules.transforms import Analysis, Facts, Score
from autoprofiler.rewrite.rules.triton_codegen import DEFAULT_MAX_SINGLE_PASS

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profile

log = logging.getLogger(__name__)

PRODUCER = "rules"


class RuleRewriter(Rewriter):
    """Picks one transformation from the catalogue by profile-guided rules and emits it.

    The same problem, profile and context always give the same candidate. ``max_single_pass``
    is the longest row the generated row kernels read in one pass (longer rows loop).
    """

    name = PRODUCER

    def __init__(self, max_single_pass: int = DEFAULT_MAX_SINGLE_PASS) -> None:
        self.max_single_pass = max_single_pass
        self._analyses: dict[str, Analysis] = {}

    def analysis(self, problem: Problem) -> Analysis:
        """The problem's traces and matched patterns (computed once per problem)."""
        key = problem.content_hash
        if key not in self._analyses:
            self._analyses[key] = Analysis.of(problem)
        return self._analyses[key]

    def blockers(self, problem: Problem, context: RewriteContext) -> dict[str, str]:
        """Why each transformation does not apply ("" for those that do), in catalogue order."""
        return self._judge(self._facts(problem, None, context))[0]

    def applicable(self, problem: Problem, context: RewriteContext) -> list[str]:
        """The transformations that apply to ``problem`` under ``context``, in catalogue order."""
        return [name for name, why in self.blockers(problem, context).items() if not why]

    def scores(
        self, problem: Problem, profile: Profile | None, context: RewriteContext
    ) -> dict[str, Score]:
        """The score of every applicable transformation, in catalogue order."""
        return self._judge(self._facts(problem, profile, context))[1]

    def rewrite(
        self, problem: Problem, profile: Profile | None, context: RewriteContext
    ) -> Candidate:
        """The candidate of the best-scoring applicable transformation (ties: catalogue order).

        Should the best one fail to generate, the next is tried; ``info`` records the scores,
        their reasons and why the others do not apply.
        """
        facts = self._facts(problem, profile, context)
        blockers, scored = self._judge(facts)
        ranked = sorted(scored, key=lambda n: (-scored[n].value, transforms.ORDER.index(n)))
        info: dict[str, Any] = {
            "scores": {name: score.value for name, score in scored.items()},
            "reasons": {name: score.reason for name, score in scored.items()},
            "not_applicable": {name: why for name, why in blockers.items() if why},
        }
        failures: dict[str, str] = {}
        for name in ranked:
            candidate = self._emit(facts, name, scored[name].reason, profile_hash(profile))
            if candidate.usable:
                candidate.info.update(info)
                if failures:
                    candidate.info["generation_failures"] = failures
                return candidate
            failures[name] = candidate.failure
        failure = "no transformation could be generated: " + "; ".join(failures.values())
        return Candidate("", PRODUCER, profile_hash(profile), info, failure)

    def generate(self, problem: Problem, name: str, context: RewriteContext) -> Candidate:
        """The candidate of transformation ``name``, scored without a profile.

        A transformation that does not apply gives a failed candidate saying why; a name that
        is not in the catalogue raises ``KeyError``.
        """
        transformation = transforms.get(name)
        facts = self._facts(problem, None, context)
        why = transformation.blocker(facts)
        if why:
            info = {"transformation": name}
            return Candidate("", PRODUCER, "", info, failure=f"{name} does not apply: {why}")
        return self._emit(facts, name, _rounded(transformation.score(facts)).reason, "")

    def _facts(self, problem: Problem, profile: Profile | None, context: RewriteContext) -> Facts:
        analysis = self.analysis(problem)
        signals = read_signals(profile, analysis.graph)
        return Facts(analysis, signals, context, self.max_single_pass)

    @staticmethod
    def _judge(facts: Facts) -> tuple[dict[str, str], dict[str, Score]]:
        blockers = {t.name: t.blocker(facts) for t in transforms.CATALOGUE}
        scored = {
            t.name: _rounded(t.score(facts)) for t in transforms.CATALOGUE if not blockers[t.name]
        }
        return blockers, scored

    @staticmethod
    def _emit(facts: Facts, name: str, reason: str, hash_: str) -> Candidate:
        info: dict[str, Any] = {"transformation": name, "reason": reason}
        problem = facts.analysis.problem.name
        try:
            source = transforms.get(name).generate(facts)
        except Exception as exc:  # a generator bug must become a failed candidate, not a crash
            log.warning("rules: %s: generating %s failed: %s", problem, name, exc)
            failure = f"{name}: {type(exc).__name__}: {exc}"
            return Candidate("", PRODUCER, hash_, info, failure=failure)
        log.info("rules: %s -> %s (%s)", problem, name, reason)
        return Candidate(source, PRODUCER, hash_, info)


def _rounded(score: Score) -> Score:
    return Score(round(score.value, 3), score.reason)
