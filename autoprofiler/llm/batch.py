"""LLM requests in batches: exported as Batch API lines, replies imported into the store.

:func:`export_requests` writes each request as one line of the OpenAI Batch API's input format
(``format="openai"``) or of Anthropic's Message Batches (``"anthropic"``), and records it in
the store, so that :func:`import_replies` takes back only replies to requests it sent. A reply
goes into the store's reply cache under the request's own key
(:func:`~autoprofiler.llm.cache.reply_key`), where :class:`~autoprofiler.llm.cache.
CachedLLMClient` finds it: a run with the ``recorded:`` client then asks no server, and a
request with no reply fails as ``not_recorded``.

Replies are read from a batch result file of either vendor, or from plain JSONL rows
``{"custom_id", "content", "model"}``. A file with a reply to a request that was not exported,
or a malformed line, is refused whole (nothing is imported), with one line saying why.
"""

from __future__ import annotations

import gzip
import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from autoprofiler.llm.base import ChatMessage, LLMReply, SamplingParams, Usage
from autoprofiler.llm.cache import LLM_SPACE, reply_key
from autoprofiler.store import Store

EXPORTED_SPACE = "llm.exported"
FORMATS = ("openai", "anthropic")
CUSTOM_ID_CHARS = re.compile(r"[^A-Za-z0-9_-]+")
CUSTOM_ID_LIMIT = 64  # both vendors' limit
KEY_CHARS = 16


class BatchError(ValueError):
    """A batch file that cannot be taken; the message is one line."""


@dataclass(frozen=True)
class BatchRequest:
    """One request: what it is for (problem, configuration), and exactly what would be sent."""

    problem: str
    configuration: str
    model_id: str
    messages: tuple[ChatMessage, ...]
    params: SamplingParams

    @property
    def key(self) -> str:
        """The reply cache's key of this request."""
        return reply_key(self.model_id, self.messages, self.params)

    @property
    def custom_id(self) -> str:
        """``PROBLEM-CONFIGURATION-HASH``, in the characters and length both vendors accept."""
        tail = f"-{CUSTOM_ID_CHARS.sub('_', self.configuration)}-{self.key[:KEY_CHARS]}"
        head = CUSTOM_ID_CHARS.sub("_", self.problem)[: CUSTOM_ID_LIMIT - len(tail)]
        return head + tail

    @property
    def model(self) -> str:
        """The model's name at its vendor (the model id without the provider)."""
        return self.model_id.partition(":")[2] or self.model_id


def _openai_line(request: BatchRequest) -> dict[str, Any]:
    body: dict[str, Any] = {"model": request.model, "messages": list(request.messages)}
    body["max_tokens"] = request.params.max_tokens
    optional = {"temperature": request.params.temperature, "top_p": request.params.top_p,
                "seed": request.params.seed, "stop": list(request.params.stop) or None}  # fmt: skip
    body.update({k: v for k, v in optional.items() if v is not None})
    return {"custom_id": request.custom_id, "method": "POST", "url": "/v1/chat/completions",
            "body": body}  # fmt: skip


def _anthropic_line(request: BatchRequest) -> dict[str, Any]:
    system = "\n\n".join(m["content"] for m in request.messages if m["role"] == "system")
    params: dict[str, Any] = {
        "model": request.model,
        "max_tokens": request.params.max_tokens,
        "messages": [m for m in request.messages if m["role"] != "system"],
    }
    optional = {"system": system or None, "temperature": request.params.temperature,
                "top_p": request.params.top_p,
                "stop_sequences": list(request.params.stop) or None}  # fmt: skip
    params.update({k: v for k, v in optional.items() if v is not None})
    return {"custom_id": request.custom_id, "params": params}


