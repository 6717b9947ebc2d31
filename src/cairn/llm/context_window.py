"""The model's context window, as the server tells it.

A local server runs with the window it was started with (``llama-server -c 8192``, Ollama's
``num_ctx``, vLLM's ``--max-model-len``), often far below the model's nominal one, and cairn
must know it to compress in time. Servers say it in two places:

- their model information: vLLM's ``GET /v1/models`` entries carry ``max_model_len``, hosted
  catalogues (OpenRouter, Together, Groq, Mistral) ``context_length``, ``context_window`` or
  ``max_context_length``; llama.cpp's ``GET /props`` has ``default_generation_settings.n_ctx``;
  Ollama's ``GET /api/ps`` lists each loaded model's ``context_length``, ``POST /api/show`` its
  ``num_ctx`` parameter;
- the 400 that refuses a prompt too long for it: llama.cpp's ``exceed_context_size_error`` with
  ``n_ctx`` and ``n_prompt_tokens``, OpenAI's and vLLM's "maximum context length is N tokens",
  Anthropic's "prompt is too long: N tokens > M maximum", LM Studio's "loaded with context
  length of only N tokens".

The readers here parse those answers; the provider asks (:meth:`HttpProvider.learn_context_window`)
and turns a refusal into :class:`~cairn.llm.errors.ContextOverflowError`.
"""

from __future__ import annotations

import re
from collections.abc import Awaitable, Callable, Mapping
from typing import Any
from urllib.parse import urlsplit

from cairn.values import Value

__all__ = [
    "OLLAMA_PORT",
    "Overflow",
    "api_root",
    "context_overflow",
    "looks_local",
    "probe_context_window",
    "window_from_model_list",
    "window_from_ollama_ps",
    "window_from_ollama_show",
    "window_from_props",
]

OLLAMA_PORT = 11434  # Ollama's default port: its native API is worth asking there
# Keys of a model-list entry that hold its context window (vLLM first: the served window).
_ENTRY_KEYS = ("max_model_len", "loaded_context_length", "context_length", "context_window",
               "max_context_length")  # fmt: skip
_NUM_CTX = r"^\s*num_ctx\s+(\d+)\s*$"  # a line of Ollama's parameters (re.MULTILINE)

# A refusal's words, with the window and the prompt's size where it names them (case aside).
# Kept as text: ``re`` compiles and caches each on the first refusal, not at every start-up.
_WINDOW_PATTERNS = (
    # OpenAI, DeepSeek, vLLM: "This model's maximum context length is 4096 tokens."
    r"maximum context length is (\d+) tokens",
    # LM Studio: "the model is loaded with context length of only 4096 tokens"
    r"context length of only (\d+) tokens",
    # llama.cpp's message: "exceeds the available context size (4096 tokens)"
    r"available context size \((\d+) tokens\)",
    # Anthropic: "prompt is too long: 210000 tokens > 200000 maximum"
    r"tokens > (\d+) maximum",
)
_PROMPT_PATTERNS = (
    r"your messages resulted in (\d+) tokens",  # OpenAI
    r"\((\d+) in the messages",  # vLLM before 0.6, DeepSeek
    r"your request has (\d+) input tokens",  # vLLM
    r"request \((\d+) tokens\) exceeds",  # llama.cpp
    r"prompt is too long: (\d+) tokens",  # Anthropic
    r"keep the first (\d+) tokens",  # LM Studio
)
# Words of a refusal that is about the prompt's size even when it names no number.
_OVERFLOW_WORDS = (
    "context_length_exceeded", "exceed_context_size", "exceeds the available context size",
    "context length exceeded", "prompt is too long", "maximum context length",
    "context window", "greater than the context length", "input is too long",
    "context length of only",
)  # fmt: skip


class Overflow(Value):
    """A refusal of a prompt too long for the window; each number when the server named it."""

    window: int | None = None
    prompt_tokens: int | None = None


def _count(value: Any) -> int | None:
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return int(value) if 0 < value < 2**40 else None


def _first_number(patterns: tuple[str, ...], text: str) -> int | None:
    for pattern in patterns:
        match = re.search(pattern, text, re.IGNORECASE)
        if match:
            return int(match.group(1))
    return None


def context_overflow(status: int, data: Any, message: str) -> Overflow | None:
    """The overflow a failed response (``data``: its parsed JSON body) reports, or ``None``.

    A refusal whose numbers show the prompt fits (vLLM's "your request has 2104 input tokens"
    with a 4096 window) is about the output bound, not the prompt (see
    :func:`cairn.llm.limits.smaller_output_limit`), and is not an overflow.
    """
    if status not in (400, 413):
        return None
    error = data.get("error") if isinstance(data, Mapping) else None
    error = error if isinstance(error, Mapping) else {}
    if error.get("type") == "exceed_context_size_error":  # llama.cpp's own fields
        return Overflow(_count(error.get("n_ctx")), _count(error.get("n_prompt_tokens")))
    words = f"{message} {error.get('code', '')} {error.get('type', '')}".lower()
    if not any(word in words for word in _OVERFLOW_WORDS):
        return None
    window = _first_number(_WINDOW_PATTERNS, message)
    prompt = _first_number(_PROMPT_PATTERNS, message)
    if window is not None and prompt is not None and prompt < window:
        return None  # the prompt fits: it is the output bound that does not
    return Overflow(window, prompt)


