"""Which model endpoint to talk to: wire, base URL, key and model, from flags, env, settings.

Precedence, highest first: the ``--model`` flag, the process environment, ``settings.json``
(``security.auth.*``, ``model.name``), then the settings file's ``env`` block.

The wire is ``security.auth.type`` (or Qwen Code's ``selectedType``); unset, it is the OpenAI
wire, unless no OpenAI endpoint is configured at all and an Anthropic key is
(``ANTHROPIC_API_KEY`` or ``ANTHROPIC_AUTH_TOKEN``): then the Anthropic Messages API.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Literal

from cairn.config.settings import Settings

__all__ = ["DEFAULT_ANTHROPIC_BASE_URL", "Endpoint", "NoAuthError", "resolve_endpoint"]

OPENAI_BASE_URL_SETTING = "OPENAI_BASE_URL or security.auth.baseUrl"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
_OPENAI_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL")
_ANTHROPIC_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


class NoAuthError(Exception):
    """No endpoint, key or model is configured."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach the model.

    ``base_url_source`` names the variable or setting the base URL came from, so a message about
    an endpoint that does not answer can say what to fix. ``bearer``: the key goes in an
    ``Authorization: Bearer`` header on the Anthropic wire (``ANTHROPIC_AUTH_TOKEN``).
    """

    base_url: str
    api_key: str
    model: str
    fast_model: str | None = None
    base_url_source: str = OPENAI_BASE_URL_SETTING
    wire: Literal["openai", "anthropic"] = "openai"
    bearer: bool = False


def resolve_endpoint(
    settings: Settings,
    *,
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """Resolve the endpoint: flag > process environment > settings > settings ``env``."""
    process = os.environ if environ is None else environ
    if _wire(settings, process) == "anthropic":
        return _anthropic(settings, model, process)
    return _openai(settings, model, process)


def _wire(settings: Settings, process: Mapping[str, str]) -> str:
    auth = settings.security.auth
    chosen = auth.type or auth.selected_type
    if chosen:
        return "anthropic" if chosen == "anthropic" else "openai"
    variables = {**settings.env, **process}
    openai_configured = any(variables.get(name) for name in _OPENAI_VARIABLES)
    if openai_configured or auth.base_url or auth.api_key:
        return "openai"
    return "anthropic" if any(variables.get(name) for name in _ANTHROPIC_KEYS) else "openai"


def _openai(settings: Settings, model: str | None, process: Mapping[str, str]) -> Endpoint:
    fallback = settings.env
    auth = settings.security.auth
    base_url, source = _first(
        ("OPENAI_BASE_URL", process.get("OPENAI_BASE_URL")),
        ("security.auth.baseUrl", auth.base_url),
        ("OPENAI_BASE_URL in the settings' env", fallback.get("OPENAI_BASE_URL")),
    )
    api_key = process.get("OPENAI_API_KEY") or auth.api_key or fallback.get("OPENAI_API_KEY")
    chosen = (
        model or process.get("OPENAI_MODEL") or settings.model.name or fallback.get("OPENAI_MODEL")
    )
    _require(
        ("OPENAI_BASE_URL (or security.auth.baseUrl)", base_url),
        ("OPENAI_API_KEY (or security.auth.apiKey)", api_key),
        ("OPENAI_MODEL (or model.name, or --model)", chosen),
    )
    assert api_key and chosen
    return Endpoint(
        base_url.rstrip("/"), api_key, chosen, settings.fast_model or None, base_url_source=source
    )


def _anthropic(settings: Settings, model: str | None, process: Mapping[str, str]) -> Endpoint:
    fallback = settings.env
    auth = settings.security.auth

    def variable(name: str) -> str | None:
        return process.get(name) or fallback.get(name)

    base_url, source = _first(
        ("ANTHROPIC_BASE_URL", process.get("ANTHROPIC_BASE_URL")),
        ("security.auth.baseUrl", auth.base_url),
        ("ANTHROPIC_BASE_URL in the settings' env", fallback.get("ANTHROPIC_BASE_URL")),
        ("the default Anthropic API URL", DEFAULT_ANTHROPIC_BASE_URL),
    )
    token = variable("ANTHROPIC_AUTH_TOKEN")
    api_key = process.get("ANTHROPIC_API_KEY") or auth.api_key or fallback.get("ANTHROPIC_API_KEY")
    chosen = (
        model
        or process.get("ANTHROPIC_MODEL")
        or settings.model.name
        or fallback.get("ANTHROPIC_MODEL")
    )
    _require(
        ("ANTHROPIC_API_KEY (or security.auth.apiKey, or ANTHROPIC_AUTH_TOKEN)", api_key or token),
        ("ANTHROPIC_MODEL (or model.name, or --model)", chosen),
    )
    assert chosen
    return Endpoint(
        base_url.rstrip("/"),
        api_key or token or "",
        chosen,
        settings.fast_model or variable("ANTHROPIC_SMALL_FAST_MODEL") or None,
        base_url_source=source,
        wire="anthropic",
        bearer=not api_key and bool(token),
    )


def _require(*named: tuple[str, str | None]) -> None:
    missing = [name for name, value in named if not value]
    if missing:
        raise NoAuthError(
            "No model endpoint is configured. Set "
            + ", ".join(missing)
            + " in the environment or in ~/.cairn/settings.json. "
            "Any OpenAI-compatible endpoint works, and the Anthropic API "
            '(security.auth.type: "anthropic"); `cairn demo` runs without one.'
        )


def _first(*candidates: tuple[str, str | None]) -> tuple[str, str]:
    """The first non-empty ``(source, value)``, as ``(value, source)``; ``("", "")`` if none."""
    for source, value in candidates:
        if value:
            return value, source
    return "", ""
