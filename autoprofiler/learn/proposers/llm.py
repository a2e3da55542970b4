"""The LLM proposer: the tree, budget, recorded groups and feedback in one prompt; edits out.

The prompt is the package data file ``autoprofiler/learn/prompts/propose.md`` (system message:
``propose_system.md``); a file of the same name in ``AUTOPROFILER_PROMPTS_DIR`` takes
precedence. Feedback lists the training problems whose optimized kernel failed or was slowest,
each with its outcome and its rendered profile. The reply's first JSON value (a fenced block
preferred) is read as a list of edits (``edit_from_dict``), each validated by applying it; an
unusable reply or edit becomes a proposal with the reason, which the learner records as an
invalid trial. Asked through a replay-only client (``recorded:``) a round with no imported
reply raises ``AwaitingReply`` with the request to export: the study waits for it.

For a tree that shows one configuration per leaf (``show: leaf``) the prompt says so; with a
``menu`` it asks that every leaf list one of its configurations, and that condition nodes
route on one of the ``routing`` groups.
"""

from __future__ import annotations

import json
import logging
import re
import string
from collections.abc import Sequence
from typing import Any

from autoprofiler import prompts
from autoprofiler.learn.objective import ProblemOutcome
from autoprofiler.learn.proposers.base import (
    AwaitingReply,
    Proposal,
    ProposalContext,
    Proposer,
    menu_of,
)
from autoprofiler.learn.recorded import metric_rank
from autoprofiler.llm.base import (
    ChatMessage,
    LLMClient,
    LLMError,
    NotRecordedError,
    SamplingParams,
)
from autoprofiler.llm.batch import BatchRequest
from autoprofiler.profile.catalogue import GROUPS
from autoprofiler.profile.render import render_profile
from autoprofiler.store import content_key
from autoprofiler.tree.edits import edit_from_dict
from autoprofiler.tree.model import ProfilingTree, TreeError
from autoprofiler.tree.serialize import tree_to_json

log = logging.getLogger(__name__)

REPLY_HEAD_CHARS = 400
_FENCE = re.compile(r"```[^\n]*\n(.*?)(?:```|\Z)", re.DOTALL)


def load_prompt(name: str) -> str:
    """The text of the learner's prompt template ``name`` (user folder first)."""
    return prompts.load_prompt("autoprofiler.learn", name)


def first_json(text: str) -> Any:
    """The first JSON array or object in ``text``, fenced blocks first; None when there is none."""
    decoder = json.JSONDecoder()
    for body in (*(m.group(1) for m in _FENCE.finditer(text)), text):
        for start, char in enumerate(body):
            if char in "[{":
                try:
                    return decoder.raw_decode(body, start)[0]
                except json.JSONDecodeError:
                    continue
    return None


def parse_edits(reply: str, tree: ProfilingTree, limit: int) -> list[Proposal]:
    """The edits in an LLM ``reply`` (a list, one edit, or ``{"edits": [...]}``), at most
    ``limit``, each checked by applying it to ``tree``; unusable ones carry their reason."""
    value = first_json(reply)
    if isinstance(value, dict):
        value = value.get("edits", [value])
    if not isinstance(value, list) or not value:
        why = "no JSON edit in the reply" if value is None else "the JSON is not a list of edits"
        return [Proposal(None, why, reply[:REPLY_HEAD_CHARS])]
    proposals = []
    for number, item in enumerate(value[:limit], 1):
        try:
            edit = edit_from_dict(item)
            edit.apply(tree)
        except (TreeError, TypeError) as exc:
            proposals.append(Proposal(None, f"edit {number}: {exc}", item))
            continue
        proposals.append(Proposal(edit))
    return proposals


