"""Structured output: asking any endpoint for one JSON object of a given shape.

Side queries that need JSON (Recall's selector, Forget's selector) must work on endpoints that
honour ``response_format``, on those that refuse it and on those that ignore it. Four ways to
ask, tried in this order by ``auto``:

- ``json_schema``: ``response_format: {"type": "json_schema"}`` carrying the schema, which
  llama.cpp, vLLM, Ollama, LM Studio and OpenAI hold the answer to, plus the schema in the prompt;
- ``json_object``: ``response_format: {"type": "json_object"}`` plus the schema in the prompt
  (valid JSON, of any shape: llama.cpp honours it with objects the schema does not describe);
- ``tool``: one offered tool, ``respond_in_schema``, whose parameters are the schema, forced
  with ``tool_choice`` (how the reference system asks);
- ``prompt``: only the schema in the prompt.

When an endpoint answers 400 naming the feature a way relies on, the request is retried once the
next way (an endpoint refusing ``response_format`` altogether, not one type of it, skips
``json_object`` too), and the endpoint (base URL and model) is remembered for the rest of the
process, so later requests go straight to the way that works. Whatever was asked, the answer is
accepted as JSON text, as a fenced block, or as a ``respond_in_schema`` call.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from cairn.llm.errors import ProviderError
from cairn.llm.types import ToolDeclaration

__all__ = [
    "ENDPOINTS",
    "RESPOND_TOOL",
    "SCHEMA_NAME",
    "STRATEGIES",
    "EndpointMemory",
    "Strategy",
    "downgrade",
    "instruction",
    "respond_tool",
    "response_format",
]

Strategy: TypeAlias = Literal["json_schema", "json_object", "tool", "prompt"]
# the setting's values
STRATEGIES: tuple[str, ...] = ("auto", "json_schema", "json_object", "tool", "prompt")
RESPOND_TOOL = "respond_in_schema"
SCHEMA_NAME = "response"  # json_schema.name: OpenAI requires one (letters, digits, _ and -)
_RESPOND_DESCRIPTION = "Provide the response in provided schema."
# Words in a 400's message that show which request field the endpoint refused.
_REFUSAL_WORDS: dict[Strategy, tuple[str, ...]] = {
    "json_schema": ("response_format", "response format", "json_schema", "json schema"),
    "json_object": ("response_format", "response format", "json_object", "json mode"),
    "tool": ("tool_choice", "tool choice", "tools", "function"),
}
_NEXT: dict[Strategy, Strategy] = {
    "json_schema": "json_object",
    "json_object": "tool",
    "tool": "prompt",
}
# Words of a 400 refusing one type of response_format (json_object may still be taken), not
# the field as a whole.
_TYPE_WORDS = ("json_schema", "json schema", "type")


def instruction(schema: Mapping[str, Any], strategy: Strategy) -> str:
    """What the system prompt adds so the model answers in ``schema``."""
    shape = json.dumps(dict(schema))
    if strategy == "tool":
        return (
            f"Answer by calling the {RESPOND_TOOL} tool exactly once; its arguments are your "
            f"answer, one JSON object matching this JSON schema:\n{shape}"
        )
    return (
        f"Respond with one JSON object and nothing else. It must match this JSON schema:\n{shape}"
    )


def respond_tool(schema: Mapping[str, Any]) -> ToolDeclaration:
    return ToolDeclaration(RESPOND_TOOL, _RESPOND_DESCRIPTION, dict(schema))


def downgrade(strategy: Strategy, error: ProviderError) -> Strategy | None:
    """The next way to ask when ``error`` shows the endpoint refused ``strategy``'s feature."""
    if error.status != 400 or strategy not in _NEXT:
        return None
    message = str(error).lower()
    if not any(word in message for word in _REFUSAL_WORDS[strategy]):
        return None
    if strategy == "json_schema" and not any(word in message for word in _TYPE_WORDS):
        return "tool"  # response_format itself is refused: json_object would be too
    return _NEXT[strategy]


def response_format(schema: Mapping[str, Any], strategy: Strategy) -> dict[str, Any] | None:
    """The ``response_format`` of an OpenAI-wire request asking by ``strategy`` (or none)."""
    if strategy == "json_schema":
        return {"type": "json_schema", "json_schema": {"name": SCHEMA_NAME, "schema": dict(schema)}}
    if strategy == "json_object":
        return {"type": "json_object"}
    return None


class EndpointMemory:
    """The way that works, per endpoint and model, learned from refusals (thread-safe)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Strategy] = {}
        self._lock = threading.Lock()

    def strategy(self, setting: str, endpoint: str, model: str) -> Strategy:
        """The way to ask: the setting's, or for ``auto`` the best one not yet refused."""
        if setting in ("json_schema", "json_object", "tool", "prompt"):
            return setting  # type: ignore[return-value]
        with self._lock:
            return self._known.get((endpoint, model), "json_schema")

    def refused(self, endpoint: str, model: str, next_strategy: Strategy) -> None:
        with self._lock:
            self._known[(endpoint, model)] = next_strategy

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


# One per process: every provider for the same endpoint learns from the others' refusals.
ENDPOINTS = EndpointMemory()
