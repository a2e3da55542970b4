"""What rewrites and proposes, as the options name it: ``--rewriter``, ``--proposer``,
``--llm``, and what the rewriter is told of the target (the same for every command)."""

from __future__ import annotations

import importlib
from enum import Enum
from typing import TYPE_CHECKING, Any

from autoprofiler.cli.console import fail

if TYPE_CHECKING:
    from collections.abc import Sequence

    from autoprofiler.evaluate import EvalConfig
    from autoprofiler.learn.proposers import Proposer
    from autoprofiler.llm import LLMClient
    from autoprofiler.rewrite.base import RewriteContext, Rewriter
    from autoprofiler.store import Store

DEVICES = ("auto", "cuda", "cpu")
REWRITERS = "rules, rules-without-NAME, llm or MODULE:NAME"


class ProposerKind(str, Enum):
    search = "search"
    llm = "llm"


def rewrite_context(device: str, profile_device: str, config: EvalConfig) -> RewriteContext:
    """What the rewriter is told of the target (``RewriteContext.for_target``)."""
    from autoprofiler.rewrite.base import RewriteContext

    return RewriteContext.for_target(device, profile_device, config)


def _plugged_in(spec: str) -> Any:
    """The object ``MODULE:NAME`` names (raises ``ValueError``)."""
    module, _, name = spec.partition(":")
    try:
        return getattr(importlib.import_module(module), name)
    except (ImportError, AttributeError) as exc:
        raise ValueError(f"{spec}: cannot import: {exc}") from None


def check_rewriter_spec(spec: str) -> None:
    """Raise ``ValueError`` unless ``spec`` names a rewriter (a factory is called only when
    the rewriter is made)."""
    from autoprofiler.rewrite.base import Rewriter
    from autoprofiler.rewrite.rules import RuleRewriter

    if spec == "llm":
        return
    if ":" not in spec:
        try:
            RuleRewriter.from_name(spec)
        except ValueError:
            raise ValueError(f"must be {REWRITERS}, not {spec!r}") from None
        except KeyError as exc:
            raise ValueError(f"{spec}: {exc.args[0]}") from None
        return
    target = _plugged_in(spec)
    if isinstance(target, type) and not issubclass(target, Rewriter):
        raise ValueError(f"{spec}: {target.__name__} is not a Rewriter")
    if not callable(target) and not isinstance(target, Rewriter):
        raise ValueError(f"{spec}: gives a {type(target).__name__}, not a Rewriter")


def require_llm(llm: str | None, rewriter: str, proposer: ProposerKind | None = None) -> None:
    """One error line, before any work, when ``llm`` is asked for and ``--llm`` not given."""
    for needed, what in ((rewriter, "--rewriter"), (proposer, "--proposer")):
        if needed in ("llm", ProposerKind.llm) and not llm:
            fail(f"{what} llm needs --llm openai:MODEL, anthropic:MODEL or recorded:PROVIDER:MODEL")


def llm_client(llm: str | None, base_url: str | None, store: Store) -> LLMClient:
    """The client ``--llm`` names (``require_llm`` checked that it is given), its replies
    cached in ``store``; or one error line."""
    from autoprofiler.llm import LLMConfig, LLMError, make_client

    assert llm, "require_llm() first"
    try:
        return make_client(LLMConfig.from_spec(llm, base_url=base_url), store)
    except LLMError as exc:
        fail(str(exc))


def make_rewriter(spec: str, llm: str | None, base_url: str | None, store: Store) -> Rewriter:
    """The rewriter ``--rewriter`` names (checked as it was parsed), or one error line.

    ``rules-without-A-B`` is the rule rewriter with transformations A and B left out;
    ``MODULE:NAME`` a ``Rewriter``, a subclass or a factory (called with no arguments).
    """
    from autoprofiler.rewrite.base import Rewriter
    from autoprofiler.rewrite.llm_rewriter import LLMRewriter
    from autoprofiler.rewrite.rules import RuleRewriter

    if spec == "llm":
        return LLMRewriter(llm_client(llm, base_url, store))
    if ":" not in spec:
        return RuleRewriter.from_name(spec)
    target = _plugged_in(spec)
    made = target() if callable(target) else target
    if not isinstance(made, Rewriter):
        fail(f"--rewriter {spec}: gives a {type(made).__name__}, not a Rewriter")
    return made


def make_proposer(
    kind: ProposerKind,
    edits: int,
    llm: str | None,
    base_url: str | None,
    store: Store,
    menu: Sequence[Sequence[str]] = (),
    routing: Sequence[str] = (),
) -> Proposer:
    """The proposer ``--proposer`` names (keeping leaves on ``menu`` when one is given)."""
    from autoprofiler.learn.proposers import LLMProposer, LocalSearchProposer

    if kind is ProposerKind.search:
        return LocalSearchProposer(edits_per_round=edits, menu=menu, routing=routing)
    client = llm_client(llm, base_url, store)
    return LLMProposer(client, edits_per_round=edits, menu=menu, routing=routing)
