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
from typing import Literal

from cairn.config.settings import ModelChoice, Settings
from cairn.values import Value

__all__ = [
    "DEFAULT_ANTHROPIC_BASE_URL",
    "Endpoint",
    "NoAuthError",
    "choice_endpoint",
    "resolve_endpoint",
]

OPENAI_BASE_URL_SETTING = "OPENAI_BASE_URL or security.auth.baseUrl"
DEFAULT_ANTHROPIC_BASE_URL = "https://api.anthropic.com"
_OPENAI_VARIABLES = ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL")
_ANTHROPIC_KEYS = ("ANTHROPIC_API_KEY", "ANTHROPIC_AUTH_TOKEN")


class NoAuthError(Exception):
    """No endpoint, key or model is configured."""


class Endpoint(Value):
    """Where and how to reach the model.

    ``base_url_source``, ``key_source`` and ``model_source`` name the variable, setting or flag
    each value came from, so a message about an endpoint that does not answer, a key it rejects
    or a model it does not know can say what to fix. ``bearer``: the key goes in an
    ``Authorization: Bearer`` header on the Anthropic wire (``ANTHROPIC_AUTH_TOKEN``).
    """

    base_url: str
    api_key: str
    model: str
    fast_model: str | None = None
    base_url_source: str = OPENAI_BASE_URL_SETTING
    wire: Literal["openai", "anthropic"] = "openai"
    bearer: bool = False
    key_source: str = "OPENAI_API_KEY or security.auth.apiKey"
    model_source: str = "OPENAI_MODEL, model.name or --model"


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


def choice_endpoint(
    main: Endpoint,
    choice: ModelChoice,
    settings: Settings,
    *,
    environ: Mapping[str, str] | None = None,
) -> Endpoint:
    """Where a ``model.available`` entry is served: the main endpoint unless the entry names
    another wire or URL. The main key only ever goes to the main URL; another URL needs the
    entry's ``envKey`` (or, on the other wire, that wire's standard key variable)."""
    process = os.environ if environ is None else environ
    variables = {**settings.env, **process}
    wire = choice.auth_type or main.wire
    where = f"model.available entry {choice.id!r}"
    same_wire = wire == main.wire
    default_url = main.base_url if same_wire else _wire_url(wire, variables)
    base_url = (choice.base_url or default_url).rstrip("/")
    if not base_url:
        raise NoAuthError(f"{where} needs a baseUrl (the {wire} wire has no default URL)")
    source = f"{where} baseUrl" if choice.base_url else main.base_url_source
    bearer = False
    if choice.env_key:
        api_key, key_source = variables.get(choice.env_key, ""), choice.env_key
        if not api_key:
            raise NoAuthError(f"{where} needs its key in the environment variable {choice.env_key}")
    elif same_wire and base_url == main.base_url:
        api_key, bearer, key_source = main.api_key, main.bearer, main.key_source
    elif not same_wire:
        api_key, bearer, key_source = _wire_key(wire, variables)
        if not api_key:
            raise NoAuthError(f"{where} needs envKey: no {wire} key is set in the environment")
    else:  # the main key is not sent to another host
        raise NoAuthError(f"{where} names another baseUrl, so it needs envKey (the key's variable)")
    return Endpoint(
        base_url,
        api_key,
        choice.id,
        base_url_source=source,
        wire=wire,
        bearer=bearer,
        key_source=key_source,
        model_source=where,
    )


def _wire_url(wire: str, variables: Mapping[str, str]) -> str:
    if wire == "anthropic":
        return variables.get("ANTHROPIC_BASE_URL") or DEFAULT_ANTHROPIC_BASE_URL
    return variables.get("OPENAI_BASE_URL", "")


