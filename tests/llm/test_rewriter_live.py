"""The LLM rewriter against a real OpenAI-compatible server (llama.cpp with Gemma 3 270M).

The model is tiny and not instruction-tuned, so its reply never holds a ``ModelNew`` program:
the tests check that such a reply, a time-out and a cached reply all end as candidates with
their reasons and usage recorded, never what the model wrote.
"""

from __future__ import annotations

from pathlib import Path

from autoprofiler.llm import CachedLLMClient, OpenAIClient, RetryPolicy, SamplingParams
from autoprofiler.problem import Problem
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.llm_rewriter import LLMRewriter
from autoprofiler.store import Store
from tests.servers import LlamaServer

PARAMS = SamplingParams(max_tokens=24)
CONTEXT = RewriteContext(device="cuda", device_name="NVIDIA H200")


def client_for(server: LlamaServer, **options) -> OpenAIClient:
    return OpenAIClient(
        server.model,
        base_url=server.base_url,
        api_key="not-needed",
        retry=RetryPolicy(0),
        **options,
    )


def test_a_useless_reply_is_a_failed_candidate_with_its_reason(
    llama_server: LlamaServer, scale_problem: Problem
) -> None:
    candidate = LLMRewriter(client_for(llama_server), PARAMS).rewrite(scale_problem, None, CONTEXT)
    assert not candidate.usable
    assert candidate.source == ""
    assert candidate.failure.startswith("no usable code in the reply: ")
    assert candidate.producer == f"llm:openai:{llama_server.model}"
    assert candidate.info["prompt_tokens"] > 0
    assert 0 < candidate.info["completion_tokens"] <= PARAMS.max_tokens


def test_a_time_out_is_a_failed_candidate(
    llama_server: LlamaServer, scale_problem: Problem
) -> None:
    client = client_for(llama_server, timeout_s=0.001)
    candidate = LLMRewriter(client, SamplingParams(max_tokens=2)).rewrite(
        scale_problem, None, CONTEXT
    )
    assert not candidate.usable
    assert candidate.failure.startswith("LLM request failed: ")
    assert "timed out" in candidate.failure


def test_a_repeated_rewrite_is_answered_from_the_store(
    llama_server: LlamaServer, scale_problem: Problem, tmp_path: Path
) -> None:
    with Store(tmp_path / "store.db") as store:
        rewriter = LLMRewriter(CachedLLMClient(client_for(llama_server), store), PARAMS)
        first = rewriter.rewrite(scale_problem, None, CONTEXT)
        second = rewriter.rewrite(scale_problem, None, CONTEXT)
    assert (first.info["cached"], second.info["cached"]) == (False, True)
    assert second.failure == first.failure
