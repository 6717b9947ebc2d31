"""Reading an OpenAI chat-completions answer: streamed chunks or one JSON body, as stream events.

:class:`ChunkParser` is fed the ``data:`` payloads of a stream (or a whole ``chat.completion``
body) and turns them into :mod:`cairn.llm.types` events: text and reasoning as they arrive, tool
calls assembled by index from their fragments and emitted once the stream has finished, then
:class:`Finished` with the usage. The real provider and the scripted in-process provider both
parse through it, so they cannot drift apart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.content import FunctionCall
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.types import (
    INVALID_ARGUMENTS_KEY,
    Finished,
    StreamEvent,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
)

__all__ = [
    "DONE",
    "FINISH_REASONS",
    "MAX_INVALID_ARGUMENTS_CHARS",
    "ChunkParser",
    "parse_arguments",
    "parse_completion",
    "parse_usage",
]

DONE = "[DONE]"  # the payload that ends a chat-completions stream
MAX_INVALID_ARGUMENTS_CHARS = 2000  # how much of unparseable tool arguments the marker keeps
# The wire's finish reasons as cairn's: stop, tool_calls, length, filter.
FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "filter",
}


@dataclass
class _ToolCallBuffer:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkParser:
    """The state of one answer being read; feed it payloads, then call :meth:`finish`."""

    def __init__(self) -> None:
        self.calls: dict[int, _ToolCallBuffer] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.saw_output = False
        self.done = False  # the ``[DONE]`` payload arrived

    def feed_payload(self, data: str) -> list[StreamEvent]:
        """One SSE ``data:`` payload: a JSON chunk, an error object, or ``[DONE]``."""
        if data == DONE:
            self.done = True
            return []
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise InvalidStreamError(
                f"invalid JSON in stream: {data[:80]}", kind="dropped"
            ) from exc
        if not isinstance(chunk, dict):
            return []
        if "error" in chunk and not chunk.get("choices"):
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            raise ProviderError(f"stream error: {message}", retryable=True)
        return self.feed_chunk(chunk)

    def feed_chunk(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """One parsed chunk (or a whole non-streaming completion)."""
        events: list[StreamEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.usage = parse_usage(usage)
        choices = chunk.get("choices") or []
        if not isinstance(choices, list):
            return events
        for choice in choices[:1]:
            if not isinstance(choice, Mapping):
                continue
            delta = choice.get("delta") or choice.get("message") or {}
            reasoning = delta.get("reasoning_content") or delta.get("reasoning")
            if isinstance(reasoning, str) and reasoning:
                self.saw_output = True
                events.append(ThoughtDelta(reasoning))
            text = delta.get("content")
            if isinstance(text, str) and text:
                self.saw_output = True
                events.append(TextDelta(text))
            for raw_call in delta.get("tool_calls") or []:
                self._feed_call(raw_call)
            reason = choice.get("finish_reason")
            if isinstance(reason, str) and reason:
                self.finish_reason = FINISH_REASONS.get(reason, reason)
        return events

    def _feed_call(self, raw: Any) -> None:
        if not isinstance(raw, Mapping):
            return
        index = raw.get("index")
        if not isinstance(index, int):
            index = len(self.calls)
        buffer = self.calls.setdefault(index, _ToolCallBuffer())
        if raw.get("id"):
            buffer.id = str(raw["id"])
        function = raw.get("function") or {}
        if function.get("name"):
            buffer.name = str(function["name"])
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            buffer.arguments.append(arguments)
        elif isinstance(arguments, Mapping):
            buffer.arguments.append(json.dumps(arguments))

    def finish(self) -> list[StreamEvent]:
        """The tool calls and :class:`Finished`; raises when the answer is incomplete or empty."""
        if self.finish_reason is None:
            raise InvalidStreamError(
                "the stream ended without a finish reason", kind="no_finish_reason"
            )
        events: list[StreamEvent] = []
        for index in sorted(self.calls):
            buffer = self.calls[index]
            if not buffer.name:
                continue
            call_id = buffer.id or f"call_{int(time.time() * 1000)}_{index}"
            arguments = parse_arguments("".join(buffer.arguments))
            events.append(ToolCallDelta(FunctionCall(call_id, buffer.name, arguments)))
        if not events and not self.saw_output:
            raise InvalidStreamError("the model returned an empty response", kind="no_response")
        events.append(Finished(self.finish_reason, self.usage))
        return events


def parse_completion(raw: bytes) -> list[StreamEvent]:
    """The events of a non-streaming ``chat.completion`` body."""
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidStreamError(
            "the response is neither SSE nor JSON", kind="no_response"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidStreamError("the response is not a JSON object", kind="no_response")
    parser = ChunkParser()
    events = parser.feed_chunk(data)
    return events + parser.finish()


def parse_arguments(raw: str) -> dict[str, Any]:
    """Tool-call arguments as an object; anything else becomes the invalid-arguments marker."""
    raw = raw.strip()
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    # The scheduler answers this call with an error the model can correct.
    return {INVALID_ARGUMENTS_KEY: raw[:MAX_INVALID_ARGUMENTS_CHARS]}


def parse_usage(raw: Mapping[str, Any]) -> Usage:
    """OpenAI usage counts (``prompt_tokens``, ``prompt_tokens_details.cached_tokens``...)."""

    def number(value: Any) -> int:
        return int(value) if isinstance(value, int | float) else 0

    prompt = number(raw.get("prompt_tokens"))
    completion = number(raw.get("completion_tokens"))
    total = number(raw.get("total_tokens")) or prompt + completion
    details = raw.get("prompt_tokens_details") or {}
    cached = number(details.get("cached_tokens") if isinstance(details, Mapping) else 0)
    cached = cached or number(raw.get("cached_tokens"))
    out_details = raw.get("completion_tokens_details") or {}
    reasoning = number(
        out_details.get("reasoning_tokens") if isinstance(out_details, Mapping) else 0
    )
    return Usage(prompt, completion, total, cached, reasoning)
