"""The tree learner: propose edits, score the edited trees, keep an edit only when it helps.

Each round asks the proposer for edits of the incumbent tree. The edited trees are scored in
the proposed order on the training problems (``TreeScorer``: replayed profiles under the same
budget, cached candidates and evaluations) and judged against the incumbent (``judge``: better
by more than the noise margin, or a tie that is cheaper to profile). The first edit accepted
ends the round (first-improvement hill climbing), so every trial's verdict is final when it is
written. Accepted trees are also scored on the held-out validation problems, which never
decide anything.

Every trial is written to the store as it completes (``StudyStorage``). The study stops after
``iterations`` rounds, after ``patience`` rounds in a row without an accepted edit, at the time
limit, or when the proposer has nothing new. A resumed study rebuilds its state from the trial
log and replays the unfinished round's proposals (proposers are deterministic given the seed,
the round and the tree), so it continues after the last completed trial. Given the same
recordings and the same cached evaluations, a study always takes the same path.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

from autoprofiler.evaluate.runner import evaluation_device
from autoprofiler.learn.objective import TreeScore, judge
from autoprofiler.learn.proposers.base import AwaitingReply, Proposal, ProposalContext, Proposer
from autoprofiler.learn.recorded import RecordedSummary
from autoprofiler.learn.scoring import CacheStats, TreeScorer
from autoprofiler.learn.study import StudySpec, StudyStorage, Trial, TrialState
from autoprofiler.problem import Problem
from autoprofiler.tree.edits import edit_from_dict
from autoprofiler.tree.fixed import fixed_tree
from autoprofiler.tree.model import ProfilingTree, TreeError
from autoprofiler.tree.serialize import tree_to_dict

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class LearnConfig:
    """When a study stops, and its seed.

    ``iterations`` counts the study's rounds (resumed rounds included); ``patience`` stops it
    after that many rounds in a row without an accepted edit (None: never); ``time_limit_s``
    bounds one run's wall time (checked before each trial; None: none).
    """

    iterations: int = 10
    patience: int | None = 3
    time_limit_s: float | None = None
    seed: int = 0

    def __post_init__(self) -> None:
        if self.iterations < 0 or (self.patience is not None and self.patience < 1):
            raise ValueError("iterations must be >= 0 and patience >= 1")


@dataclass(frozen=True)
class LearnProgress:
    """Where a study stands: rounds begun, trials and accepted edits so far, the best score."""

    round: int
    rounds: int
    trials: int
    accepted: int
    best: TreeScore
    last: Trial | None = None


@dataclass(frozen=True)
class LearnResult:
    """What a study learned, against where it started.

    ``validation`` and ``start_validation`` are None without validation problems; ``cache``
    covers this run only. ``pending`` is the request a batch-answered proposer waits for (the
    study stopped before that round; resume once its reply is imported), else None.
    """

    study: str
    start_tree: ProfilingTree
    tree: ProfilingTree
    start_score: TreeScore
    score: TreeScore
    start_validation: TreeScore | None
    validation: TreeScore | None
    trials: tuple[Trial, ...]
    stop_reason: str
    cache: CacheStats
    wall_s: float
    pending: Any = None

    @property
    def accepted(self) -> int:
        return sum(t.accepted for t in self.trials)

    @property
    def rounds(self) -> int:
        """The rounds the study ran (resumed ones included): those with a trial."""
        return len({t.round for t in self.trials})


@dataclass
class _Run:
    """A running study: its problems, its trials so far and its incumbent."""

    study: str
    train: Sequence[Problem]
    validation: Sequence[Problem]
    trials: list[Trial]
    tree: ProfilingTree
    score: TreeScore
    held_out: TreeScore | None
    began: float
    on_progress: Callable[[LearnProgress], None] | None

    def report(self, round_: int, rounds: int, last: Trial | None = None) -> None:
        if self.on_progress is not None:
            accepted = sum(t.accepted for t in self.trials)
            progress = LearnProgress(round_, rounds, len(self.trials), accepted, self.score, last)
            self.on_progress(progress)


def _position(trials: Sequence[Trial]) -> tuple[int, int, int]:
    """(round to run, its proposals already tried, completed rounds in a row with no accept)."""
    if not trials:
        return 0, 0, 0
    last = trials[-1]
    complete = last.accepted or last.index + 1 >= last.round_size
    rounds: dict[int, bool] = {}
    for trial in trials:
        rounds[trial.round] = rounds.get(trial.round, False) or trial.accepted
    if not complete:
        rounds.pop(last.round)
    stale = 0
    for _, accepted in sorted(rounds.items(), reverse=True):
        if accepted:
            break
        stale += 1
    if complete:
        return last.round + 1, 0, stale
    return last.round, last.index + 1, stale


class TreeLearner:
    """Learns a profiling tree with ``scorer`` and ``proposer``; trials go to the scorer's
    store (see the module docstring)."""

    def __init__(
        self, scorer: TreeScorer, proposer: Proposer, config: LearnConfig | None = None
    ) -> None:
        self.scorer = scorer
        self.proposer = proposer
        self.config = config or LearnConfig()
        self.storage = StudyStorage(scorer.store)

    def spec(
        self,
        study: str,
        start: ProfilingTree,
        train: Sequence[Problem],
        validation: Sequence[Problem],
    ) -> StudySpec:
        """The spec a study with these settings records (and must match on resume)."""
        scorer = self.scorer
        return StudySpec(
            name=study,
            start_tree=tree_to_dict(start),
            train=tuple(p.content_hash for p in train),
            validation=tuple(p.content_hash for p in validation),
            budget_s=scorer.budget_s,
            objective=scorer.objective.to_dict(),
            rewriter=scorer.rewriter.id,
            proposer=self.proposer.id,
            recorded_device=scorer.profiler.device,
            evaluation={
                "device": evaluation_device(scorer.eval_config),
                "config": scorer.eval_config.config_hash,
                "context": asdict(scorer.context),
            },
            seed=self.config.seed,
        )

    def learn(
        self,
        study: str,
        train: Sequence[Problem],
        validation: Sequence[Problem] = (),
        start: ProfilingTree | None = None,
        *,
        resume: bool = False,
        on_progress: Callable[[LearnProgress], None] | None = None,
    ) -> LearnResult:
        """Run (or, with ``resume``, continue) study ``study``; see the module docstring.

        ``start`` defaults to a root that collects nothing. Raises ``StudyError`` when the
        study exists and ``resume`` is false, or is resumed with other settings.
        """
        if not train:
            raise ValueError("a study needs at least one training problem")
        began = time.monotonic()
        start = (start or fixed_tree("none")).validate()
        self.storage.open(self.spec(study, start, train, validation), resume)
        trials = self.storage.trials(study)
        start_score = self.scorer.score(start, train)
        start_validation = self.scorer.score(start, validation) if validation else None
        run = _Run(
            study=study,
            train=train,
            validation=validation,
            trials=trials,
            tree=start,
            score=start_score,
            held_out=start_validation,
            began=began,
            on_progress=on_progress,
        )
        self._replay(run)
        summary = RecordedSummary.of(self.scorer.profiler, train)
        round_, done, stale = _position(trials)
        run.report(round_, self.config.iterations)
        pending = None
        while not (stop := self._stop_reason(round_, stale, began)):
            context = ProposalContext(
                tree=run.tree,
                score=run.score,
                budget_s=self.scorer.budget_s,
                summary=summary,
                history=[t for t in trials if t.round < round_],
                round=round_,
                seed=self.config.seed,
                study=study,
            )
            try:
                proposals = self.proposer.propose(context)
            except AwaitingReply as waiting:
                pending, stop = waiting.request, f"waiting for a reply ({waiting})"
                break
            if not proposals:
                stop = "the proposer has nothing new to try"
                break
            self._check_replay(trials, round_, proposals, done)
            accepted, stop = self._play_round(run, round_, proposals, done)
            if stop:
                break
            done, round_ = 0, round_ + 1
            stale = 0 if accepted else stale + 1
        log.info("study %s stopped: %s", study, stop)
        origin = start.description or f"tree {start.content_hash}"
        edits = sum(t.accepted for t in trials)
        return LearnResult(
            study=study,
            start_tree=start,
            tree=ProfilingTree(
                run.tree.root,
                f"learned in study {study}: {edits} edits of ({origin})",
                run.tree.show,
            ),
            start_score=start_score,
            score=run.score,
            start_validation=start_validation,
            validation=run.held_out,
            trials=tuple(trials),
            stop_reason=stop,
            cache=self.scorer.stats,
            wall_s=time.monotonic() - began,
            pending=pending,
        )

    def _replay(self, run: _Run) -> None:
        """Move ``run`` from its start tree to the incumbent after its accepted trials."""
        for trial in run.trials:
            if trial.accepted and trial.edit is not None:
                run.tree = edit_from_dict(trial.edit).apply(run.tree)
                run.held_out = trial.validation
        if any(t.accepted for t in run.trials):
            run.score = self.scorer.score(run.tree, run.train)

    def _play_round(
        self, run: _Run, round_: int, proposals: Sequence[Proposal], done: int
    ) -> tuple[bool, str]:
        """Try the proposals after the first ``done`` until one is accepted; returns whether
        one was, and why the study must stop ("" to go on)."""
        for index in range(done, len(proposals)):
            if self._out_of_time(run.began):
                return False, "time limit"
            trial = self._trial(run, round_, index, proposals)
            self.storage.add_trial(run.study, trial)
            run.trials.append(trial)
            log.info("trial %d: %s: %s", trial.number, trial.state.value, trial.reason)
            run.report(round_, self.config.iterations, trial)
            if trial.accepted:
                return True, ""
        return False, ""

    def _stop_reason(self, round_: int, stale: int, began: float) -> str:
        config = self.config
        if round_ >= config.iterations:
            return f"{config.iterations} rounds done"
        if config.patience is not None and stale >= config.patience:
            return f"no improvement for {stale} rounds"
        if self._out_of_time(began):
            return "time limit"
        return ""

    def _out_of_time(self, began: float) -> bool:
        limit = self.config.time_limit_s
        return limit is not None and time.monotonic() - began >= limit

    @staticmethod
    def _check_replay(
        trials: Sequence[Trial], round_: int, proposals: Sequence[Proposal], done: int
    ) -> None:
        """Warn when a resumed round's proposals differ from the ones recorded."""
        recorded = [t.edit for t in trials if t.round == round_]
        again = [p.edit.to_dict() if p.edit is not None else None for p in proposals[:done]]
        if recorded != again or done > len(proposals):
            log.warning(
                "round %d: the proposer did not repeat the recorded proposals (is it "
                "deterministic?); continuing after the %d recorded",
                round_,
                done,
            )

    def _trial(self, run: _Run, round_: int, index: int, proposals: Sequence[Proposal]) -> Trial:
        """Score one proposal against the incumbent; an accepted one becomes the incumbent."""
        began = time.monotonic()
        proposal = proposals[index]
        base = {
            "number": len(run.trials),
            "round": round_,
            "index": index,
            "round_size": len(proposals),
            "parent_hash": run.tree.content_hash,
            "edit": None if proposal.edit is None else proposal.edit.to_dict(),
            "proposed": proposal.proposed,
        }
        if proposal.edit is None:
            return Trial(**base, state=TrialState.INVALID, reason=proposal.error)
        try:
            tree = proposal.edit.apply(run.tree)
        except TreeError as exc:
            return Trial(**base, state=TrialState.INVALID, reason=str(exc))
        if tree == run.tree:
            return Trial(**base, state=TrialState.INVALID, reason="the edit changes nothing")
        score = self.scorer.score(tree, run.train)
        verdict = judge(score, run.score, self.scorer.objective)
        held_out = None
        if verdict.accepted and run.validation:
            held_out = self.scorer.score(tree, run.validation)
        trial = Trial(
            **base,
            state=TrialState.ACCEPTED if verdict.accepted else TrialState.REJECTED,
            reason=verdict.reason,
            tree_hash=tree.content_hash,
            score=score,
            incumbent=run.score.value,
            margin=verdict.margin,
            validation=held_out,
            duration_s=time.monotonic() - began,
        )
        if verdict.accepted:
            run.tree, run.score, run.held_out = tree, score, held_out
        return trial