class LLMProposer(Proposer):
    """Asks ``client`` once per round for up to ``edits_per_round`` edits.

    Feedback shows at most ``feedback_problems`` problems (failures first, then the slowest
    below ``slow_below``x), each profile cut to ``profile_lines`` metrics per group; at most
    ``max_metrics`` splittable metrics and ``history`` earlier trials are listed.
    """

    name = "llm"

    def __init__(
        self,
        client: LLMClient,
        params: SamplingParams | None = None,
        *,
        edits_per_round: int = 4,
        feedback_problems: int = 3,
        slow_below: float = 1.0,
        profile_lines: int = 6,
        max_metrics: int = 20,
        history: int = 10,
        menu: Sequence[Sequence[str]] = (),
        routing: Sequence[str] = (),
    ) -> None:
        self.client = client
        self.params = params or SamplingParams(max_tokens=1024)
        self.edits_per_round = edits_per_round
        self.feedback_problems = feedback_problems
        self.slow_below = slow_below
        self.profile_lines = profile_lines
        self.max_metrics = max_metrics
        self.history = history
        self.menu = menu_of(menu)
        self.routing = tuple(dict.fromkeys(routing))

    @property
    def id(self) -> str:
        settings = (
            self.params.to_dict(),
            self.edits_per_round,
            self.feedback_problems,
            self.slow_below,
            self.profile_lines,
            self.max_metrics,
            self.history,
            *((self.menu, self.routing) if self.menu else ()),
        )
        return f"{self.name}:{self.client.model_id}:{content_key(*settings)[:12]}"

    def propose(self, context: ProposalContext) -> list[Proposal]:
        messages = self.messages(context)
        try:
            reply = self.client.complete(messages, self.params)
        except NotRecordedError as exc:
            name = f"propose-round{context.round + 1}"
            request = BatchRequest(
                context.study or "study", name, self.client.model_id, tuple(messages), self.params
            )
            raise AwaitingReply(f"round {context.round + 1}: {exc}", request) from None
        except LLMError as exc:
            log.warning("round %d: %s", context.round, exc)
            return [Proposal(None, f"LLM request failed: {exc}")]
        proposals = parse_edits(reply.text, context.tree, self.edits_per_round)
        if reply.finish_reason == "length" and all(p.edit is None for p in proposals):
            proposals = [
                Proposal(None, f"{p.error} (the reply hit max_tokens)", p.proposed)
                for p in proposals
            ]
        return proposals

    def messages(self, context: ProposalContext) -> list[ChatMessage]:
        """The system and user messages of one round."""
        summary = context.summary
        budget = "unlimited" if context.budget_s is None else f"{context.budget_s:g} s"
        values = {
            "max_edits": self.edits_per_round,
            "budget": budget,
            "problems": summary.problems,
            "startup": ", ".join(f"{k} {v:.2g} s" for k, v in summary.startup_s.items()),
            "catalogue": self._catalogue(context),
            "metrics": self._metrics(context),
            "score": context.score.summary(),
            "tree": tree_to_json(context.tree).strip(),
            "feedback": self._feedback(context),
            "history": self._history(context),
            "showing": self._showing(context.tree),
            "edit_forms": load_prompt(
                "propose_edits_menu.md" if self._menu_applies(context.tree) else "propose_edits.md"
            ).strip(),
        }
        user = string.Template(load_prompt("propose.md")).substitute(values)
        system = load_prompt("propose_system.md").strip()
        return [{"role": "system", "content": system}, {"role": "user", "content": user}]

    def _menu_applies(self, tree: ProfilingTree) -> bool:
        return bool(self.menu) and tree.show == "leaf"

    def _showing(self, tree: ProfilingTree) -> str:
        """What the optimizer is shown, and the menu the leaves keep to, if any."""
        if tree.show != "leaf":
            return load_prompt("propose_sees_path.md").strip()
        seen = load_prompt("propose_sees_leaf.md").strip()
        if not self.menu:
            return seen
        menu = string.Template(load_prompt("propose_menu.md")).substitute(
            menu="; ".join(json.dumps(list(c)) for c in self.menu),
            routing=json.dumps(list(self.routing)),
            example=json.dumps([self.routing[0]]),
        )
        return f"{seen}\n{menu.strip()}"

    def _catalogue(self, context: ProposalContext) -> str:
        """The recorded groups (with a menu: those of the menu and the routing groups)."""
        groups = context.summary.groups.values()
        if self._menu_applies(context.tree):
            named = {*self.routing, *(g for c in self.menu for g in c)}
            groups = [g for g in groups if g.name in named]
        rows = [
            f"- {g.name} ({g.profiler}, ~{g.median_cost_s:.2g} s, recorded for {g.problems}): "
            f"{g.description}"
            for g in groups
        ]
        return "\n".join(rows) or "(none)"

    def _metrics(self, context: ProposalContext) -> str:
        """Splittable metrics with their quartiles (with a menu: the routing groups')."""
        summary = context.summary
        metrics = list(summary.values)
        if self._menu_applies(context.tree):
            metrics = list(summary.split_metrics(self.routing))
        rows = []
        for metric in sorted(metrics, key=metric_rank)[: self.max_metrics]:
            quartiles = ", ".join(f"{t:g}" for t in summary.thresholds(metric))
            rows.append(f"- {metric} ({', '.join(summary.yielded_by[metric])}): {quartiles}")
        return "\n".join(rows) or "(none)"

    def _feedback(self, context: ProposalContext) -> str:
        def counted(o: ProblemOutcome) -> float:
            return o.speedup if o.correct and o.speedup is not None else 0.0

        poor = [o for o in context.score.outcomes if counted(o) < self.slow_below]
        poor.sort(key=lambda o: (counted(o), o.problem))
        blocks = []
        for outcome in poor[: self.feedback_problems]:
            if outcome.correct and outcome.speedup is not None:
                verdict = f"correct, {outcome.speedup:.2f}x over eager"
            else:
                verdict = f"failed: {outcome.failure}"
            profile = context.score.profiles.get(outcome.problem_hash)
            shown = (
                render_profile(profile.seen, GROUPS, self.profile_lines, max_kernels=3)
                if profile is not None
                else "(profile not available)"
            )
            blocks.append(f"### {outcome.problem}: {verdict}\n{shown}")
        return "\n\n".join(blocks) or "(none: every optimized kernel was correct and faster)"

    def _history(self, context: ProposalContext) -> str:
        recent = list(context.history)[-self.history :]
        rows = []
        for trial in recent:
            shown = json.dumps(trial.edit if trial.edit is not None else trial.proposed)
            rows.append(f"- {shown[:300]}: {trial.state.value} ({trial.reason})")
        return "\n".join(rows) or "(none yet)"
