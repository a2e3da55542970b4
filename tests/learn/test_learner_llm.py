"""The LLM proposer against a real OpenAI-compatible server (llama.cpp with Gemma 3 270M).

The model is tiny and not instruction-tuned: its replies hold no usable edit, so the test checks
that each becomes an invalid trial with its reason, stored like any other, and the study goes
on and ends normally.
"""

from __future__ import annotations

from autoprofiler.learn import LearnConfig, LLMProposer, StudyStorage, TreeLearner, TrialState
from autoprofiler.llm import OpenAIClient, RetryPolicy, SamplingParams
from autoprofiler.problem import Problem
from autoprofiler.store import Store
from tests.servers import LlamaServer

from .conftest import make_scorer


def test_unusable_llm_replies_become_rejected_trials(
    llama_server: LlamaServer, store: Store, train: list[Problem]
) -> None:
    client = OpenAIClient(
        llama_server.model,
        base_url=llama_server.base_url,
        api_key="not-needed",
        retry=RetryPolicy(0),
    )
    proposer = LLMProposer(
        client, SamplingParams(max_tokens=8), feedback_problems=1, profile_lines=3, max_metrics=4
    )
    learner = TreeLearner(make_scorer(store), proposer, LearnConfig(iterations=2, patience=1))
    result = learner.learn("llm", train)

    assert result.trials == tuple(StudyStorage(store).trials("llm"))
    assert len(result.trials) >= 1
    for trial in result.trials:
        assert trial.state is TrialState.INVALID
        assert trial.reason.startswith(("no JSON edit in the reply", "the JSON is not", "edit "))
        assert trial.score is None
    assert result.stop_reason == "no improvement for 1 rounds"
    assert result.tree == result.start_tree