def _wire_key(wire: str, variables: Mapping[str, str]) -> tuple[str, bool, str]:
    """The key in ``wire``'s standard variable, whether it is a bearer token, and the variable."""
    if wire == "anthropic":
        key = variables.get("ANTHROPIC_API_KEY", "")
        token = variables.get("ANTHROPIC_AUTH_TOKEN", "")
        if key:
            return key, False, "ANTHROPIC_API_KEY"
        return token, bool(token), "ANTHROPIC_AUTH_TOKEN"
    return variables.get("OPENAI_API_KEY", ""), False, "OPENAI_API_KEY"


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
    auth = settings.security.auth
    url_setting, key_setting = "security.auth.baseUrl", "security.auth.apiKey"
    base_url, source = _layered(process, settings, "OPENAI_BASE_URL", url_setting, auth.base_url)
    api_key, key_source = _layered(process, settings, "OPENAI_API_KEY", key_setting, auth.api_key)
    chosen, model_source = _model(process, settings, "OPENAI_MODEL", model)
    _require(
        ("OPENAI_BASE_URL (or security.auth.baseUrl)", base_url),
        ("OPENAI_API_KEY (or security.auth.apiKey)", api_key),
        ("OPENAI_MODEL (or model.name, or --model)", chosen),
    )
    assert api_key and chosen
    return Endpoint(
        base_url.rstrip("/"),
        api_key,
        chosen,
        settings.fast_model or None,
        base_url_source=source,
        key_source=key_source,
        model_source=model_source,
    )


def _anthropic(settings: Settings, model: str | None, process: Mapping[str, str]) -> Endpoint:
    auth = settings.security.auth
    url_setting, key_setting = "security.auth.baseUrl", "security.auth.apiKey"
    base_url, source = _layered(process, settings, "ANTHROPIC_BASE_URL", url_setting, auth.base_url)
    if not base_url:
        base_url, source = DEFAULT_ANTHROPIC_BASE_URL, "the default Anthropic API URL"
    token = process.get("ANTHROPIC_AUTH_TOKEN") or settings.env.get("ANTHROPIC_AUTH_TOKEN")
    api_key, key_source = _layered(
        process, settings, "ANTHROPIC_API_KEY", key_setting, auth.api_key
    )
    chosen, model_source = _model(process, settings, "ANTHROPIC_MODEL", model)
    _require(
        ("ANTHROPIC_API_KEY (or security.auth.apiKey, or ANTHROPIC_AUTH_TOKEN)", api_key or token),
        ("ANTHROPIC_MODEL (or model.name, or --model)", chosen),
    )
    assert chosen
    return Endpoint(
        base_url.rstrip("/"),
        api_key or token or "",
        chosen,
        settings.fast_model
        or process.get("ANTHROPIC_SMALL_FAST_MODEL")
        or settings.env.get("ANTHROPIC_SMALL_FAST_MODEL")
        or None,
        base_url_source=source,
        wire="anthropic",
        bearer=not api_key and bool(token),
        key_source=key_source or "ANTHROPIC_AUTH_TOKEN",
        model_source=model_source,
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


def _layered(
    process: Mapping[str, str], settings: Settings, variable: str, setting: str, value: str | None
) -> tuple[str, str]:
    """``(value, where it came from)``, highest first: the process environment's ``variable``,
    the ``setting``'s ``value``, then ``variable`` in the settings' ``env`` block."""
    return _first(
        (variable, process.get(variable)),
        (setting, value),
        (f"{variable} in the settings' env", settings.env.get(variable)),
    )


def _model(
    process: Mapping[str, str], settings: Settings, variable: str, flag: str | None
) -> tuple[str, str]:
    """The model: the ``--model`` flag first, then as :func:`_layered` with ``model.name``."""
    if flag:
        return flag, "--model"
    return _layered(process, settings, variable, "model.name", settings.model.name)


def _first(*candidates: tuple[str, str | None]) -> tuple[str, str]:
    """The first non-empty ``(source, value)``, as ``(value, source)``; ``("", "")`` if none."""
    for source, value in candidates:
        if value:
            return value, source
    return "", ""
