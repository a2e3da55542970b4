"""Replies cached in the store: a repeated prompt makes no second request, across store reopens."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from autoprofiler.llm import CachedLLMClient, LLMError, OpenAIClient, RetryPolicy, SamplingParams
from autoprofiler.llm.cache import LLM_SPACE, reply_key
from autoprofiler.store import Store
from tests.servers import LlamaServer, chat_completion, error_response, free_port

MESSAGES = [{"role": "user", "content": "Name a colour."}]
PARAMS = SamplingParams(max_tokens=8)


def openai_client(base_url: str, model: str = "stub-model") -> OpenAIClient:
    return OpenAIClient(model, base_url=base_url, api_key="k", retry=RetryPolicy(max_retries=0))


def test_a_repeated_prompt_is_answered_from_the_store(stub_server, tmp_path: Path) -> None:
    server = stub_server(chat_completion("once"), chat_completion("twice"))
    with Store(tmp_path / "store.db") as store:
        client = CachedLLMClient(openai_client(f"{server.url}/v1"), store)
        first = client.complete(MESSAGES, PARAMS)
        second = client.complete(MESSAGES, PARAMS)
        assert len(server.requests) == 1
        assert (first.cached, second.cached) == (False, True)
        assert (second.text, second.usage) == (first.text, first.usage)
        assert store.get(LLM_SPACE, reply_key(client.model_id, MESSAGES, PARAMS)) is not None


def test_other_sampling_settings_or_messages_are_new_requests(stub_server, tmp_path: Path) -> None:
    server = stub_server(chat_completion())
    with Store(tmp_path / "store.db") as store:
        client = CachedLLMClient(openai_client(f"{server.url}/v1"), store)
        client.complete(MESSAGES, PARAMS)
        client.complete(MESSAGES, replace(PARAMS, temperature=0.7))
        client.complete([{"role": "user", "content": "Name a fruit."}], PARAMS)
        assert len(server.requests) == 3


def test_failures_are_not_cached(stub_server, tmp_path: Path) -> None:
    server = stub_server(error_response(500), chat_completion("recovered"))
    with Store(tmp_path / "store.db") as store:
        client = CachedLLMClient(openai_client(f"{server.url}/v1"), store)
        with pytest.raises(LLMError):
            client.complete(MESSAGES, PARAMS)
        assert client.complete(MESSAGES, PARAMS).text == "recovered"
        assert len(server.requests) == 2


def test_a_real_reply_is_reused_after_reopening_the_store(
    llama_server: LlamaServer, tmp_path: Path
) -> None:
    path = tmp_path / "store.db"
    with Store(path) as store:
        first = CachedLLMClient(openai_client(llama_server.base_url, llama_server.model), store)
        reply = first.complete(MESSAGES, PARAMS)
    # The same model id at an address where nothing listens: only the store can answer.
    nowhere = openai_client(f"http://127.0.0.1:{free_port()}/v1", llama_server.model)
    with Store(path) as store:
        again = CachedLLMClient(nowhere, store).complete(MESSAGES, PARAMS)
    assert again.cached
    assert (again.text, again.usage, again.model) == (reply.text, reply.usage, reply.model)
