"""Resolving the model endpoint: precedence, and where the base URL came from."""

from __future__ import annotations

from cairn.config.endpoint import resolve_endpoint
from cairn.config.settings import Settings

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
