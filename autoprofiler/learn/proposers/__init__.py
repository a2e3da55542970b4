"""Proposers: where the learner's edits come from (one interface, one module each)."""

from autoprofiler.learn.proposers.base import AwaitingReply, Proposal, ProposalContext, Proposer
from autoprofiler.learn.proposers.llm import LLMProposer, parse_edits
from autoprofiler.learn.proposers.local_search import LocalSearchProposer

__all__ = [
    "AwaitingReply",
    "LLMProposer",
    "LocalSearchProposer",
    "Proposal",
    "ProposalContext",
    "Proposer",
    "parse_edits",
]
