"""Which model to ask and how: ``--llm openai:MODEL`` / ``anthropic:MODEL`` and friends.

The API key comes from ``OPENAI_API_KEY`` or ``ANTHROPIC_API_KEY``; the server from
``--base-url`` or ``AUTOPROFILER_LLM_BASE_URL`` (the vendor's own API when neither is given).
A local server (vLLM, SGLang, Ollama, llama.cpp) needs no key.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field

from autoprofiler.llm.base import LLMClient, LLMError, RetryPolicy
from autoprofiler.store import Store

BASE_URL_ENV = "AUTOPROFILER_LLM_BASE_URL"
API_KEY_ENV = {"openai": "OPENAI_API_KEY", "anthropic": "ANTHROPIC_API_KEY"}
# Sent to servers that ask for no key: the SDKs refuse to start without one.
LOCAL_API_KEY = "not-needed"


RECORDED = "recorded"


def parse_llm_spec(spec: str) -> tuple[str, str]:
    """``"openai:gpt-4o"`` -> ``("openai", "gpt-4o")``; the model name may contain colons.
    ``"recorded:openai:gpt-4o"`` -> ``("recorded", "openai:gpt-4o")``: replies replayed from the
    store, no server."""
    provider, sep, model = spec.strip().partition(":")
    if provider == RECORDED and model:
        parse_llm_spec(model)  # what it stands for must be a model spec itself
        return provider, model
    if not sep or not model or provider not in API_KEY_ENV:
        known = " or ".join(f"{p}:MODEL" for p in API_KEY_ENV)
        raise LLMError(f"--llm {spec!r}: expected {known} (or recorded:PROVIDER:MODEL)")
    return provider, model


@dataclass(frozen=True)
class LLMConfig:
    """A model, where it is served, and the time and retry limits of each request.

    ``timeout_s`` limits one attempt; at most ``1 + retry.max_retries`` attempts are made.
    """

    provider: str
    model: str
    base_url: str | None = None
    api_key: str | None = field(default=None, repr=False)
    timeout_s: float = 300.0
    retry: RetryPolicy = field(default_factory=RetryPolicy)
    stream: bool = False

    @property
    def model_id(self) -> str:
        """``provider:model``; a recorded model's id is the one it stands for."""
        return self.model if self.provider == RECORDED else f"{self.provider}:{self.model}"

    @classmethod
    def from_spec(
        cls,
        spec: str,
        *,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        max_retries: int = 4,
        backoff_s: float = 1.0,
        stream: bool = False,
        environ: Mapping[str, str] | None = None,
    ) -> LLMConfig:
        """The configuration for ``--llm spec``, completed from the environment."""
        environ = os.environ if environ is None else environ
        provider, model = parse_llm_spec(spec)
        if timeout_s <= 0 or max_retries < 0 or backoff_s < 0:
            raise LLMError("--llm: the timeout must be positive and retries and back-off >= 0")
        if provider == RECORDED:
            return cls(provider=provider, model=model, timeout_s=timeout_s)
        base_url = base_url or environ.get(BASE_URL_ENV) or None
        key_env = API_KEY_ENV[provider]
        api_key = environ.get(key_env) or None
        if api_key is None:
            if base_url is None:
                raise LLMError(
                    f"{key_env} is not set: export it, or point --base-url (or {BASE_URL_ENV})"
                    " at a local server"
                )
            api_key = LOCAL_API_KEY
        return cls(
            provider=provider,
            model=model,
            base_url=base_url,
            api_key=api_key,
            timeout_s=timeout_s,
            retry=RetryPolicy(max_retries=max_retries, backoff_s=backoff_s),
            stream=stream,
        )


def make_client(config: LLMConfig, store: Store | None = None) -> LLMClient:
    """The client ``config`` describes, its replies cached in ``store`` when one is given."""
    options = {
        "api_key": config.api_key,
        "base_url": config.base_url,
        "timeout_s": config.timeout_s,
        "retry": config.retry,
        "stream": config.stream,
    }
    client: LLMClient
    if config.provider == RECORDED:
        from autoprofiler.llm.recorded_client import RecordedLLMClient

        client = RecordedLLMClient(config.model)
    elif config.provider == "openai":
        from autoprofiler.llm.openai_client import OpenAIClient

        client = OpenAIClient(config.model, **options)
    elif config.provider == "anthropic":
        from autoprofiler.llm.anthropic_client import AnthropicClient

        client = AnthropicClient(config.model, **options)
    else:
        raise LLMError(f"unknown LLM provider {config.provider!r}")
    if store is None:
        return client
    from autoprofiler.llm.cache import CachedLLMClient

    return CachedLLMClient(client, store)
