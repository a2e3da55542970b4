"""``--llm`` specs, keys and servers from the environment, and the missing-SDK message."""

from __future__ import annotations

import sys

import pytest

from autoprofiler.llm import (
    AnthropicClient,
    CachedLLMClient,
    LLMConfig,
    LLMError,
    OpenAIClient,
    make_client,
    parse_llm_spec,
)
from autoprofiler.llm.config import LOCAL_API_KEY
from autoprofiler.store import Store


def test_spec_names_provider_and_model() -> None:
    assert parse_llm_spec("openai:gpt-4o") == ("openai", "gpt-4o")
    assert parse_llm_spec("anthropic:claude-sonnet-4-5") == ("anthropic", "claude-sonnet-4-5")
    assert parse_llm_spec("openai:qwen2.5-coder:7b") == ("openai", "qwen2.5-coder:7b")


@pytest.mark.parametrize("spec", ["gpt-4o", "openai:", "mistral:large", ""])
def test_a_bad_spec_is_a_one_line_error(spec: str) -> None:
    with pytest.raises(LLMError, match="expected openai:MODEL or anthropic:MODEL"):
        parse_llm_spec(spec)


def test_key_and_server_come_from_the_environment() -> None:
    environ = {"ANTHROPIC_API_KEY": "sk-a", "AUTOPROFILER_LLM_BASE_URL": "http://proxy:8080"}
    config = LLMConfig.from_spec("anthropic:claude", environ=environ, max_retries=2)
    assert (config.api_key, config.base_url, config.retry.max_retries) == (
        "sk-a",
        "http://proxy:8080",
        2,
    )
    assert "sk-a" not in repr(config)
    explicit = LLMConfig.from_spec("anthropic:claude", base_url="http://x", environ=environ)
    assert explicit.base_url == "http://x"


def test_a_local_server_needs_no_key() -> None:
    config = LLMConfig.from_spec("openai:llama", base_url="http://127.0.0.1:8000/v1", environ={})
    assert config.api_key == LOCAL_API_KEY


def test_a_missing_key_for_a_hosted_api_says_what_to_set() -> None:
    with pytest.raises(LLMError, match="OPENAI_API_KEY is not set"):
        LLMConfig.from_spec("openai:gpt-4o", environ={})


def test_bad_limits_are_refused() -> None:
    with pytest.raises(LLMError, match="timeout must be positive"):
        LLMConfig.from_spec("openai:m", base_url="http://x", timeout_s=0, environ={})


def test_make_client_builds_the_provider_client_and_caches_with_a_store() -> None:
    openai_config = LLMConfig.from_spec("openai:m", environ={"OPENAI_API_KEY": "k"})
    anthropic_config = LLMConfig.from_spec("anthropic:c", environ={"ANTHROPIC_API_KEY": "k"})
    assert isinstance(make_client(openai_config), OpenAIClient)
    assert isinstance(make_client(anthropic_config), AnthropicClient)
    with Store(":memory:") as store:
        cached = make_client(openai_config, store)
        assert isinstance(cached, CachedLLMClient)
        assert cached.model_id == "openai:m"


@pytest.mark.parametrize("sdk", ["openai", "anthropic"])
def test_a_missing_sdk_says_how_to_install_it(sdk: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, sdk, None)
    config = LLMConfig.from_spec(f"{sdk}:m", base_url="http://x", environ={})
    with pytest.raises(LLMError, match=rf"the {sdk} package is not installed: pip install "):
        make_client(config)