def export_requests(
    requests: Sequence[BatchRequest], path: Path, store: Store, batch_format: str = "openai"
) -> int:
    """Write ``requests`` to ``path`` as batch lines (``batch_format``: ``FORMATS``) and
    record them in ``store``; how many."""
    if batch_format not in FORMATS:
        raise BatchError(f"--format must be {' or '.join(FORMATS)}, not {batch_format!r}")
    line = _openai_line if batch_format == "openai" else _anthropic_line
    seen: dict[str, BatchRequest] = {}
    for request in requests:
        seen.setdefault(request.custom_id, request)  # the same request twice is sent once
    with path.open("w", encoding="utf-8") as handle:
        for request in seen.values():
            handle.write(json.dumps(line(request)) + "\n")
    for custom_id, request in seen.items():
        store.put(
            EXPORTED_SPACE,
            custom_id,
            {"key": request.key, "model_id": request.model_id, "problem": request.problem,
             "configuration": request.configuration},
        )  # fmt: skip
    return len(seen)


@dataclass(frozen=True)
class Reply:
    """One reply read from a file: whose it is, its text, the model that wrote it."""

    custom_id: str
    content: str
    model: str
    usage: Usage = field(default_factory=Usage)


def _text_of_openai(body: dict) -> str:
    return body["choices"][0]["message"]["content"]


def _text_of_anthropic(message: dict) -> str:
    return "".join(part.get("text", "") for part in message["content"] if part["type"] == "text")


def parse_reply(row: Any) -> Reply:
    """The reply in one line of a batch result file (either vendor's) or a plain JSONL row;
    ``KeyError``/``TypeError``/``ValueError`` when it holds none."""
    custom_id = row["custom_id"]
    if "content" in row:  # plain {custom_id, content, model}
        return Reply(custom_id, str(row["content"]), str(row.get("model", "")))
    if "response" in row:  # OpenAI batch output
        if row.get("error") or row["response"].get("status_code", 200) != 200:
            raise ValueError(f"the request failed: {row.get('error') or row['response']}")
        body = row["response"]["body"]
        usage = body.get("usage") or {}
        return Reply(
            custom_id,
            _text_of_openai(body),
            str(body.get("model", "")),
            Usage(usage.get("prompt_tokens", 0), usage.get("completion_tokens", 0)),
        )
    result = row["result"]  # Anthropic Message Batches
    if result["type"] != "succeeded":
        raise ValueError(f"the request {result['type']}")
    message = result["message"]
    usage = message.get("usage") or {}
    return Reply(
        custom_id,
        _text_of_anthropic(message),
        str(message.get("model", "")),
        Usage(usage.get("input_tokens", 0), usage.get("output_tokens", 0)),
    )


def _read_rows(path: Path) -> Iterable[tuple[int, Any]]:
    """The JSON lines of ``path`` (gzip-compressed when it ends in ``.gz``), numbered."""
    try:
        if path.suffix == ".gz":
            with gzip.open(path, "rt", encoding="utf-8") as handle:
                lines = handle.read().splitlines()
        else:
            lines = path.read_text(encoding="utf-8").splitlines()
    except (OSError, EOFError, UnicodeDecodeError) as exc:
        raise BatchError(f"{path}: cannot read it ({exc.__class__.__name__})") from None
    for number, line in enumerate(lines, 1):
        if line.strip():
            try:
                yield number, json.loads(line)
            except ValueError:
                raise BatchError(f"{path}:{number}: not a JSON line") from None


def import_replies(path: Path, store: Store, model: str = "") -> int:
    """Put every reply in ``path`` into the store's reply cache; how many.

    ``model`` names the model when the file does not. Refuses the whole file (``BatchError``)
    when a line holds no reply or answers a request that was not exported.
    """
    replies: list[tuple[str, LLMReply]] = []
    for number, row in _read_rows(path):
        try:
            reply = parse_reply(row)
        except (KeyError, TypeError, IndexError, ValueError) as exc:
            detail = f": {exc}" if isinstance(exc, ValueError) else ""
            raise BatchError(f"{path}:{number}: no reply in this line{detail}") from None
        exported = store.get(EXPORTED_SPACE, str(reply.custom_id))
        if exported is None:
            raise BatchError(
                f"{path}:{number}: {reply.custom_id!r} answers no exported request "
                "(export with `autoprofiler prompts export` into this store first)"
            )
        text = LLMReply(reply.content, reply.model or model or exported["model_id"], reply.usage)
        replies.append((exported["key"], text))
    for key, reply in replies:
        store.put(LLM_SPACE, key, reply.to_dict())
    return len(replies)
