"""A client for Anthropic's Messages API (``POST /v1/messages``) on the ``anthropic`` SDK.

System turns are sent as the request's ``system`` field. Sampling settings the SDK no longer
names (``temperature``, ``top_p``) travel in the request body; ``seed`` has no equivalent and is
ignored. Retries are ours (the SDK's are switched off), as in the OpenAI client.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from autoprofiler.llm.base import (
    ChatMessage,
    LLMReply,
    RemoteLLMClient,
    SamplingParams,
    Usage,
    check_deadline,
)


class AnthropicClient(RemoteLLMClient):
    """Messages from ``model`` at ``base_url`` (Anthropic's API when None).

    ``api_key`` falls back to ``ANTHROPIC_API_KEY``; the arguments are ``RemoteLLMClient``'s.
    """

    provider = "anthropic"
    sdk_client_class = "Anthropic"

    def _attempt(self, messages: Sequence[ChatMessage], params: SamplingParams) -> LLMReply:
        request = self._request(messages, params)
        start = time.monotonic()
        with self._sdk_errors():
            if self.stream:
                return self._receive_stream(request, start)
            message = self._client.messages.create(**request)
        return LLMReply(
            text="".join(block.text for block in message.content if block.type == "text"),
            model=message.model or self.model,
            usage=Usage(message.usage.input_tokens or 0, message.usage.output_tokens or 0),
            latency_s=time.monotonic() - start,
            finish_reason=message.stop_reason or "",
        )

    def _request(self, messages: Sequence[ChatMessage], params: SamplingParams) -> dict[str, Any]:
        system = "\n\n".join(m["content"] for m in messages if m["role"] == "system")
        request: dict[str, Any] = {
            "model": self.model,
            "max_tokens": params.max_tokens,
            "messages": [
                {"role": m["role"], "content": m["content"]}
                for m in messages
                if m["role"] != "system"
            ],
        }
        if system:
            request["system"] = system
        if params.stop:
            request["stop_sequences"] = list(params.stop)
        body = {"temperature": params.temperature, "top_p": params.top_p}
        body = {k: v for k, v in body.items() if v is not None}
        if body:
            request["extra_body"] = body
        return request

    def _receive_stream(self, request: dict[str, Any], start: float) -> LLMReply:
        parts: list[str] = []
        prompt_tokens = completion_tokens = 0
        model = self.model
        finish_reason = ""
        with self._client.messages.create(**request, stream=True) as events:
            for event in events:
                check_deadline(start, self.timeout_s, self.model_id)
                if event.type == "message_start":
                    model = event.message.model or model
                    prompt_tokens = event.message.usage.input_tokens or 0
                elif event.type == "content_block_delta" and event.delta.type == "text_delta":
                    parts.append(event.delta.text)
                elif event.type == "message_delta":
                    completion_tokens = event.usage.output_tokens or 0
                    finish_reason = event.delta.stop_reason or finish_reason
        return LLMReply(
            text="".join(parts),
            model=model,
            usage=Usage(prompt_tokens, completion_tokens),
            latency_s=time.monotonic() - start,
            finish_reason=finish_reason,
        )
