"""Resolving the model endpoint: precedence, and where the base URL, key and model came from."""

from __future__ import annotations

import pytest

from cairn.config.endpoint import (
    DEFAULT_ANTHROPIC_BASE_URL,
    Endpoint,
    NoAuthError,
    choice_endpoint,
    resolve_endpoint,
)
from cairn.config.settings import ModelChoice, Settings

COMPLETE = {"OPENAI_BASE_URL": "http://env/v1", "OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}


def test_the_base_url_source_names_the_environment_variable() -> None:
    endpoint = resolve_endpoint(Settings(), environ=COMPLETE)

    assert endpoint.base_url_source == "OPENAI_BASE_URL"


def test_the_base_url_source_names_the_setting() -> None:
    settings = Settings.model_validate({"security": {"auth": {"baseUrl": "http://s/v1"}}})

    endpoint = resolve_endpoint(settings, environ={"OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"})

    assert (endpoint.base_url, endpoint.base_url_source) == ("http://s/v1", "security.auth.baseUrl")


def test_settings_beat_the_settings_env_fallback_as_documented() -> None:
    """Regression: the settings' ``env`` block (documented as the lowest priority) overrode
    ``security.auth.baseUrl`` and ``security.auth.apiKey``."""
    settings = Settings.model_validate(
        {
            "env": {"OPENAI_BASE_URL": "http://fallback/v1", "OPENAI_API_KEY": "fallback-key"},
            "security": {"auth": {"baseUrl": "http://chosen/v1", "apiKey": "chosen-key"}},
            "model": {"name": "m"},
        }
    )

    endpoint = resolve_endpoint(settings, environ={})

    assert (endpoint.base_url, endpoint.api_key) == ("http://chosen/v1", "chosen-key")


@pytest.mark.parametrize(
    ("settings", "environ", "model", "sources"),
    [
        ({}, COMPLETE, None, ("OPENAI_API_KEY", "OPENAI_MODEL")),
        ({}, COMPLETE, "flagged", ("OPENAI_API_KEY", "--model")),
        (
            {"security": {"auth": {"apiKey": "k"}}, "model": {"name": "m"}},
            {"OPENAI_BASE_URL": "http://env/v1"},
            None,
            ("security.auth.apiKey", "model.name"),
        ),
        (
            {"env": {"OPENAI_API_KEY": "k", "OPENAI_MODEL": "m"}},
            {"OPENAI_BASE_URL": "http://env/v1"},
            None,
            ("OPENAI_API_KEY in the settings' env", "OPENAI_MODEL in the settings' env"),
        ),
        (
            {"security": {"auth": {"type": "anthropic"}}},
            {"ANTHROPIC_AUTH_TOKEN": "t", "ANTHROPIC_MODEL": "c"},
            None,
            ("ANTHROPIC_AUTH_TOKEN", "ANTHROPIC_MODEL"),
        ),
    ],
)
def test_the_key_and_model_sources_name_what_to_fix(
    settings: dict[str, object],
    environ: dict[str, str],
    model: str | None,
    sources: tuple[str, str],
) -> None:
    endpoint = resolve_endpoint(Settings.model_validate(settings), model=model, environ=environ)

    assert (endpoint.key_source, endpoint.model_source) == sources


def test_anthropic_variables_alone_select_the_messages_api() -> None:
    env = {"ANTHROPIC_API_KEY": "ant", "ANTHROPIC_MODEL": "claude-sonnet-4"}

    endpoint = resolve_endpoint(Settings(), environ=env)

    assert (endpoint.wire, endpoint.base_url, endpoint.model) == (
        "anthropic",
        "https://api.anthropic.com",
        "claude-sonnet-4",
    )
    assert (endpoint.api_key, endpoint.bearer) == ("ant", False)


def test_openai_variables_win_over_anthropic_ones_when_both_are_set() -> None:
    env = {**COMPLETE, "ANTHROPIC_API_KEY": "ant", "ANTHROPIC_MODEL": "claude"}

    assert resolve_endpoint(Settings(), environ=env).wire == "openai"


def test_the_auth_type_setting_selects_anthropic_with_its_base_url() -> None:
    settings = Settings.model_validate(
        {
            "security": {"auth": {"type": "anthropic", "baseUrl": "http://gw/v1", "apiKey": "k"}},
            "model": {"name": "claude-opus"},
        }
    )

    endpoint = resolve_endpoint(settings, environ=COMPLETE)

    assert (endpoint.wire, endpoint.base_url, endpoint.model) == (
        "anthropic",
        "http://gw/v1",
        "claude-opus",
    )
    assert endpoint.base_url_source == "security.auth.baseUrl"


def test_qwen_codes_selected_type_is_read_too() -> None:
    settings = Settings.model_validate({"security": {"auth": {"selectedType": "anthropic"}}})

    endpoint = resolve_endpoint(
        settings, environ={"ANTHROPIC_API_KEY": "a", "ANTHROPIC_MODEL": "c"}
    )

    assert endpoint.wire == "anthropic"


def test_an_auth_token_is_sent_as_a_bearer_key() -> None:
    env = {
        "ANTHROPIC_AUTH_TOKEN": "tok",
        "ANTHROPIC_MODEL": "claude",
        "ANTHROPIC_BASE_URL": "http://gw",
    }

    endpoint = resolve_endpoint(Settings(), environ=env)

    assert (endpoint.api_key, endpoint.bearer, endpoint.base_url_source) == (
        "tok",
        True,
        "ANTHROPIC_BASE_URL",
    )


def test_a_missing_anthropic_model_is_named() -> None:
    settings = Settings.model_validate({"security": {"auth": {"type": "anthropic"}}})

    with pytest.raises(NoAuthError, match="ANTHROPIC_MODEL"):
        resolve_endpoint(settings, environ={"ANTHROPIC_API_KEY": "a"})


# ----- model.available entries served elsewhere -----

MAIN = Endpoint("http://main/v1", "main-key", "m", base_url_source="OPENAI_BASE_URL")


def entry(**fields: str) -> ModelChoice:
    return ModelChoice.model_validate(fields)


def test_an_entry_with_only_a_name_is_served_by_the_main_endpoint() -> None:
    endpoint = choice_endpoint(
        MAIN, entry(id="other", envKey="OTHER_KEY"), Settings(), environ={"OTHER_KEY": "other-key"}
    )

    assert (endpoint.base_url, endpoint.api_key, endpoint.model) == (
        "http://main/v1",
        "other-key",
        "other",
    )


def test_the_main_key_is_never_sent_to_another_base_url() -> None:
    with pytest.raises(NoAuthError, match="needs envKey"):
        choice_endpoint(MAIN, entry(id="x", baseUrl="http://elsewhere/v1"), Settings(), environ={})


def test_another_base_url_takes_the_key_from_its_env_key() -> None:
    choice = entry(id="x", baseUrl="http://elsewhere/v1/", envKey="ELSEWHERE_KEY")

    endpoint = choice_endpoint(MAIN, choice, Settings(), environ={"ELSEWHERE_KEY": "secret"})

    assert (endpoint.base_url, endpoint.api_key, endpoint.wire) == (
        "http://elsewhere/v1",
        "secret",
        "openai",
    )
    assert endpoint.base_url_source == "model.available entry 'x' baseUrl"
    assert (endpoint.key_source, endpoint.model_source) == (
        "ELSEWHERE_KEY",
        "model.available entry 'x'",
    )


def test_an_anthropic_entry_defaults_to_the_anthropic_api_and_its_key_variable() -> None:
    choice = entry(id="claude-x", authType="anthropic")

    endpoint = choice_endpoint(MAIN, choice, Settings(), environ={"ANTHROPIC_API_KEY": "ak"})

    assert (endpoint.base_url, endpoint.api_key, endpoint.wire, endpoint.bearer) == (
        DEFAULT_ANTHROPIC_BASE_URL,
        "ak",
        "anthropic",
        False,
    )


def test_an_anthropic_entry_without_any_key_says_what_to_set() -> None:
    with pytest.raises(NoAuthError, match="needs envKey: no anthropic key"):
        choice_endpoint(MAIN, entry(id="c", authType="anthropic"), Settings(), environ={})


def test_an_env_key_that_is_not_set_is_named() -> None:
    with pytest.raises(NoAuthError, match="environment variable MISSING_KEY"):
        choice_endpoint(MAIN, entry(id="c", envKey="MISSING_KEY"), Settings(), environ={})


def test_a_blank_model_id_is_a_settings_error() -> None:
    with pytest.raises(ValueError, match="an entry with a non-blank `id`"):
        entry(id="  ")
