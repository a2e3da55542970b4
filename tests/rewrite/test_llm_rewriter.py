"""The LLM rewriter's own logic: code extraction from crafted replies, prompt assembly and
overrides, and how replies and LLM failures become candidates.

``ScriptedClient`` stands in for the LLM only to unit-test the code around it; the rewriter
against a real OpenAI-compatible server is tested in ``tests/llm/test_rewriter_live.py``.
"""

from __future__ import annotations

import textwrap
from collections.abc import Sequence
from pathlib import Path

import pytest

from autoprofiler.llm import ChatMessage, LLMClient, LLMError, LLMReply, SamplingParams, Usage
from autoprofiler.problem import Problem
from autoprofiler.profile.base import KernelSummary, MetricValue, Profile
from autoprofiler.prompts import PROMPTS_DIR_ENV, PromptError
from autoprofiler.rewrite import profile_hash
from autoprofiler.rewrite.base import RewriteContext
from autoprofiler.rewrite.llm_rewriter import (
    LLMRewriter,
    build_messages,
    extract_code,
    load_prompt,
)

MODEL_NEW = textwrap.dedent(
    """\
    import torch
    import torch.nn as nn

    class ModelNew(nn.Module):
        def __init__(self, features):
            super().__init__()
            self.weight = nn.Parameter(torch.randn(features, features))

        def forward(self, x):
            return torch.relu(x @ self.weight) * 2
    """
)
NOT_A_PROGRAM = "no fenced code block, and the reply is not Python defining ModelNew"
USAGE_EXAMPLE = "model = ModelNew(32)\nprint(model(torch.randn(16, 32)).shape)\n"


def fenced(code: str, lang: str = "python") -> str:
    return f"```{lang}\n{code}```\n"


# Code extraction -------------------------------------------------------------------------------


def test_a_fenced_python_block_is_extracted() -> None:
    code = extract_code("Here is a faster version.\n\n" + fenced(MODEL_NEW) + "\nIt fuses ops.")
    assert (code.source, code.failure) == (MODEL_NEW, "")


def test_an_untagged_fence_is_used_when_no_block_is_tagged_python() -> None:
    assert extract_code(fenced(MODEL_NEW, lang="")).source == MODEL_NEW


def test_a_reply_without_fences_is_used_when_it_is_the_program() -> None:
    assert extract_code(MODEL_NEW).source == MODEL_NEW


def test_the_block_defining_model_new_wins_over_a_usage_example() -> None:
    reply = fenced(MODEL_NEW) + "Use it like this:\n" + fenced(USAGE_EXAMPLE)
    assert extract_code(reply).source == MODEL_NEW


def test_of_two_programs_the_last_is_taken() -> None:
    revised = MODEL_NEW.replace("* 2", "* 2.0")
    reply = "First try:\n" + fenced(MODEL_NEW) + "Better:\n" + fenced(revised)
    assert extract_code(reply).source == revised


def test_python_blocks_are_preferred_over_other_languages() -> None:
    reply = fenced("__global__ void k() {}\n", lang="cuda") + fenced(MODEL_NEW, lang="py")
    assert extract_code(reply).source == MODEL_NEW


def test_a_reply_cut_off_after_the_program_still_yields_it() -> None:
    assert extract_code("```python\n" + MODEL_NEW).source == MODEL_NEW


def test_model_new_may_be_bound_by_assignment_or_import() -> None:
    assert extract_code(fenced("import torch\nModelNew = torch.nn.Identity\n")).source
    assert extract_code(fenced("from somewhere import Fast as ModelNew\n")).source


@pytest.mark.parametrize(
    ("reply", "reason"),
    [
        ("", "empty reply"),
        ("I would fuse the matmul and the ReLU.", NOT_A_PROGRAM),
        (fenced(USAGE_EXAMPLE), "the code block does not define ModelNew"),
        (fenced("class Model(nn.Module):\n    pass\n"), "the code block does not define ModelNew"),
        (fenced("class ModelNew(nn.Module)\n    pass\n"), "the code block does not parse: line 1"),
        ("Sure!\nclass ModelNew:", NOT_A_PROGRAM),
    ],
    ids=["empty", "prose", "usage-only", "no-model-new", "syntax-error", "prose-and-code"],
)
def test_replies_without_usable_code_say_why(reply: str, reason: str) -> None:
    code = extract_code(reply)
    assert code.source == ""
    assert code.failure.startswith(reason)


# Prompts ---------------------------------------------------------------------------------------


def small_profile(problem: Problem) -> Profile:
    return Profile(
        problem_hash=problem.content_hash,
        device="NVIDIA H200",
        metrics={"static.flops": MetricValue(1.6e4, "FLOP", "static")},
        kernels=[KernelSummary("ampere_sgemm_32x32_tn", 4200.0)],
        groups=["static"],
    )


