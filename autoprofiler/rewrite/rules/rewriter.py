"""RuleRewriter: the built-in, offline, deterministic rewriter (no LLM)."""

from __future__ import annotations

import itertools
import logging
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any

from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter, profile_hash
from autoprofiler.rewrite.rules import transforms
from autoprofiler.rewrite.rules.signals import Signals, read_signals
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
    is the longest row the generated row kernels read in one pass (longer rows loop);
    ``exclude`` names transformations never to pick (e.g. ``compile_max_autotune`` where its
    minutes of autotuning are not affordable).
    """

    name = PRODUCER
    builtin = True

    def __init__(
        self, max_single_pass: int = DEFAULT_MAX_SINGLE_PASS, exclude: Iterable[str] = ()
    ) -> None:
        self.max_single_pass = max_single_pass
        self.exclude = frozenset(exclude)
        for name in self.exclude:
            transforms.get(name)  # an unknown name raises KeyError listing the known ones
        if self.exclude:
            self.name = f"{PRODUCER}-without-{'-'.join(sorted(self.exclude))}"
        self._analyses: dict[str, Analysis] = {}

    @classmethod
    def from_name(cls, name: str) -> RuleRewriter:
        """The rule rewriter a name gives: ``rules``, or ``rules-without-A-B`` (transformations
        A and B left out, the name that rewriter gives itself). Raises ``ValueError`` for any
        other name and ``KeyError`` for an unknown transformation."""
        if name == PRODUCER:
            return cls()
        prefix = f"{PRODUCER}-without-"
        if not name.startswith(prefix):
            raise ValueError(f"{name!r} is not rules or rules-without-NAME")
        return cls(exclude=name[len(prefix) :].split("-"))

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

    def reachable(self, problem: Problem, context: RewriteContext) -> list[str]:
        """Every transformation some profile could make ``rewrite`` pick, in catalogue order.

        Rules read a profile only through four signals (compute-, memory- and launch-bound,
        idle tensor pipes), each either measured true, measured false or left to the prior, so
        enumerating those combinations covers every profile. A transformation whose generation
        fails is passed over as ``rewrite`` would. Used to evaluate, once, every candidate that
        any profiling tree could lead to (the replay data of ``bench``/``learn``).
        """
        analysis = self.analysis(problem)
        prior = read_signals(None, analysis.graph)
        bounds = [(prior.compute_bound, prior.memory_bound, False)]
        bounds += [(True, False, True), (False, True, True), (False, False, True)]
        flags = [(prior.launch_bound, False), (True, True), (False, True)]
        idle = [(prior.tensor_pipes_idle, False), (True, True), (False, True)]
        chosen: set[str] = set()
        usable: dict[str, bool] = {}
        for (compute, memory, bound_m), (launch, launch_m), (tensor, tensor_m) in itertools.product(
            bounds, flags, idle
        ):
            measured = {"compute_bound", "memory_bound"} if bound_m else set()
            measured |= {"launch_bound"} if launch_m else set()
            measured |= {"tensor_pipes_idle"} if tensor_m else set()
            signals = Signals(compute, memory, launch, tensor, {}, frozenset(measured))
            facts = Facts(analysis, signals, context, self.max_single_pass)
            scored = self._judge(facts)[1]
            for name in sorted(scored, key=lambda n: (-scored[n].value, transforms.ORDER.index(n))):
                if name not in usable:
                    usable[name] = self._emit(facts, name, "", "").usable
                if usable[name]:
                    chosen.add(name)
                    break
        return [name for name in transforms.ORDER if name in chosen]

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
        signals = read_signals(None if profile is None else profile.seen, analysis.graph)
        return Facts(analysis, signals, context, self.max_single_pass)

    def _judge(self, facts: Facts) -> tuple[dict[str, str], dict[str, Score]]:
        blockers = {
            t.name: "excluded by the rewriter's configuration"
            if t.name in self.exclude
            else t.blocker(facts)
            for t in transforms.CATALOGUE
        }
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
