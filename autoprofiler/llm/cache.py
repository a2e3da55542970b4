"""Replies cached in the store, so a repeated prompt is never paid for twice.

The key hashes the model id, the messages and the sampling settings; the reply is kept in the
store's ``"llm"`` key-value space. Failed requests are not cached. A cached reply is returned
with ``cached=True`` and the usage and latency of the request that paid for it.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace

from autoprofiler.llm.base import ChatMessage, LLMClient, LLMReply, SamplingParams
from autoprofiler.store import Store, content_key

log = logging.getLogger(__name__)

LLM_SPACE = "llm"
_KEY_VERSION = "llm-reply/1"


def reply_key(model_id: str, messages: Sequence[ChatMessage], params: SamplingParams) -> str:
    """The store key of the reply of ``model_id`` to ``messages`` sampled with ``params``."""
    return content_key(_KEY_VERSION, model_id, [dict(m) for m in messages], params.to_dict())


class CachedLLMClient(LLMClient):
    """``client`` with its replies kept in ``store``; asks the client only on a miss."""

    def __init__(self, client: LLMClient, store: Store) -> None:
        self.client = client
        self.store = store

    @property
    def model_id(self) -> str:
        return self.client.model_id

    def complete(
        self, messages: Sequence[ChatMessage], params: SamplingParams | None = None
    ) -> LLMReply:
        params = params or SamplingParams()
        key = reply_key(self.model_id, messages, params)
        stored = self.store.get(LLM_SPACE, key)
        if stored is not None:
            log.debug("%s: reply %s served from the store", self.model_id, key)
            return replace(LLMReply.from_dict(stored), cached=True)
        reply = self.client.complete(messages, params)
        self.store.put(LLM_SPACE, key, replace(reply, cached=False).to_dict())
        return reply