CONTEXT = RewriteContext(device="cuda", device_name="NVIDIA H200", atol=1e-3, rtol=2e-3)


def test_the_prompt_holds_problem_device_tolerance_and_contract(scale_problem: Problem) -> None:
    system, user = build_messages(scale_problem, None, CONTEXT)
    assert (system["role"], user["role"]) == ("system", "user")
    assert scale_problem.source.strip() in user["content"]
    assert "NVIDIA H200" in user["content"]
    assert "atol=0.001" in user["content"] and "rtol=0.002" in user["content"]
    assert "load_inline" in user["content"] and "Triton" in user["content"]
    assert "ModelNew" in user["content"]
    assert load_prompt("no_profile.md").strip() in user["content"]
    assert "$" not in user["content"].replace(scale_problem.source, "")


def test_the_prompt_shows_the_rendered_profile(scale_problem: Problem) -> None:
    _, user = build_messages(scale_problem, small_profile(scale_problem), CONTEXT)
    assert "ampere_sgemm_32x32_tn" in user["content"]
    assert "static.flops" in user["content"]
    assert load_prompt("no_profile.md").strip() not in user["content"]


def test_prompts_can_be_overridden_from_a_folder(
    scale_problem: Problem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rewrite.md").write_text("Optimise $problem_name on $device.\n")
    monkeypatch.setenv(PROMPTS_DIR_ENV, str(tmp_path))
    system, user = build_messages(scale_problem, None, CONTEXT)
    assert user["content"] == "Optimise scale on cuda.\n"
    assert system["content"] == load_prompt("system.md").strip()  # not overridden: packaged


def test_an_override_with_an_unknown_placeholder_is_refused(
    scale_problem: Problem, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "rewrite.md").write_text("Optimise $kernel_name.\n")
    monkeypatch.setenv(PROMPTS_DIR_ENV, str(tmp_path))
    with pytest.raises(PromptError, match=r"rewrite.md: unknown placeholder \$kernel_name"):
        build_messages(scale_problem, None, CONTEXT)


def test_an_unknown_prompt_name_is_refused() -> None:
    with pytest.raises(PromptError, match="no prompt template named"):
        load_prompt("missing.md")


# Candidates ------------------------------------------------------------------------------------


class ScriptedClient(LLMClient):
    """Answers every request with one reply (or raises one error), recording the requests."""

    def __init__(self, reply: str | LLMError, finish_reason: str = "stop") -> None:
        self.reply = reply
        self.finish_reason = finish_reason
        self.calls: list[tuple[list[ChatMessage], SamplingParams | None]] = []

    @property
    def model_id(self) -> str:
        return "scripted:v1"

    def complete(
        self, messages: Sequence[ChatMessage], params: SamplingParams | None = None
    ) -> LLMReply:
        self.calls.append((list(messages), params))
        if isinstance(self.reply, LLMError):
            raise self.reply
        return LLMReply(
            self.reply, "scripted-v1", Usage(120, 40), 0.5, finish_reason=self.finish_reason
        )


def test_a_good_reply_becomes_a_usable_candidate_from_one_call(scale_problem: Problem) -> None:
    client = ScriptedClient("Fused.\n" + fenced(MODEL_NEW))
    params = SamplingParams(max_tokens=2048)
    profile = small_profile(scale_problem)
    candidate = LLMRewriter(client, params).rewrite(scale_problem, profile, CONTEXT)
    assert candidate.usable
    assert candidate.source == MODEL_NEW
    assert candidate.producer == "llm:scripted:v1"
    assert candidate.profile_hash == profile_hash(profile) != ""
    assert candidate.info["prompt_tokens"] == 120
    assert candidate.info["completion_tokens"] == 40
    assert candidate.info["cached"] is False
    assert len(client.calls) == 1
    assert client.calls[0][1] == params


def test_a_reply_without_code_is_a_failed_candidate(scale_problem: Problem) -> None:
    client = ScriptedClient("I cannot help with that.", finish_reason="length")
    candidate = LLMRewriter(client).rewrite(scale_problem, None, CONTEXT)
    assert not candidate.usable
    assert candidate.source == ""
    assert candidate.failure.startswith("no usable code in the reply: no fenced code block")
    assert candidate.failure.endswith("(the reply hit max_tokens)")
    assert candidate.info["reply_head"] == "I cannot help with that."
    assert candidate.profile_hash == ""


def test_an_llm_error_is_a_failed_candidate(scale_problem: Problem) -> None:
    client = ScriptedClient(
        LLMError("scripted:v1: HTTP 503: overloaded (gave up after 5 attempts)")
    )
    candidate = LLMRewriter(client).rewrite(scale_problem, None, CONTEXT)
    assert not candidate.usable
    assert candidate.failure == (
        "LLM request failed: scripted:v1: HTTP 503: overloaded (gave up after 5 attempts)"
    )
    assert len(client.calls) == 1