def api_root(base_url: str) -> str:
    """The server's root: ``http://host:8080/v1`` → ``http://host:8080`` (where llama.cpp
    serves ``/props`` and Ollama its native API)."""
    return base_url.rstrip("/").removesuffix("/v1")


def looks_local(base_url: str) -> bool:
    """A server on this machine or a private network, or on Ollama's port: worth asking its
    native routes (a hosted API would answer them 404)."""
    parts = urlsplit(base_url)
    host = (parts.hostname or "").lower()
    if parts.port == OLLAMA_PORT or host in ("localhost", "::1") or host.endswith(".local"):
        return True
    if host.startswith(("127.", "10.", "192.168.")):
        return True
    if host.startswith("172."):
        second = host.split(".")[1] if host.count(".") == 3 else ""
        return second.isdigit() and 16 <= int(second) <= 31
    return False


def window_from_model_list(data: Any, model: str) -> tuple[int | None, str]:
    """The window a ``GET /models`` answer gives ``model`` (its entry, or the only one), and
    who serves it (the entry's ``owned_by``: ``llamacpp`` for llama.cpp)."""
    entries = data.get("data") if isinstance(data, Mapping) else None
    if not isinstance(entries, list):
        return None, ""
    dicts = [e for e in entries if isinstance(e, Mapping)]
    mine = [e for e in dicts if e.get("id") == model] or (dicts if len(dicts) == 1 else [])
    if not mine:
        return None, ""
    entry = mine[0]
    owner = entry.get("owned_by")
    owner = owner if isinstance(owner, str) else ""
    for key in _ENTRY_KEYS:
        window = _count(entry.get(key))
        if window is not None:
            return window, owner
    top = entry.get("top_provider")  # OpenRouter: the provider actually serving it
    if isinstance(top, Mapping) and _count(top.get("context_length")) is not None:
        return _count(top.get("context_length")), owner
    return None, owner


def window_from_props(data: Any) -> int | None:
    """llama.cpp's ``GET /props``: the window of each slot."""
    if not isinstance(data, Mapping):
        return None
    settings = data.get("default_generation_settings")
    if isinstance(settings, Mapping) and _count(settings.get("n_ctx")) is not None:
        return _count(settings.get("n_ctx"))
    return _count(data.get("n_ctx"))


def window_from_ollama_ps(data: Any, model: str) -> int | None:
    """Ollama's ``GET /api/ps``: the window a loaded model runs with."""
    models = data.get("models") if isinstance(data, Mapping) else None
    if not isinstance(models, list):
        return None
    for entry in models:
        if isinstance(entry, Mapping) and model in (entry.get("name"), entry.get("model")):
            return _count(entry.get("context_length"))
    return None


def window_from_ollama_show(data: Any) -> int | None:
    """Ollama's ``POST /api/show``: the model's ``num_ctx`` parameter, when it sets one."""
    parameters = data.get("parameters") if isinstance(data, Mapping) else None
    if not isinstance(parameters, str):
        return None
    match = re.search(_NUM_CTX, parameters, re.MULTILINE)
    return int(match.group(1)) if match else None


# (method, URL, JSON body or None) → (status, parsed JSON or None); never raises
Fetch = Callable[[str, str, Any], Awaitable[tuple[int, Any]]]


async def probe_context_window(
    fetch: Fetch, base_url: str, model: str, *, models_url: str | None = None
) -> int | None:
    """Ask the server for ``model``'s window: its model list (at ``models_url``, default
    ``<base_url>/models``), then (llama.cpp, or a server on this machine or network)
    ``/props``, then Ollama's ``/api/ps`` and ``/api/show``."""
    listing = models_url or base_url.rstrip("/") + "/models"
    status, listed = await fetch("GET", listing, None)
    window, owner = window_from_model_list(listed, model) if status == 200 else (None, "")
    if window is not None:
        return window
    root = api_root(base_url)
    if owner == "llamacpp" or looks_local(base_url):
        status, props = await fetch("GET", root + "/props", None)
        window = window_from_props(props) if status == 200 else None
        if window is not None:
            return window
    if owner in ("library", "ollama") or looks_local(base_url):
        status, running = await fetch("GET", root + "/api/ps", None)
        window = window_from_ollama_ps(running, model) if status == 200 else None
        if window is not None:
            return window
        status, shown = await fetch("POST", root + "/api/show", {"model": model})
        return window_from_ollama_show(shown) if status == 200 else None
    return None
