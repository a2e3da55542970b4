"""The OpenAI-compatible client against a real llama.cpp server (protocol, streaming, time
limits) and against scripted local stubs (rate limits and server errors, counted attempts).

The served model is tiny and not instruction-tuned: the tests check the protocol, never what
the model says.
"""

from __future__ import annotations

import json
import time

import pytest

from autoprofiler.llm import LLMError, OpenAIClient, RetryPolicy, SamplingParams
from tests.servers import LlamaServer, StubResponse, chat_completion, error_response, free_port

MESSAGES = [
    {"role": "system", "content": "You answer in one word."},
    {"role": "user", "content": "Name a colour."},
]
PARAMS = SamplingParams(max_tokens=12)
NO_RETRY = RetryPolicy(max_retries=0)


def live_client(server: LlamaServer, **options) -> OpenAIClient:
    return OpenAIClient(server.model, base_url=server.base_url, api_key="not-needed", **options)


def test_reply_follows_the_protocol(llama_server: LlamaServer) -> None:
    reply = live_client(llama_server).complete(MESSAGES, PARAMS)
    assert isinstance(reply.text, str)
    assert reply.model
    assert reply.usage.prompt_tokens > 0
    assert 0 < reply.usage.completion_tokens <= PARAMS.max_tokens
    assert reply.finish_reason in {"stop", "length"}
    assert reply.latency_s > 0
    assert (reply.attempts, reply.cached) == (1, False)


def test_streamed_reply_follows_the_protocol(llama_server: LlamaServer) -> None:
    reply = live_client(llama_server, stream=True).complete(MESSAGES, PARAMS)
    assert isinstance(reply.text, str)
    assert reply.model
    assert reply.finish_reason in {"stop", "length"}
    # llama.cpp's server sends no usage in a stream: zeros then, never an error.
    assert 0 <= reply.usage.completion_tokens <= PARAMS.max_tokens
    assert (reply.attempts, reply.cached) == (1, False)


@pytest.mark.parametrize("stream", [False, True], ids=["whole", "streamed"])
def test_a_tiny_time_limit_raises_llm_error(llama_server: LlamaServer, stream: bool) -> None:
    client = live_client(llama_server, timeout_s=0.001, stream=stream, retry=NO_RETRY)
    start = time.monotonic()
    with pytest.raises(LLMError, match="timed out"):
        client.complete(MESSAGES, SamplingParams(max_tokens=2))
    assert time.monotonic() - start < 5


def stub_client(url: str, sleeps: list[float], **options) -> OpenAIClient:
    return OpenAIClient(
        "stub-model", base_url=f"{url}/v1", api_key="k", sleep=sleeps.append, **options
    )


def test_rate_limits_and_server_errors_are_retried_with_backoff(stub_server) -> None:
    server = stub_server(error_response(429), error_response(503), chat_completion("done"))
    sleeps: list[float] = []
    client = stub_client(server.url, sleeps, retry=RetryPolicy(max_retries=3, backoff_s=0.5))
    reply = client.complete(MESSAGES, PARAMS)
    assert (reply.text, reply.attempts) == ("done", 3)
    assert len(server.requests) == 3
    assert sleeps == [0.5, 1.0]
    assert reply.usage.prompt_tokens == 7


def test_retries_are_bounded(stub_server) -> None:
    server = stub_server(error_response(500))
    sleeps: list[float] = []
    client = stub_client(server.url, sleeps, retry=RetryPolicy(max_retries=2, backoff_s=0.1))
    with pytest.raises(LLMError, match=r"HTTP 500.*gave up after 3 attempts") as info:
        client.complete(MESSAGES, PARAMS)
    assert len(server.requests) == 3
    assert sleeps == [0.1, 0.2]
    assert "\n" not in str(info.value)


def test_retry_after_is_honoured(stub_server) -> None:
    server = stub_server(error_response(429, {"retry-after": "0.25"}), chat_completion())
    sleeps: list[float] = []
    stub_client(server.url, sleeps).complete(MESSAGES, PARAMS)
    assert sleeps == [0.25]


def test_client_errors_are_not_retried(stub_server) -> None:
    server = stub_server(error_response(400))
    sleeps: list[float] = []
    with pytest.raises(LLMError, match="HTTP 400"):
        stub_client(server.url, sleeps).complete(MESSAGES, PARAMS)
    assert len(server.requests) == 1
    assert sleeps == []


def test_an_unreachable_server_is_retried_then_reported() -> None:
    sleeps: list[float] = []
    url = f"http://127.0.0.1:{free_port()}"
    client = stub_client(url, sleeps, retry=RetryPolicy(max_retries=1, backoff_s=0.01))
    with pytest.raises(LLMError, match=r"connection failed.*gave up after 2 attempts"):
        client.complete(MESSAGES, PARAMS)
    assert sleeps == [0.01]


def test_request_carries_messages_and_sampling_settings(stub_server) -> None:
    server = stub_server(chat_completion())
    params = SamplingParams(max_tokens=5, temperature=0.2, seed=3, stop=("END",))
    stub_client(server.url, []).complete(MESSAGES, params)
    (request,) = server.requests
    assert request.path == "/v1/chat/completions"
    assert request.headers["authorization"] == "Bearer k"
    assert request.body["messages"] == MESSAGES
    assert request.body["model"] == "stub-model"
    assert (request.body["max_tokens"], request.body["temperature"]) == (5, 0.2)
    assert (request.body["seed"], request.body["stop"]) == (3, ["END"])
    assert "top_p" not in request.body


def chunk_events(chunks: list[dict]) -> list[str]:
    """Server-sent events of chat-completion chunks, ending with ``[DONE]``."""
    head = {"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "stub-model"}
    return [f"data: {json.dumps({**head, **c})}\n\n" for c in chunks] + ["data: [DONE]\n\n"]


def delta(text: str, finish_reason: str | None = None) -> dict:
    return {"choices": [{"index": 0, "delta": {"content": text}, "finish_reason": finish_reason}]}


def test_streamed_usage_is_read_when_the_server_sends_it(stub_server) -> None:
    usage = {"prompt_tokens": 7, "completion_tokens": 2, "total_tokens": 9}
    events = chunk_events([delta("Hel"), delta("lo", "stop"), {"choices": [], "usage": usage}])
    server = stub_server(StubResponse(body=events, content_type="text/event-stream"))
    reply = stub_client(server.url, [], stream=True).complete(MESSAGES, PARAMS)
    assert (reply.text, reply.finish_reason, reply.model) == ("Hello", "stop", "stub-model")
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (7, 2)
    assert server.requests[0].body["stream_options"] == {"include_usage": True}


def test_a_slow_stream_is_cut_at_the_time_limit(stub_server) -> None:
    """Each piece arrives within the limit, the whole reply does not: the limit still holds."""
    events = chunk_events([delta("x")] * 8)
    server = stub_server(
        StubResponse(body=events, content_type="text/event-stream", interval_s=0.1)
    )
    client = stub_client(server.url, [], stream=True, timeout_s=0.35, retry=NO_RETRY)
    start = time.monotonic()
    with pytest.raises(LLMError, match=r"timed out after 0\.\d s \(limit 0\.35 s\)"):
        client.complete(MESSAGES, PARAMS)
    assert time.monotonic() - start < 0.8
