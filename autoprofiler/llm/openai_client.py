"""A client for every server that speaks the OpenAI chat-completions protocol.

The server is chosen by ``base_url``: OpenAI itself (the default), vLLM, SGLang, Ollama, the
llama.cpp server, OpenRouter. Retries are ours (the SDK's own are switched off), so their number
is bounded and visible; a streamed reply is held to the same time limit as a whole one.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any

from autoprofiler.llm.base import (
    ChatMessage,
    LLMError,
    LLMReply,
    RemoteLLMClient,
    SamplingParams,
    Usage,
    check_deadline,
)


class OpenAIClient(RemoteLLMClient):
    """Chat completions from ``model`` at ``base_url`` (OpenAI's API when None).

    ``api_key`` falls back to ``OPENAI_API_KEY``; the arguments are ``RemoteLLMClient``'s.
    """

    provider = "openai"
    sdk_client_class = "OpenAI"

    def _attempt(self, messages: Sequence[ChatMessage], params: SamplingParams) -> LLMReply:
        request = self._request(messages, params)
        start = time.monotonic()
        with self._sdk_errors():
            if self.stream:
                return self._receive_stream(request, start)
            response = self._client.chat.completions.create(**request)
        if not response.choices:
            raise LLMError(f"{self.model_id}: the server returned no choices")
        choice = response.choices[0]
        return LLMReply(
            text=choice.message.content or "",
            model=response.model or self.model,
            usage=_usage(response.usage),
            latency_s=time.monotonic() - start,
            finish_reason=choice.finish_reason or "",
        )

    def _request(self, messages: Sequence[ChatMessage], params: SamplingParams) -> dict[str, Any]:
        request: dict[str, Any] = {
            "model": self.model,
            "messages": [dict(m) for m in messages],
            "max_tokens": params.max_tokens,
        }
        optional = {"temperature": params.temperature, "top_p": params.top_p, "seed": params.seed}
        request.update({k: v for k, v in optional.items() if v is not None})
        if params.stop:
            request["stop"] = list(params.stop)
        return request

    def _receive_stream(self, request: dict[str, Any], start: float) -> LLMReply:
        parts: list[str] = []
        usage = Usage()
        model = self.model
        finish_reason = ""
        stream = self._client.chat.completions.create(
            **request, stream=True, stream_options={"include_usage": True}
        )
        with stream:
            for chunk in stream:
                check_deadline(start, self.timeout_s, self.model_id)
                model = chunk.model or model
                if chunk.usage is not None:
                    usage = _usage(chunk.usage)
                for choice in chunk.choices:
                    parts.append(choice.delta.content or "")
                    finish_reason = choice.finish_reason or finish_reason
        return LLMReply(
            text="".join(parts),
            model=model,
            usage=usage,
            latency_s=time.monotonic() - start,
            finish_reason=finish_reason,
        )


def _usage(usage: Any) -> Usage:
    if usage is None:
        return Usage()
    return Usage(usage.prompt_tokens or 0, usage.completion_tokens or 0)
