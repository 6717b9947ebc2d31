"""Which model endpoint to talk to: base URL, key and model, from flags, environment, settings.

Precedence, highest first: the ``--model`` flag, the process environment, ``settings.json``
(``security.auth.*``, ``model.name``), then the settings file's ``env`` block.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass

from cairn.config.settings import Settings

__all__ = ["Endpoint", "NoAuthError", "resolve_endpoint"]

OPENAI_BASE_URL_SETTING = "OPENAI_BASE_URL or security.auth.baseUrl"


class NoAuthError(Exception):
    """No endpoint, key or model is configured."""


@dataclass(frozen=True)
class Endpoint:
    """Where and how to reach the model.

    ``base_url_source`` names the variable or setting the base URL came from, so a message about
    an endpoint that does not answer can say what to fix.
    """

    base_url: str
    api_key: str
    model: str
    fast_model: str | None = None
    base_url_source: str = OPENAI_BASE_URL_SETTING


def resolve_endpoint(
    settings: Settings,
    *,
    model: str | None = None,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """Resolve base URL, key and model: flag > process environment > settings > ``env``."""
    process = os.environ if environ is None else environ
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
    api_key, chosen = api_key or "", chosen or ""
    missing = [
        name
        for name, value in (
            ("OPENAI_BASE_URL (or security.auth.baseUrl)", base_url),
            ("OPENAI_API_KEY (or security.auth.apiKey)", api_key),
            ("OPENAI_MODEL (or model.name, or --model)", chosen),
        )
        if not value
    ]
    if missing:
        raise NoAuthError(
            "No model endpoint is configured. Set "
            + ", ".join(missing)
            + " in the environment or in ~/.cairn/settings.json. "
            "Any OpenAI-compatible endpoint works; `cairn demo` runs without one."
        )
    return Endpoint(
        base_url.rstrip("/"), api_key, chosen, settings.fast_model or None, base_url_source=source
    )


def _first(*candidates: tuple[str, str | None]) -> tuple[str, str]:
    """The first non-empty ``(source, value)``, as ``(value, source)``; ``("", "")`` if none."""
    for source, value in candidates:
        if value:
            return value, source
    return "", ""
