"""Scoring a tree on problems: profile once and replay, rewrite once, evaluate once.

For each problem the tree is run against a ``RecordedProfiler`` (real recorded profiles and their
real costs, charged against the budget; ncu never runs again). The rewriter's candidate is cached
by (problem, profile content, rewriter id, rewrite context) in the store's ``learn.candidate``
key-value space (the profile's ``content_hash`` covers its metrics and kernels, not its cost or
path), and the evaluation by (problem, candidate, device, configuration) in the store's
evaluations table (``evaluate`` does that). Two trees that give a problem the same information
therefore cost nothing the second time; ``CacheStats`` counts how often that happened.
"""

from __future__ import annotations

import logging
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING

from autoprofiler.evaluate import EvalConfig, EvalResult
from autoprofiler.execute.evaluation import evaluate_many
from autoprofiler.learn.objective import Objective, ProblemOutcome, TreeScore
from autoprofiler.problem import source_hash
from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter, profile_hash
from autoprofiler.store import CANDIDATE_SPACE, Store, content_key
from autoprofiler.tree.run import run_tree

if TYPE_CHECKING:
    from collections.abc import Sequence

    from autoprofiler.execute import Executor
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profile
    from autoprofiler.profile.recorded import RecordedProfiler
    from autoprofiler.tree.model import ProfilingTree

log = logging.getLogger(__name__)

_KEY_VERSION = "learn-candidate/1"


def rewriter_cache_id(rewriter: Rewriter) -> str:
    """The id a rewriter's candidates are cached under: its class and name, plus the model and
    sampling settings of an LLM rewriter (any rewriter with ``client`` and ``params``)."""
    parts = [f"{type(rewriter).__module__}.{type(rewriter).__qualname__}", rewriter.name]
    client = getattr(rewriter, "client", None)
    if client is not None and hasattr(client, "model_id"):
        parts.append(client.model_id)
    params = getattr(rewriter, "params", None)
    if params is not None and hasattr(params, "to_dict"):
        parts.append(content_key(params.to_dict())[:12])
    return ":".join(parts)


@dataclass
class CacheStats:
    """How many rewrites and evaluations were asked for and how many were answered from a
    cache (the store, or this run's memory of a (problem, profile) pair already scored)."""

    rewrites: int = 0
    rewrite_hits: int = 0
    evaluations: int = 0
    evaluation_hits: int = 0

    @property
    def hit_rate(self) -> float:
        """Share of rewrite and evaluation requests served from a cache (0 when none)."""
        asked = self.rewrites + self.evaluations
        return (self.rewrite_hits + self.evaluation_hits) / asked if asked else 0.0

    @property
    def evaluations_run(self) -> int:
        return self.evaluations - self.evaluation_hits

    def to_dict(self) -> dict[str, float]:
        return {**asdict(self), "hit_rate": self.hit_rate}


class CachedRewriter(Rewriter):
    """``rewriter`` with its candidates kept in ``store``, keyed by problem, profile content,
    rewriter id and context. Failed candidates are cached too (the rewriter is deterministic,
    or its LLM replies are cached); a rewriter that raises is not, and gives a failed
    candidate. Without ``use_cache`` a stored candidate is not read (the rewriter is asked
    again); what it gives is stored all the same."""

    def __init__(
        self, rewriter: Rewriter, store: Store, rewriter_id: str, use_cache: bool = True
    ) -> None:
        self.rewriter = rewriter
        self.store = store
        self.id = rewriter_id
        self.name = rewriter.name
        self.builtin = rewriter.builtin
        self.use_cache = use_cache
        self.hits = 0

    def key(self, problem: Problem, profile: Profile | None, context: RewriteContext) -> str:
        return content_key(
            _KEY_VERSION,
            problem.content_hash,
            profile_hash(profile),
            self.id,
            asdict(context),
        )

    def rewrite(
        self, problem: Problem, profile: Profile | None, context: RewriteContext
    ) -> Candidate:
        key = self.key(problem, profile, context)
        stored = self.store.get(CANDIDATE_SPACE, key) if self.use_cache else None
        if stored is not None:
            self.hits += 1
            return Candidate.from_dict(stored)
        try:
            candidate = self.rewriter.rewrite(problem, profile, context)
        except Exception as exc:  # a rewriter bug must fail one problem, not the study
            failure = f"rewriter raised {type(exc).__name__}: {exc}"
            log.warning("%s: %s: %s", problem.key, self.id, failure)
            return Candidate("", self.name, profile_hash(profile), failure=failure)
        self.store.put(CANDIDATE_SPACE, key, candidate.to_dict())
        return candidate


