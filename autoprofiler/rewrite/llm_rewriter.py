"""The LLM rewriter: one prompt (problem, profile, device, contract), one reply, one candidate.

Prompts are the package data files in ``autoprofiler/rewrite/prompts/``; a file of the same name
in the folder ``AUTOPROFILER_PROMPTS_DIR`` takes precedence. Templates use ``$name``
placeholders (``string.Template``), so braces in CUDA or Python code need no escaping.
"""

from __future__ import annotations

import ast
import logging
import re
import string
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from autoprofiler import prompts
from autoprofiler.llm.base import ChatMessage, LLMClient, LLMError, SamplingParams
from autoprofiler.prompts import PromptError
from autoprofiler.rewrite.base import Candidate, RewriteContext, Rewriter, profile_hash

if TYPE_CHECKING:
    from autoprofiler.problem import Problem
    from autoprofiler.profile.base import Profile

log = logging.getLogger(__name__)

TARGET_CLASS = "ModelNew"
PYTHON_FENCES = frozenset({"python", "py", "python3"})
REPLY_HEAD_CHARS = 400

# A fenced block: an opening fence with an optional language, then everything up to a closing
# fence on its own line or the end of the reply (a reply cut off by max_tokens has no closing).
_FENCE = re.compile(
    r"^[ \t]*```[ \t]*(?P<lang>[\w+.-]*)[^\n]*\n(?P<body>.*?)(?:^[ \t]*```[ \t]*$|\Z)",
    re.DOTALL | re.MULTILINE,
)


def load_prompt(name: str) -> str:
    """The text of the rewriter's prompt template ``name`` (``"rewrite.md"``)."""
    return prompts.load_prompt("autoprofiler.rewrite", name)


def render_prompt(name: str, **values: Any) -> str:
    """Template ``name`` with its ``$placeholders`` filled from ``values``."""
    try:
        return string.Template(load_prompt(name)).substitute(values)
    except KeyError as exc:
        raise PromptError(f"prompt {name}: unknown placeholder ${exc.args[0]}") from None
    except ValueError as exc:
        raise PromptError(f"prompt {name}: {exc}") from None


def profile_text(profile: Profile | None) -> str:
    """The profile as the prompt shows it (the part a tree chose to show), or the no-profile
    note."""
    if profile is None:
        return load_prompt("no_profile.md").strip()
    from autoprofiler.profile.catalogue import GROUPS
    from autoprofiler.profile.render import render_profile

    return render_profile(profile.seen, GROUPS)


def build_messages(
    problem: Problem, profile: Profile | None, context: RewriteContext
) -> list[ChatMessage]:
    """The system and user messages of one rewrite request."""
    user = render_prompt(
        "rewrite.md",
        problem_name=problem.name,
        problem_source=problem.source.strip(),
        profile=profile_text(profile),
        device=context.device,
        device_name=f"({context.device_name})" if context.device_name else "",
        atol=f"{context.atol:g}",
        rtol=f"{context.rtol:g}",
    )
    return [
        {"role": "system", "content": render_prompt("system.md").strip()},
        {"role": "user", "content": user},
    ]


@dataclass(frozen=True)
class ExtractedCode:
    """The ``ModelNew`` program found in a reply, or why none was found."""

    source: str = ""
    failure: str = ""


def extract_code(reply: str) -> ExtractedCode:
    """The program defining ``ModelNew`` in an LLM reply.

    Looks at the ```python fenced blocks (any fenced block when none is tagged Python) and takes
    the last one that parses and defines ``ModelNew``; with no fenced block at all, the whole
    reply when it is such a program.
    """
    if not reply.strip():
        return ExtractedCode(failure="empty reply")
    blocks = [(m["lang"].lower(), m["body"]) for m in _FENCE.finditer(reply)]
    if not blocks:
        whole = _check_program(reply)
        if whole.failure:
            return ExtractedCode(
                failure=f"no fenced code block, and the reply is not Python defining {TARGET_CLASS}"
            )
        return whole
    python = [body for lang, body in blocks if lang in PYTHON_FENCES]
    checked = [_check_program(body) for body in python or [body for _, body in blocks]]
    usable = [c for c in checked if not c.failure]
    if usable:
        return usable[-1]
    return ExtractedCode(failure=f"the code block {checked[-1].failure}")


def _check_program(text: str) -> ExtractedCode:
    source = text.strip("\n") + "\n"
    try:
        tree = ast.parse(source)
    except SyntaxError as exc:
        return ExtractedCode(failure=f"does not parse: line {exc.lineno}: {exc.msg}")
    if not _defines(tree, TARGET_CLASS):
        return ExtractedCode(failure=f"does not define {TARGET_CLASS}")
    return ExtractedCode(source=source)


def _defines(tree: ast.Module, name: str) -> bool:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return True
        if isinstance(node, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == name for t in node.targets
        ):
            return True
        if isinstance(node, (ast.Import, ast.ImportFrom)) and any(
            (alias.asname or alias.name) == name for alias in node.names
        ):
            return True
    return False


class LLMRewriter(Rewriter):
    """Asks ``client`` once per problem for a ``ModelNew`` written from the problem's profile.

    The reply's usage (tokens, latency, whether it came from the cache) is recorded in the
    candidate's ``info``. An LLM failure or a reply without usable code is a failed candidate.
    """

    name = "llm"

    def __init__(self, client: LLMClient, params: SamplingParams | None = None) -> None:
        self.client = client
        self.params = params or SamplingParams()

    def rewrite(
        self, problem: Problem, profile: Profile | None, context: RewriteContext
    ) -> Candidate:
        producer = f"{self.name}:{self.client.model_id}"
        messages = build_messages(problem, profile, context)
        candidate = Candidate(source="", producer=producer, profile_hash=profile_hash(profile))
        try:
            reply = self.client.complete(messages, self.params)
        except LLMError as exc:
            log.warning("%s: %s", problem.key, exc)
            candidate.failure = f"LLM request failed: {exc}"
            return candidate
        candidate.info = {
            "model": reply.model,
            "prompt_tokens": reply.usage.prompt_tokens,
            "completion_tokens": reply.usage.completion_tokens,
            "latency_s": round(reply.latency_s, 3),
            "cached": reply.cached,
            "attempts": reply.attempts,
            "finish_reason": reply.finish_reason,
        }
        code = extract_code(reply.text)
        if code.failure:
            truncated = " (the reply hit max_tokens)" if reply.finish_reason == "length" else ""
            candidate.failure = f"no usable code in the reply: {code.failure}{truncated}"
            candidate.info["reply_head"] = reply.text[:REPLY_HEAD_CHARS]
            log.warning("%s: %s", problem.key, candidate.failure)
            return candidate
        candidate.source = code.source
        return candidate
