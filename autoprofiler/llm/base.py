"""The LLM plug-in point: chat messages in, one reply out.

``LLMClient`` has two members, ``model_id`` and ``complete``. Concrete clients live in their own
modules (``openai_client``, ``anthropic_client``); ``cache.CachedLLMClient`` wraps any of them
with the store. The helpers at the bottom are shared by the SDK-backed clients: a bounded retry
loop with exponential back-off, and the translation of SDK exceptions into one-line ``LLMError``.
"""

from __future__ import annotations

import importlib
import logging
import time
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field, replace
from types import ModuleType
from typing import Any, TypedDict

log = logging.getLogger(__name__)

INSTALL_HINT = "pip install 'autoprofiler[llm]'"


class ChatMessage(TypedDict):
    """One chat turn: ``role`` is ``"system"``, ``"user"`` or ``"assistant"``."""

    role: str
    content: str


@dataclass(frozen=True)
class SamplingParams:
    """How to sample a reply. ``None`` leaves a setting to the server's default."""

    max_tokens: int = 4096
    temperature: float | None = 0.0
    top_p: float | None = None
    seed: int | None = None
    stop: tuple[str, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Usage:
    """Tokens charged for one request."""

    prompt_tokens: int = 0
    completion_tokens: int = 0

    @property
    def total_tokens(self) -> int:
        return self.prompt_tokens + self.completion_tokens


@dataclass(frozen=True)
class LLMReply:
    """One reply. ``cached`` replies come from the store (their usage and latency are those of
    the original request); ``attempts`` counts the HTTP requests made, retries included."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    latency_s: float = 0.0
    cached: bool = False
    finish_reason: str = ""
    attempts: int = 1

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> LLMReply:
        known = {k: v for k, v in data.items() if k in cls.__dataclass_fields__}
        known["usage"] = Usage(**known.get("usage", {}))
        return cls(**known)


class LLMError(RuntimeError):
    """An LLM request failed; the message is one line.

    ``retryable`` marks failures worth another attempt (rate limits, server errors, dropped
    connections); ``retry_after_s`` is the server's ``Retry-After`` hint when it sent one.
    """

    def __init__(
        self,
        message: str,
        *,
        retryable: bool = False,
        status: int | None = None,
        retry_after_s: float | None = None,
    ) -> None:
        super().__init__(" ".join(message.split()))
        self.retryable = retryable
        self.status = status
        self.retry_after_s = retry_after_s


class NotRecordedError(LLMError):
    """A replay-only client was asked a request no imported reply answers."""


class LLMClient(ABC):
    """A chat model behind some API.

    Contract: ``complete`` sends one request (retrying transient failures within the client's
    bounded policy) and returns an ``LLMReply``; every failure, including a missing SDK, a time
    limit or exhausted retries, is raised as ``LLMError`` with a one-line message.
    """

    @property
    @abstractmethod
    def model_id(self) -> str:
        """``provider:model``, e.g. ``openai:gpt-4o``; part of every cache key."""

    @abstractmethod
    def complete(
        self, messages: Sequence[ChatMessage], params: SamplingParams | None = None
    ) -> LLMReply:
        """The model's reply to ``messages`` sampled with ``params`` (defaults when None)."""


@dataclass(frozen=True)
class RetryPolicy:
    """Bounded retries: at most ``1 + max_retries`` attempts, waiting ``backoff_s * 2**n``
    (capped at ``max_backoff_s``, or the server's ``Retry-After`` when it is shorter)."""

    max_retries: int = 4
    backoff_s: float = 1.0
    max_backoff_s: float = 30.0

    def delay_s(self, retry: int, retry_after_s: float | None = None) -> float:
        """Seconds to wait before retry number ``retry`` (0-based)."""
        if retry_after_s is not None and retry_after_s >= 0:
            return min(retry_after_s, self.max_backoff_s)
        return min(self.backoff_s * 2**retry, self.max_backoff_s)


def call_with_retries(
    call: Callable[[], LLMReply], policy: RetryPolicy, sleep: Callable[[float], None] = time.sleep
) -> LLMReply:
    """Run ``call`` until it succeeds, fails for good, or ``policy`` allows no more attempts."""
    attempts = policy.max_retries + 1
    for attempt in range(1, attempts + 1):
        try:
            return replace(call(), attempts=attempt)
        except LLMError as exc:
            if not exc.retryable:
                raise
            if attempt == attempts:
                raise LLMError(
                    f"{exc} (gave up after {attempts} attempts)", status=exc.status
                ) from None
            delay = policy.delay_s(attempt - 1, exc.retry_after_s)
            log.warning("%s; retry %d/%d in %.1f s", exc, attempt, attempts - 1, delay)
            sleep(delay)
    raise AssertionError("unreachable")  # pragma: no cover


# Shared by the SDK clients -----------------------------------------------------------------


class RemoteLLMClient(LLMClient):
    """An LLM behind an HTTP API, reached through the vendor SDK named ``provider``.

    Subclasses name ``provider`` and the SDK's ``sdk_client_class`` and implement ``_attempt``
    (one request, made inside ``_sdk_errors()``); this class imports the SDK, builds its
    client, adds the bounded retries and logs the usage. ``timeout_s`` limits each
    attempt, streamed or not; ``sleep`` is the wait between attempts.
    """

    provider: str = "remote"
    sdk_client_class: str = ""  # the SDK's client class, e.g. "OpenAI"

    def __init__(
        self,
        model: str,
        *,
        api_key: str | None = None,
        base_url: str | None = None,
        timeout_s: float = 300.0,
        retry: RetryPolicy | None = None,
        stream: bool = False,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.model = model
        self.base_url = base_url
        self.timeout_s = timeout_s
        self.retry = retry or RetryPolicy()
        self.stream = stream
        self._sleep = sleep
        self._sdk = import_sdk(self.provider)
        with self._sdk_errors():
            self._client = getattr(self._sdk, self.sdk_client_class)(
                api_key=api_key, base_url=self.base_url, timeout=self.timeout_s, max_retries=0
            )

    @property
    def model_id(self) -> str:
        return f"{self.provider}:{self.model}"

    def complete(
        self, messages: Sequence[ChatMessage], params: SamplingParams | None = None
    ) -> LLMReply:
        params = params or SamplingParams()
        reply = call_with_retries(lambda: self._attempt(messages, params), self.retry, self._sleep)
        log.info(
            "%s: %d prompt + %d completion tokens in %.1f s (%d attempt(s))",
            self.model_id,
            reply.usage.prompt_tokens,
            reply.usage.completion_tokens,
            reply.latency_s,
            reply.attempts,
        )
        return reply

    @abstractmethod
    def _attempt(self, messages: Sequence[ChatMessage], params: SamplingParams) -> LLMReply:
        """Send one request and return its reply; raise ``LLMError`` on any failure."""

    @contextmanager
    def _sdk_errors(self) -> Iterator[None]:
        """Raise the SDK's and the transport's exceptions inside as one-line ``LLMError``."""
        try:
            yield
        except LLMError:
            raise
        except Exception as exc:
            error = translate_sdk_error(exc, self._sdk, self.model_id, self.timeout_s)
            if error is None:
                raise
            raise error from None


def import_sdk(name: str) -> ModuleType:
    """Import an optional SDK (``openai``, ``anthropic``) or raise a one-line ``LLMError``."""
    try:
        return importlib.import_module(name)
    except ImportError:
        raise LLMError(f"the {name} package is not installed: {INSTALL_HINT}") from None


_TRANSPORT_MODULES = frozenset({"httpx", "httpx2", "httpcore", "httpcore2"})


def translate_sdk_error(
    exc: Exception, sdk: ModuleType, what: str, timeout_s: float | None = None
) -> LLMError | None:
    """An ``LLMError`` for an exception of the openai or anthropic SDK (both share the names),
    or of the HTTP transport beneath them (raised raw by some SDK versions while streaming);
    None for any other exception, which is a bug to re-raise."""
    transport = type(exc).__module__.partition(".")[0] in _TRANSPORT_MODULES
    if isinstance(exc, sdk.APITimeoutError) or (transport and "Timeout" in type(exc).__name__):
        limit = f" (limit {timeout_s:g} s)" if timeout_s is not None else ""
        return LLMError(f"{what}: request timed out{limit}")
    if isinstance(exc, sdk.APIStatusError):
        status = exc.status_code
        return LLMError(
            f"{what}: HTTP {status}: {_status_message(exc)}",
            retryable=status == 429 or status >= 500,
            status=status,
            retry_after_s=_retry_after_s(exc.response.headers.get("retry-after")),
        )
    if isinstance(exc, sdk.APIConnectionError) or transport:
        return LLMError(f"{what}: connection failed: {_first_line(str(exc))}", retryable=True)
    if type(exc).__module__.partition(".")[0] == sdk.__name__:
        return LLMError(f"{what}: {type(exc).__name__}: {_first_line(str(exc))}")
    return None


def check_deadline(start: float, timeout_s: float, what: str) -> None:
    """Raise ``LLMError`` when more than ``timeout_s`` has passed since ``start`` (monotonic)."""
    elapsed_s = time.monotonic() - start
    if elapsed_s > timeout_s:
        raise LLMError(f"{what}: request timed out after {elapsed_s:.1f} s (limit {timeout_s:g} s)")


def _status_message(exc: Any) -> str:
    """The server's own error message: ``{"error": {"message": ...}}`` or the SDK's summary."""
    body = getattr(exc, "body", None)
    error = body.get("error", body) if isinstance(body, dict) else None
    message = error.get("message") if isinstance(error, dict) else None
    return _first_line(message if isinstance(message, str) and message else exc.message)


def _retry_after_s(header: str | None) -> float | None:
    try:
        return float(header) if header is not None else None
    except ValueError:
        return None


def _first_line(text: str, limit: int = 300) -> str:
    line = next((part for part in str(text).splitlines() if part.strip()), "")
    return line[:limit]
