"""The interface's plain parts: replies as data, one-line errors, bounded retries, SDK errors."""

from __future__ import annotations

import openai
import pytest

from autoprofiler.llm import LLMError, LLMReply, RetryPolicy, Usage
from autoprofiler.llm.base import call_with_retries, translate_sdk_error


def test_a_reply_round_trips_through_a_dict() -> None:
    reply = LLMReply("code", "m", Usage(10, 5), 1.5, finish_reason="stop", attempts=2)
    assert LLMReply.from_dict(reply.to_dict()) == reply
    assert reply.usage.total_tokens == 15


def test_error_messages_are_one_line() -> None:
    assert str(LLMError("server said:\n  overloaded\n")) == "server said: overloaded"


def test_backoff_doubles_up_to_its_cap() -> None:
    policy = RetryPolicy(backoff_s=1.0, max_backoff_s=5.0)
    assert [policy.delay_s(n) for n in range(5)] == [1.0, 2.0, 4.0, 5.0, 5.0]
    assert policy.delay_s(0, retry_after_s=60.0) == 5.0
    assert policy.delay_s(3, retry_after_s=0.5) == 0.5


def test_a_lasting_failure_is_not_retried() -> None:
    calls: list[int] = []

    def call() -> LLMReply:
        calls.append(1)
        raise LLMError("HTTP 401: bad key", status=401)

    with pytest.raises(LLMError, match="HTTP 401"):
        call_with_retries(call, RetryPolicy(max_retries=3), sleep=lambda _: None)
    assert len(calls) == 1


def transport_error(name: str) -> Exception:
    """An exception as the HTTP transport (httpx) raises it, by module and class name."""
    return type(name, (Exception,), {"__module__": "httpx._exceptions"})("stalled")


def test_raw_transport_errors_become_llm_errors() -> None:
    """Some SDK versions let httpx's own exceptions escape while a stream is read."""
    timeout = translate_sdk_error(transport_error("ReadTimeout"), openai, "m", timeout_s=2)
    assert str(timeout) == "m: request timed out (limit 2 s)"
    assert not timeout.retryable
    dropped = translate_sdk_error(transport_error("RemoteProtocolError"), openai, "m")
    assert dropped.retryable and "connection failed" in str(dropped)


def test_other_exceptions_are_left_alone() -> None:
    assert translate_sdk_error(KeyError("bug"), openai, "m") is None
