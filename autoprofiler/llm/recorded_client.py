"""A client that never calls a server: ``--llm recorded:PROVIDER:MODEL``.

It stands for ``PROVIDER:MODEL`` (its model id is that one, so the reply cache's keys are the
same), and answers only from the store: replies imported with ``autoprofiler replies import``
(:mod:`autoprofiler.llm.batch`) are found by :class:`~autoprofiler.llm.cache.CachedLLMClient`
before it is asked; a request it is asked is one with no reply, and fails as ``not_recorded``
(``NotRecordedError``).
"""

from __future__ import annotations

from collections.abc import Sequence

from autoprofiler.llm.base import (
    ChatMessage,
    LLMClient,
    LLMReply,
    NotRecordedError,
    SamplingParams,
)


class RecordedLLMClient(LLMClient):
    """Replays ``model_id``'s recorded replies; every request that reaches it fails."""

    def __init__(self, model_id: str) -> None:
        self._model_id = model_id

    @property
    def model_id(self) -> str:
        return self._model_id

    def complete(
        self, messages: Sequence[ChatMessage], params: SamplingParams | None = None
    ) -> LLMReply:
        raise NotRecordedError(
            f"not_recorded: no reply of {self._model_id} was imported for this request "
            "(autoprofiler prompts export, then replies import)"
        )