class TreeScorer:
    """Scores profiling trees on problems with recorded profiles, one rewrite and one evaluation
    per problem, everything cached (see the module docstring).

    ``budget_s`` is the profiling budget per problem (None: unlimited); ``context`` what the
    rewriter is told about the target; ``eval_config`` how candidates are judged;
    ``executor`` where they are (default: one by one in this process). Without ``use_cache``
    the store's candidates and evaluations from earlier runs are not reused (this scorer
    still remembers what it did itself).
    """

    def __init__(
        self,
        profiler: RecordedProfiler,
        rewriter: Rewriter,
        store: Store,
        *,
        budget_s: float | None,
        objective: Objective | None = None,
        eval_config: EvalConfig | None = None,
        context: RewriteContext | None = None,
        rewriter_id: str | None = None,
        executor: Executor | None = None,
        use_cache: bool = True,
    ) -> None:
        self.profiler = profiler
        self.store = store
        self.budget_s = budget_s
        self.objective = objective or Objective()
        self.eval_config = eval_config or EvalConfig()
        self.context = context or RewriteContext()
        self.rewriter = CachedRewriter(
            rewriter, store, rewriter_id or rewriter_cache_id(rewriter), use_cache
        )
        self.executor = executor
        self.use_cache = use_cache
        self.stats = CacheStats()
        self._memo: dict[tuple[str, str], tuple[Candidate, EvalResult | None]] = {}
        self._unevaluated: list[tuple[str, str]] = []  # memo keys of candidates to evaluate

    def outcome(self, tree: ProfilingTree, problem: Problem) -> tuple[ProblemOutcome, Profile]:
        """Run ``tree`` for ``problem`` within the budget, rewrite from the profile, evaluate."""
        profile, key = self._rewrite(tree, problem)
        self._evaluate([problem])
        return self._outcome(problem, profile, key), profile

    def score(self, tree: ProfilingTree, problems: Sequence[Problem]) -> TreeScore:
        """The objective's score of ``tree`` on ``problems`` (in their order).

        Every problem is profiled and rewritten first; then the candidates not evaluated yet
        are evaluated together, on the executor's workers when there is one.
        """
        rewritten = {p.content_hash: self._rewrite(tree, p) for p in problems}
        self._evaluate(problems)
        outcomes = [self._outcome(p, *rewritten[p.content_hash]) for p in problems]
        return self.objective.score(outcomes, {h: pk[0] for h, pk in rewritten.items()})

    def _rewrite(self, tree: ProfilingTree, problem: Problem) -> tuple[Profile, tuple[str, str]]:
        """Profile ``problem`` with ``tree`` and rewrite it once per profile (remembered); the
        profile and its key (problem and profile hashes)."""
        profile = run_tree(tree, problem, self.profiler, self.budget_s)
        key = (problem.content_hash, profile.content_hash)
        self.stats.rewrites += 1
        if key in self._memo:
            self.stats.rewrite_hits += 1
            result = self._memo[key][1]
            self.stats.evaluations += result is not None
            self.stats.evaluation_hits += result is not None
        else:
            hits_before = self.rewriter.hits
            candidate = self.rewriter.rewrite(problem, profile, self.context)
            self.stats.rewrite_hits += self.rewriter.hits - hits_before
            self._memo[key] = (candidate, None)
            if candidate.usable:
                self._unevaluated.append(key)
        return profile, key

    def _evaluate(self, problems: Sequence[Problem]) -> None:
        """Evaluate the usable candidates rewritten for ``problems`` and not evaluated yet."""
        by_hash = {p.content_hash: p for p in problems}
        todo = [key for key in self._unevaluated if key[0] in by_hash]
        self._unevaluated = [key for key in self._unevaluated if key[0] not in by_hash]
        waiting: dict[tuple[str, str], list[tuple[str, str]]] = {}
        for key in todo:
            source = self._memo[key][0].source
            waiting.setdefault((key[0], source_hash(source)), []).append(key)
        pairs = [(by_hash[key[0]], self._memo[key][0].source) for key in todo]
        for done in evaluate_many(
            pairs,
            self.eval_config,
            executor=self.executor,
            store=self.store,
            use_cache=self.use_cache,
        ):
            asked = waiting[(done.problem.content_hash, source_hash(done.source))]
            for index, key in enumerate(asked):
                self._memo[key] = (self._memo[key][0], done.result)
                self.stats.evaluations += 1
                self.stats.evaluation_hits += done.result.from_cache if index == 0 else 1

    def _outcome(self, problem: Problem, profile: Profile, key: tuple[str, str]) -> ProblemOutcome:
        candidate, result = self._memo[key]
        return ProblemOutcome.of(
            problem.key, profile, candidate, result, key[1], builtin=self.rewriter.builtin
        )
