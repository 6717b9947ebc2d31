"""Side queries: one-shot model calls that never touch a session's history.

Recall's selector, Extract's helpers, Forget's selector, compression and the session recap all go
through :func:`side_query`. It runs on ``fastModel`` when one is configured, else on the main
model, and sends no tools.
"""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from dataclasses import field
from typing import Any

from cairn.content import Content, FunctionCall
from cairn.llm.errors import ProviderError
from cairn.llm.structured import RESPOND_TOOL
from cairn.llm.types import (
    INVALID_ARGUMENTS_KEY,
    Finished,
    ModelRequest,
    Provider,
    StreamRetry,
    TextDelta,
    ToolCallDelta,
    Usage,
)
from cairn.values import Value

__all__ = ["SideQueryResult", "parse_json_answer", "side_query"]

_FENCE = re.compile(r"```[a-zA-Z]*[ \t]*\n?(.*?)```", re.DOTALL)
MAX_OBJECT_STARTS = 200  # "{" positions tried when looking for an object in free text


class SideQueryResult(Value, frozen=False):
    """``finish_reason`` is why the model stopped (``stop``, ``length``: cut at its output
    bound, ``filter``, ``tool_calls``)."""

    text: str
    model: str
    usage: Usage = field(default_factory=Usage)
    data: Any = None  # the parsed JSON object in JSON mode
    finish_reason: str = "stop"


async def side_query(
    provider: Provider,
    *,
    purpose: str,
    system: str,
    messages: Sequence[Content],
    max_output_tokens: int | None = None,
    max_attempts: int | None = None,
    json_schema: dict[str, Any] | None = None,
    temperature: float | None = None,
    model: str | None = None,
    session_id: str | None = None,
) -> SideQueryResult:
    """Ask the model once, outside the conversation.

    With ``json_schema`` the provider asks for one JSON object of that shape the way its
    endpoint supports (:mod:`cairn.llm.structured`) and the answer is parsed into
    ``result.data`` (JSON text, a fenced block, or a ``respond_in_schema`` call); a reply that is
    not such an object raises :class:`ProviderError` so callers can fall back.
    """
    chosen = model or provider.fast_model or provider.model
    request = ModelRequest(
        model=chosen,
        contents=list(messages),
        system=system,
        purpose=purpose,
        session_id=session_id,
        max_output_tokens=max_output_tokens,
        temperature=temperature,
        response_schema=json_schema,
        allow_thinking=False,
        max_attempts=max_attempts,
    )
    chunks: list[str] = []
    answer: FunctionCall | None = None  # a respond_in_schema call, when asked that way
    usage = Usage()
    reason = "stop"
    async for event in provider.stream(request):
        if isinstance(event, StreamRetry):
            chunks.clear()
            answer = None
        elif isinstance(event, TextDelta):
            chunks.append(event.text)
        elif isinstance(event, ToolCallDelta) and event.call.name == RESPOND_TOOL:
            answer = answer or event.call
        elif isinstance(event, Finished):
            usage, reason = event.usage, event.reason
    text = "".join(chunks).strip()
    result = SideQueryResult(text=text, model=chosen, usage=usage, finish_reason=reason)
    if json_schema is not None:
        result.data = _called_answer(answer) if answer is not None else parse_json_answer(text)
    return result


def _called_answer(call: FunctionCall) -> dict[str, Any]:
    """The arguments of a ``respond_in_schema`` call (unparseable ones read like text)."""
    raw = call.args.get(INVALID_ARGUMENTS_KEY)
    if isinstance(raw, str) and len(call.args) == 1:
        return parse_json_answer(raw)
    return dict(call.args)


def parse_json_answer(text: str) -> dict[str, Any]:
    """The JSON object in a model's answer, tolerating code fences and text around it."""
    for candidate in _fenced_blocks(text):
        value = _loads(candidate)
        if isinstance(value, dict):
            return value
    value = _first_object(text)
    if value is not None:
        return value
    raise ProviderError(f"the model did not answer with a JSON object: {text[:120]!r}")


def _fenced_blocks(text: str) -> list[str]:
    return [text.strip(), *(m.group(1).strip() for m in _FENCE.finditer(text))]


def _loads(text: str) -> Any:
    try:
        return json.loads(text)
    except ValueError:
        return None


def _first_object(text: str) -> dict[str, Any] | None:
    """The first ``{...}`` in ``text`` that parses as a JSON object."""
    decoder = json.JSONDecoder()
    start = text.find("{")
    scanned = 0
    while start != -1 and scanned < MAX_OBJECT_STARTS:
        try:
            value, _ = decoder.raw_decode(text, start)
        except ValueError:
            value = None
        if isinstance(value, dict):
            return value
        start = text.find("{", start + 1)
        scanned += 1
    return None
