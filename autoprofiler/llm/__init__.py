"""LLM clients: one small interface, one client per wire protocol, replies cached in the store.

The vendor SDKs (``openai``, ``anthropic``) are imported only when a client is built; install
them with ``pip install 'autoprofiler[llm]'``.
"""

from autoprofiler.llm.anthropic_client import AnthropicClient
from autoprofiler.llm.base import (
    ChatMessage,
    LLMClient,
    LLMError,
    LLMReply,
    NotRecordedError,
    RemoteLLMClient,
    RetryPolicy,
    SamplingParams,
    Usage,
)
from autoprofiler.llm.cache import CachedLLMClient
from autoprofiler.llm.config import LLMConfig, make_client, parse_llm_spec
from autoprofiler.llm.openai_client import OpenAIClient

__all__ = [
    "AnthropicClient",
    "CachedLLMClient",
    "ChatMessage",
    "LLMClient",
    "LLMConfig",
    "LLMError",
    "LLMReply",
    "NotRecordedError",
    "OpenAIClient",
    "RemoteLLMClient",
    "RetryPolicy",
    "SamplingParams",
    "Usage",
    "make_client",
    "parse_llm_spec",
]
