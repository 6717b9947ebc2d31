"""Structured output: asking any endpoint for one JSON object of a given shape.

Side queries that need JSON (Recall's selector, Forget's selector) must work on endpoints that
honour ``response_format``, on those that refuse it and on those that ignore it. Three ways to
ask, tried in this order by ``auto``:

- ``json_object``: ``response_format: {"type": "json_object"}`` plus the schema in the prompt;
- ``tool``: one offered tool, ``respond_in_schema``, whose parameters are the schema, forced
  with ``tool_choice`` (how the reference system asks);
- ``prompt``: only the schema in the prompt.

When an endpoint answers 400 naming the feature a way relies on, the request is retried once the
next way, and the endpoint (base URL and model) is remembered for the rest of the process, so
later requests go straight to the way that works. Whatever was asked, the answer is accepted as
JSON text, as a fenced block, or as a ``respond_in_schema`` call.
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
    "STRATEGIES",
    "EndpointMemory",
    "Strategy",
    "downgrade",
    "instruction",
    "respond_tool",
]

Strategy: TypeAlias = Literal["json_object", "tool", "prompt"]
STRATEGIES: tuple[str, ...] = ("auto", "json_object", "tool", "prompt")  # the setting's values
RESPOND_TOOL = "respond_in_schema"
_RESPOND_DESCRIPTION = "Provide the response in provided schema."
# Words in a 400's message that show which request field the endpoint refused.
_REFUSAL_WORDS: dict[Strategy, tuple[str, ...]] = {
    "json_object": ("response_format", "response format", "json_object", "json mode"),
    "tool": ("tool_choice", "tool choice", "tools", "function"),
}
_NEXT: dict[Strategy, Strategy] = {"json_object": "tool", "tool": "prompt"}


def instruction(schema: Mapping[str, Any], strategy: Strategy) -> str:
    """What the system prompt adds so the model answers in ``schema``."""
    shape = json.dumps(dict(schema))
    if strategy == "tool":
        return (
            f"Answer by calling the {RESPOND_TOOL} tool exactly once; its arguments are your "
            f"answer, one JSON object matching this JSON schema:\n{shape}"
        )
    return (
        "Respond with one JSON object and nothing else. "
        f"It must match this JSON schema:\n{shape}"
    )


def respond_tool(schema: Mapping[str, Any]) -> ToolDeclaration:
    return ToolDeclaration(RESPOND_TOOL, _RESPOND_DESCRIPTION, dict(schema))


def downgrade(strategy: Strategy, error: ProviderError) -> Strategy | None:
    """The next way to ask when ``error`` shows the endpoint refused ``strategy``'s feature."""
    if error.status != 400 or strategy not in _NEXT:
        return None
    message = str(error).lower()
    if any(word in message for word in _REFUSAL_WORDS[strategy]):
        return _NEXT[strategy]
    return None


class EndpointMemory:
    """The way that works, per endpoint and model, learned from refusals (thread-safe)."""

    def __init__(self) -> None:
        self._known: dict[tuple[str, str], Strategy] = {}
        self._lock = threading.Lock()

    def strategy(self, setting: str, endpoint: str, model: str) -> Strategy:
        """The way to ask: the setting's, or for ``auto`` the best one not yet refused."""
        if setting in ("json_object", "tool", "prompt"):
            return setting  # type: ignore[return-value]
        with self._lock:
            return self._known.get((endpoint, model), "json_object")

    def refused(self, endpoint: str, model: str, next_strategy: Strategy) -> None:
        with self._lock:
            self._known[(endpoint, model)] = next_strategy

    def clear(self) -> None:
        with self._lock:
            self._known.clear()


# One per process: every provider for the same endpoint learns from the others' refusals.
ENDPOINTS = EndpointMemory()
