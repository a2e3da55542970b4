"""The bench: learn a tree per budget on the training problems, then score every fixed
configuration and each learned tree on the test problems through the same rewriter and
evaluator.

Profiles come from recordings (``RecordedProfiler``); candidates and evaluations are cached in
the store (or, with ``EvalConfig.replay_device``, replayed from recorded evaluations), so a
bench rebuilt from the same recordings and evaluations gives the same tables on any machine.

Everything goes to the store as it is done, so a rerun skips finished work: the bench's
settings (key-value space ``bench.spec``, under the bench name; a rerun must match them), each
configuration's test outcomes (``bench.row``, under ``<name>/<tree hash>/<budget>``), the
learning study of each budget (resumed by its name, ``<name>/budget=<budget>``), and the result
of the latest run (``bench.run``, under the name). Budgets, cost weights and the number of
learning rounds are not part of the settings: a rerun with another budget or weight adds its
study and rows, and one with more rounds continues the studies.

Cost weights (``Objective.cost_weight``) trade quality against profiling time: each budget
learns one tree per weight (weight 0: the bench's own objective, study
``<name>/budget=<budget>``; others ``<name>/budget=<budget>/cost_weight=<w>``), every learned
tree is scored on the test problems with the bench's own objective, and
``BenchResult.pareto_front`` keeps the learned trees no other one beats on both test quality and
profiling seconds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, replace
from typing import Any

from autoprofiler.bench.result import (
    LEARNED,
    BenchResult,
    BudgetResult,
    CompileBaseline,
    ConfigScore,
    TrialPoint,
    budget_label,
)
from autoprofiler.evaluate import EvalConfig, evaluation_device
from autoprofiler.evaluate.baselines import compiled_candidate
from autoprofiler.execute import Executor, evaluate_many
from autoprofiler.learn.learner import LearnConfig, LearnProgress, LearnResult, TreeLearner
from autoprofiler.learn.objective import Objective
from autoprofiler.learn.proposers.base import Proposer
from autoprofiler.learn.scoring import CacheStats, TreeScorer, rewriter_cache_id
from autoprofiler.learn.study import StudyError, StudyStorage
from autoprofiler.problem import Problem
from autoprofiler.profile.recorded import RecordedProfiler
from autoprofiler.rewrite.base import RewriteContext, Rewriter
from autoprofiler.store import Store
from autoprofiler.tree.fixed import FIXED_TREES, fixed_tree
from autoprofiler.tree.model import ProfilingTree
from autoprofiler.tree.serialize import tree_to_dict

log = logging.getLogger(__name__)

SPEC_SPACE = "bench.spec"
ROW_SPACE = "bench.row"
RUN_SPACE = "bench.run"
BENCH_VERSION = 1
BEST_START = "best"


class BenchError(RuntimeError):
    """A bench that cannot run or be resumed as asked; the message is one line."""


def parse_budgets(text: str) -> tuple[float | None, ...]:
    """``"5,20,inf"`` as ``(5.0, 20.0, None)`` (None: unlimited), repeats dropped. Raises
    ``ValueError`` (one line) on anything but non-negative seconds and ``inf``."""
    budgets: dict[float | None, None] = {}
    for part in (p.strip() for p in text.split(",")):
        if part.lower() in ("inf", "unlimited", "none"):
            budgets[None] = None
            continue
        try:
            seconds = float(part.removesuffix("s").strip())
        except ValueError:
            seconds = -1.0
        if not 0 <= seconds < float("inf"):
            raise ValueError(
                f"bad budget {part!r} in {text!r}: give seconds per problem, like 5,20,inf"
            )
        budgets[seconds] = None
    return tuple(budgets)


def parse_cost_weights(text: str) -> tuple[float, ...]:
    """``"0,0.01,0.05"`` as ``(0.0, 0.01, 0.05)``, repeats dropped. Raises ``ValueError`` (one
    line) on anything but finite non-negative numbers."""
    weights: dict[float, None] = {}
    for part in (p.strip() for p in text.split(",")):
        try:
            weight = float(part)
        except ValueError:
            weight = -1.0
        if not 0 <= weight < float("inf"):
            raise ValueError(
                f"bad cost weight {part!r} in {text!r}: give non-negative numbers per second, "
                "like 0,0.01,0.05"
            )
        weights[weight] = None
    return tuple(weights)


def _budget_key(budget_s: float | None) -> str:
    return "inf" if budget_s is None else f"{budget_s:g}"


class Bench:
    """A named bench over ``store`` (see the module docstring).

    ``configurations`` are the fixed trees scored without a budget (default: every fixed
    configuration); ``start`` is the tree each budget's study starts from (default: the empty
    tree), or ``"best"``: the configuration that scores best on the training problems under
    that budget (a tie goes to the cheaper); ``compile_baseline`` also judges
    ``torch.compile`` of each test problem (in the trusted reference process:
    ``evaluate_compiled_reference``), for the speedups over it; ``executor`` runs the
    evaluations (default: one by one here).
    A study whose proposer waits for a batch reply stops there; the requests are in
    ``pending`` after the run (export them, import the replies, run again to go on).
    Without ``use_cache`` nothing stored by an earlier run is reused: candidates, evaluations,
    baselines and scored rows are made again (the studies' trials are kept and continued).
    """

    def __init__(
        self,
        name: str,
        store: Store,
        profiler: RecordedProfiler,
        rewriter: Rewriter,
        proposer: Proposer,
        *,
        eval_config: EvalConfig,
        context: RewriteContext,
        objective: Objective | None = None,
        learn_config: LearnConfig | None = None,
        compile_baseline: bool = True,
        configurations: Mapping[str, ProfilingTree] = FIXED_TREES,
        start: ProfilingTree | str | None = None,
        executor: Executor | None = None,
        use_cache: bool = True,
    ) -> None:
        if isinstance(start, str) and start != BEST_START:
            raise BenchError(f"start must be a tree or {BEST_START!r}, not {start!r}")
        self.name = name
        self.store = store
        self.profiler = profiler
        self.rewriter = rewriter
        self.proposer = proposer
        self.eval_config = eval_config
        self.context = context
        self.objective = objective or Objective()
        self.learn_config = learn_config or LearnConfig()
        self.compile_baseline = compile_baseline
        self.configurations = dict(configurations)
        self.start = start
        self.executor = executor
        self.use_cache = use_cache
        self.rewriter_id = rewriter_cache_id(rewriter)
        self.pending: list[Any] = []  # requests the studies of the last run wait for
        self._stats: list[CacheStats] = []
        self._compile_runs = 0

    def scorer(self, budget_s: float | None, cost_weight: float | None = None) -> TreeScorer:
        """A scorer of trees under ``budget_s`` through this bench's rewriter and evaluator,
        with the bench's objective (its cost weight replaced by ``cost_weight`` if given)."""
        objective = self.objective
        if cost_weight is not None:
            objective = replace(objective, cost_weight=cost_weight)
        scorer = TreeScorer(
            self.profiler,
            self.rewriter,
            self.store,
            budget_s=budget_s,
            objective=objective,
            eval_config=self.eval_config,
            context=self.context,
            rewriter_id=self.rewriter_id,
            executor=self.executor,
            use_cache=self.use_cache,
        )
        self._stats.append(scorer.stats)
        return scorer

    def spec(self, train: Sequence[Problem], test: Sequence[Problem]) -> dict[str, Any]:
        """The settings a rerun of this bench must match (budgets and iterations excluded)."""
        return {
            "version": BENCH_VERSION,
            "train": [p.content_hash for p in train],
            "test": [p.content_hash for p in test],
            "configurations": {k: t.content_hash for k, t in self.configurations.items()},
            "rewriter": self.rewriter_id,
            "proposer": self.proposer.id,
            "recorded_device": self.profiler.device,
            "evaluation": {
                "device": evaluation_device(self.eval_config),
                "config": self.eval_config.config_hash,
                "context": asdict(self.context),
            },
            "objective": self.objective.to_dict(),
            "seed": self.learn_config.seed,
            "compile_baseline": self.compile_baseline,
            **({} if self.start is None else {"start": self._start_label()}),
        }

    def _start_label(self) -> str:
        return self.start if isinstance(self.start, str) else self.start.content_hash

    def run(
        self,
        train: Sequence[Problem],
        test: Sequence[Problem],
        budgets: Sequence[float | None],
        on_progress: Callable[[str], None] | None = None,
        cost_weights: Sequence[float] = (0.0,),
    ) -> BenchResult:
        """Run (or continue) the bench on the split for each budget and cost weight; see the
        module docstring.

        Raises ``BenchError`` when the bench exists with other settings.
        """
        if not train or not test or not budgets:
            raise BenchError("a bench needs training problems, test problems and a budget")
        say = on_progress or log.info
        spec = self._open(train, test)
        self.pending.clear()
        self._stats.clear()
        self._compile_runs = 0
        compile_baselines = self._compile_baselines(test, say) if self.compile_baseline else {}
        unlimited = self.scorer(None)
        fixed = []
        for name, tree in self.configurations.items():
            say(f"scoring {name} on {len(test)} test problems")
            fixed.append(self.config_score(unlimited, name, tree, test))
        per_budget = [
            self._budget(budget, weight, train, test, say)
            for budget in budgets
            for weight in cost_weights or (0.0,)
        ]
        result = BenchResult(
            name=self.name,
            spec=spec,
            names={p.content_hash: p.key for p in (*train, *test)},
            train=tuple(p.content_hash for p in train),
            test=tuple(p.content_hash for p in test),
            compile_baselines=compile_baselines,
            fixed=tuple(fixed),
            budgets=tuple(per_budget),
            stats=self._work(),
        )
        self.store.put(RUN_SPACE, self.name, result.to_dict())
        return result

    def _open(self, train: Sequence[Problem], test: Sequence[Problem]) -> dict[str, Any]:
        spec = self.spec(train, test)
        stored = self.store.get(SPEC_SPACE, self.name)
        if stored is None:
            self.store.put(SPEC_SPACE, self.name, spec)
            return spec
        changed = next((k for k in spec if spec[k] != stored.get(k)), None)
        if changed is not None:
            raise BenchError(
                f"bench {self.name!r} was run with a different {changed}: rerun it with the "
                "same settings, or choose another name"
            )
        return spec

    def _work(self) -> dict[str, float]:
        total = CacheStats()
        for stats in self._stats:
            for field_name, value in asdict(stats).items():
                setattr(total, field_name, getattr(total, field_name) + value)
        return {
            "rewrites": total.rewrites,
            "rewrites_run": total.rewrites - total.rewrite_hits,
            "evaluations": total.evaluations,
            "evaluations_run": total.evaluations_run,
            "compile_baselines_run": self._compile_runs,
        }

    def _compile_baselines(
        self, test: Sequence[Problem], say: Callable[[str], None]
    ) -> dict[str, CompileBaseline]:
        say(f"torch.compile against eager on {len(test)} test problems")
        device = self.eval_config.replay_device
        baselines = {} if device is None else recorded_compile_baselines(self.store, device)
        pairs = [(p, compiled_candidate(p)) for p in test if p.content_hash not in baselines]
        for problem, _, result in evaluate_many(
            pairs,
            self.eval_config,
            executor=self.executor,
            store=self.store,
            use_cache=self.use_cache,
            compiled_reference=True,
        ):
            self._compile_runs += not result.from_cache
            kind = result.failure_kind.value if result.failure_kind else ""
            failure = f"{kind}: {result.failure_message}"[:300] if kind else ""
            baselines[problem.content_hash] = CompileBaseline(
                result.correct, result.speedup, failure
            )
        return {p.content_hash: baselines[p.content_hash] for p in test}

    def config_score(
        self, scorer: TreeScorer, name: str, tree: ProfilingTree, problems: Sequence[Problem]
    ) -> ConfigScore:
        """``tree`` scored on ``problems`` under the scorer's budget, from the store if done."""
        key = f"{self.name}/{tree.content_hash}/{_budget_key(scorer.budget_s)}"
        stored = self.store.get(ROW_SPACE, key) if self.use_cache else None
        if stored is not None:
            # The same tree may have been scored under another name (a learned tree that is
            # a fixed one): the outcomes are the same.
            return ConfigScore.from_dict({**stored, "name": name})
        score = scorer.score(tree, problems)
        counts = tuple(len(score.profiles[p.content_hash].metrics) for p in problems)
        config = ConfigScore(name, tree_to_dict(tree), scorer.budget_s, score, counts)
        self.store.put(ROW_SPACE, key, config.to_dict())
        return config

    def _budget(
        self,
        budget_s: float | None,
        cost_weight: float,
        train: Sequence[Problem],
        test: Sequence[Problem],
        say: Callable[[str], None],
    ) -> BudgetResult:
        label = budget_label(budget_s, cost_weight)
        study = f"{self.name}/budget={_budget_key(budget_s)}"
        if cost_weight:
            study += f"/cost_weight={cost_weight:g}"
        scorer = self.scorer(budget_s)
        learning = self.scorer(budget_s, cost_weight) if cost_weight else scorer
        learner = TreeLearner(learning, self.proposer, self.learn_config)
        resume = StudyStorage(self.store).get(study) is not None

        def progress(state: LearnProgress) -> None:
            say(
                f"learning under {label}: round {min(state.round, state.rounds)}/{state.rounds},"
                f" {state.trials} trials, {state.accepted} accepted, best {state.best.value:.4g}"
            )

        start = self._start_tree(scorer, train)
        try:
            learned: LearnResult = learner.learn(
                study, train, (), start, resume=resume, on_progress=progress
            )
        except StudyError as exc:
            raise BenchError(str(exc)) from None
        if learned.pending is not None:
            self.pending.append(learned.pending)
        say(f"scoring the tree learned under {label} on {len(test)} test problems")
        return BudgetResult(
            budget_s=budget_s,
            cost_weight=cost_weight,
            study=study,
            learned=self.config_score(scorer, LEARNED, learned.tree, test),
            train_score=learned.score,
            start_train_score=learned.start_score,
            trials=learning_curve(learned.trials),
            stop_reason=learned.stop_reason,
        )

    def _start_tree(self, scorer: TreeScorer, train: Sequence[Problem]) -> ProfilingTree:
        """The tree a budget's study starts from (see the class docstring)."""
        if self.start is None:
            return fixed_tree("none")
        if isinstance(self.start, ProfilingTree):
            return self.start
        scores = {name: scorer.score(tree, train) for name, tree in self.configurations.items()}
        best = max(scores, key=lambda name: (scores[name].value, -scores[name].mean_cost_s))
        return self.configurations[best]


def recorded_compile_baselines(store: Store, device: str) -> dict[str, CompileBaseline]:
    """torch.compile against eager as recorded evaluations on ``device`` timed it beside the
    candidates (``EvalConfig.time_compile_baseline``), by problem hash."""
    medians: dict[str, dict[str, float]] = {}
    for _, problem_hash, _, kind, timing in store.iter_baselines(device):
        # Evaluator version 2 on stores the raw record with its statistics beside it.
        stats = timing.get("stats", timing)
        medians.setdefault(problem_hash, {})[kind] = stats["median_ms"]
    return {
        problem_hash: CompileBaseline(True, kinds["eager"] / kinds["compile"])
        for problem_hash, kinds in medians.items()
        if kinds.get("eager", 0) > 0 and kinds.get("compile", 0) > 0
    }


def learning_curve(trials: Sequence[Any]) -> tuple[TrialPoint, ...]:
    """The points of a learning curve from a study's trials (``learn.study.Trial``)."""
    return tuple(
        TrialPoint(
            t.number, t.score.value if t.score is not None else None, t.incumbent, t.accepted
        )
        for t in trials
    )
