"""Learning the profiling tree: a learner loop, proposers of edits, and the objective."""

from autoprofiler.learn.learner import LearnConfig, LearnProgress, LearnResult, TreeLearner
from autoprofiler.learn.objective import (
    OBJECTIVES,
    Objective,
    ProblemOutcome,
    TreeScore,
    Verdict,
    judge,
    noise_margin,
)
from autoprofiler.learn.proposers import (
    LLMProposer,
    LocalSearchProposer,
    Proposal,
    ProposalContext,
    Proposer,
    parse_edits,
)
from autoprofiler.learn.recorded import GroupStats, RecordedSummary
from autoprofiler.learn.scoring import (
    CachedRewriter,
    CacheStats,
    TreeScorer,
    rewriter_cache_id,
)
from autoprofiler.learn.split import split_problems
from autoprofiler.learn.study import StudyError, StudySpec, StudyStorage, Trial, TrialState

__all__ = [
    "OBJECTIVES",
    "CacheStats",
    "CachedRewriter",
    "GroupStats",
    "LLMProposer",
    "LearnConfig",
    "LearnProgress",
    "LearnResult",
    "LocalSearchProposer",
    "Objective",
    "ProblemOutcome",
    "Proposal",
    "ProposalContext",
    "Proposer",
    "RecordedSummary",
    "StudyError",
    "StudySpec",
    "StudyStorage",
    "TreeLearner",
    "TreeScore",
    "TreeScorer",
    "Trial",
    "TrialState",
    "Verdict",
    "judge",
    "noise_margin",
    "parse_edits",
    "rewriter_cache_id",
    "split_problems",
]
