"""The Anthropic client against a local HTTP stub (``http.server`` in a thread), not the real API.

The stub speaks the Messages wire format: ``POST /v1/messages`` answered with a message JSON
(content blocks, stop reason, usage) or, when streaming, with its server-sent events. The tests
check what the client sends and how it reads the reply, retries and time limits.
"""

from __future__ import annotations

import json

import pytest

from autoprofiler.llm import AnthropicClient, LLMError, RetryPolicy, SamplingParams
from tests.servers import StubResponse, error_response

MESSAGES = [
    {"role": "system", "content": "You are terse."},
    {"role": "user", "content": "Say hello."},
]


def message(text: str = "Hello there") -> StubResponse:
    return StubResponse(
        body={
            "id": "msg_stub",
            "type": "message",
            "role": "assistant",
            "model": "claude-stub",
            "content": [{"type": "text", "text": text}],
            "stop_reason": "end_turn",
            "stop_sequence": None,
            "usage": {"input_tokens": 11, "output_tokens": 3},
        }
    )


def message_events(pieces: list[str]) -> StubResponse:
    events = [
        {
            "type": "message_start",
            "message": {
                "id": "msg_stub",
                "type": "message",
                "role": "assistant",
                "model": "claude-stub",
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 11, "output_tokens": 1},
            },
        },
        {"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}},
        *(
            {"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": p}}
            for p in pieces
        ),
        {"type": "content_block_stop", "index": 0},
        {
            "type": "message_delta",
            "delta": {"stop_reason": "end_turn", "stop_sequence": None},
            "usage": {"output_tokens": len(pieces)},
        },
        {"type": "message_stop"},
    ]
    text = "".join(f"event: {e['type']}\ndata: {json.dumps(e)}\n\n" for e in events)
    return StubResponse(body=text, content_type="text/event-stream")


def client_for(url: str, sleeps: list[float] | None = None, **options) -> AnthropicClient:
    sleep = sleeps.append if sleeps is not None else None
    extra = {"sleep": sleep} if sleep else {}
    return AnthropicClient("claude-stub", base_url=url, api_key="sk-stub", **extra, **options)


def test_reply_and_request_follow_the_messages_format(stub_server) -> None:
    server = stub_server(message("Hello there"))
    params = SamplingParams(max_tokens=64, temperature=0.0, stop=("END",))
    reply = client_for(server.url).complete(MESSAGES, params)
    assert (reply.text, reply.model, reply.finish_reason) == (
        "Hello there",
        "claude-stub",
        "end_turn",
    )
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (11, 3)
    (request,) = server.requests
    assert request.path == "/v1/messages"
    # SDK versions differ in how they send the key: x-api-key or a bearer token.
    assert {"sk-stub", "Bearer sk-stub"} & {
        request.headers.get(h) for h in ("x-api-key", "authorization")
    }
    assert "anthropic-version" in request.headers
    assert request.body["system"] == "You are terse."
    assert request.body["messages"] == [{"role": "user", "content": "Say hello."}]
    assert (request.body["max_tokens"], request.body["temperature"]) == (64, 0.0)
    assert request.body["stop_sequences"] == ["END"]


def test_streamed_reply_is_assembled_from_events(stub_server) -> None:
    server = stub_server(message_events(["Hel", "lo ", "there"]))
    reply = client_for(server.url, stream=True).complete(MESSAGES)
    assert reply.text == "Hello there"
    assert (reply.usage.prompt_tokens, reply.usage.completion_tokens) == (11, 3)
    assert reply.finish_reason == "end_turn"
    assert server.requests[0].body["stream"] is True


def test_overload_and_rate_limits_are_retried(stub_server) -> None:
    server = stub_server(error_response(529), error_response(429), message())
    sleeps: list[float] = []
    client = client_for(server.url, sleeps, retry=RetryPolicy(max_retries=2, backoff_s=0.01))
    assert client.complete(MESSAGES).attempts == 3
    assert len(server.requests) == 3
    assert sleeps == [0.01, 0.02]


def test_exhausted_retries_raise_llm_error(stub_server) -> None:
    server = stub_server(error_response(503))
    client = client_for(server.url, [], retry=RetryPolicy(max_retries=1, backoff_s=0.01))
    with pytest.raises(LLMError, match=r"HTTP 503.*gave up after 2 attempts"):
        client.complete(MESSAGES)
    assert len(server.requests) == 2


def test_a_slow_server_hits_the_time_limit(stub_server) -> None:
    server = stub_server(StubResponse(body=message().body, delay_s=1.0))
    client = client_for(server.url, timeout_s=0.2, retry=RetryPolicy(max_retries=0))
    with pytest.raises(LLMError, match="timed out"):
        client.complete(MESSAGES)
