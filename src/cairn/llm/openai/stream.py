"""Reading an OpenAI chat-completions answer: streamed chunks or one JSON body, as stream events.

:class:`ChunkParser` is fed the ``data:`` payloads of a stream (or a whole ``chat.completion``
body) and turns them into :mod:`cairn.llm.types` events: text and reasoning as they arrive (a
leading inline ``<think>`` block as reasoning), tool calls assembled by index from their
fragments and emitted once the stream has finished, then :class:`Finished` with the usage.
The real provider and the scripted in-process provider both parse through it, so they cannot
drift apart.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping, Sequence
from dataclasses import field
from typing import Any

from cairn.content import FunctionCall
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.shapes import (
    load_json_object,
    malformed,
    optional,
    text_field,
    token_count,
)
from cairn.llm.think import InlineThinkSplitter
from cairn.llm.types import (
    INVALID_ARGUMENTS_KEY,
    Finished,
    StreamEvent,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
)
from cairn.values import Value

__all__ = [
    "DONE",
    "FINISH_REASONS",
    "MAX_INVALID_ARGUMENTS_CHARS",
    "ChunkParser",
    "answer_end",
    "parse_arguments",
    "parse_completion",
    "parse_usage",
]

DONE = "[DONE]"  # the payload that ends a chat-completions stream
MAX_INVALID_ARGUMENTS_CHARS = 2000  # how much of unparseable tool arguments the marker keeps
# The wire's finish reasons as cairn's: stop, tool_calls, length, filter (another is kept as it
# is, and the turn reports it). Some servers spell a normal end eos, end_turn or stop_sequence.
FINISH_REASONS = {
    "stop": "stop",
    "eos": "stop",
    "end_turn": "stop",
    "stop_sequence": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "filter",
}


class _ToolCallBuffer(Value, frozen=False):
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class ChunkParser:
    """The state of one answer being read; feed it payloads, then call :meth:`finish`.

    Every field is checked for its type as it is read: a chunk of the wrong shape raises
    :class:`InvalidStreamError` (kind ``malformed``) naming the field, never a ``TypeError``.
    """

    def __init__(self) -> None:
        self.calls: dict[int, _ToolCallBuffer] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.saw_output = False
        self.done = False  # the ``[DONE]`` payload arrived
        self._think = InlineThinkSplitter()

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """One server-sent event (chat completions name none: ``event`` is ignored)."""
        return self.feed_payload(data)

    def feed_payload(self, data: str) -> list[StreamEvent]:
        """One SSE ``data:`` payload: a JSON chunk, an error object, or ``[DONE]``."""
        if data == DONE:
            self.done = True
            return []
        chunk = load_json_object(data)
        if "error" in chunk and not chunk.get("choices"):
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else err
            raise ProviderError(f"stream error: {str(message)[:500]}", retryable=True)
        return self.feed_chunk(chunk)

    def feed_chunk(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        """One parsed chunk (or a whole non-streaming completion)."""
        events: list[StreamEvent] = []
        usage = optional(chunk, "usage", Mapping, "usage")
        if usage is not None:
            self.usage = parse_usage(usage)
        choices = optional(chunk, "choices", list, "choices") or []
        for i, choice in enumerate(choices[:1]):
            where = f"choices[{i}]"
            if not isinstance(choice, Mapping):
                raise malformed(where, choice, "an object")
            delta = optional(choice, "delta", Mapping, f"{where}.delta")
            if delta is None:
                delta = optional(choice, "message", Mapping, f"{where}.message") or {}
            events.extend(self._feed_delta(delta, where))
            reason = optional(choice, "finish_reason", str, f"{where}.finish_reason")
            if reason:
                self.finish_reason = FINISH_REASONS.get(reason, reason)
        return events

    def _feed_delta(self, delta: Mapping[str, Any], where: str) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        for key in ("reasoning_content", "reasoning"):
            reasoning = text_field(delta, key, f"{where}.{key}")
            if reasoning:
                self.saw_output = True
                events.append(ThoughtDelta(reasoning))
                break
        text = text_field(delta, "content", f"{where}.content")
        if text:
            self.saw_output = True
            events.extend(self._think.feed(text))
        calls = optional(delta, "tool_calls", list, f"{where}.tool_calls") or []
        for n, raw_call in enumerate(calls):
            self._feed_call(raw_call, f"{where}.tool_calls[{n}]")
        return events

    def _feed_call(self, raw: Any, where: str) -> None:
        if not isinstance(raw, Mapping):
            raise malformed(where, raw, "an object")
        index = raw.get("index")
        if index is None:
            index = len(self.calls)
        elif not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise malformed(f"{where}.index", index, "a non-negative integer")
        buffer = self.calls.setdefault(index, _ToolCallBuffer())
        call_id = optional(raw, "id", str, f"{where}.id")
        if call_id:
            buffer.id = call_id
        function = optional(raw, "function", Mapping, f"{where}.function") or {}
        name = optional(function, "name", str, f"{where}.function.name")
        if name:
            buffer.name = name
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            buffer.arguments.append(arguments)
        elif isinstance(arguments, Mapping):
            buffer.arguments.append(json.dumps(arguments))
        elif arguments is not None:
            raise malformed(f"{where}.function.arguments", arguments, "a string")

    def finish(self) -> list[StreamEvent]:
        """The tool calls and :class:`Finished`; raises when the answer is incomplete or empty."""
        if self.finish_reason is None:
            raise InvalidStreamError(
                "the stream ended without a finish reason", kind="no_finish_reason"
            )
        calls = [(i, c.id, c.name, c.arguments) for i, c in sorted(self.calls.items())]
        events = answer_end(self._think, calls, "call", saw_output=self.saw_output)
        return [*events, Finished(self.finish_reason, self.usage)]


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


def answer_end(
    think: InlineThinkSplitter,
    calls: Sequence[tuple[int, str, str, Sequence[str]]],
    id_prefix: str,
    *,
    saw_output: bool,
) -> list[StreamEvent]:
    """What ends an answer on either wire, before its :class:`Finished`: the text ``think`` held
    back, then each tool call ``(index, id, name, argument fragments)`` that has a name (one
    without an id gets ``<id_prefix>_<ms>_<index>``). Raises when the answer said nothing."""
    events: list[StreamEvent] = [*think.flush()]
    for index, call_id, name, arguments in calls:
        if name:
            call_id = call_id or f"{id_prefix}_{int(time.time() * 1000)}_{index}"
            call = FunctionCall(call_id, name, parse_arguments("".join(arguments)))
            events.append(ToolCallDelta(call))
    if not events and not saw_output:
        raise InvalidStreamError("the model returned an empty response", kind="no_response")
    return events


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
    prompt = token_count(raw, "prompt_tokens", "usage")
    completion = token_count(raw, "completion_tokens", "usage")
    total = token_count(raw, "total_tokens", "usage") or prompt + completion
    details = optional(raw, "prompt_tokens_details", Mapping, "usage.prompt_tokens_details")
    cached = token_count(details, "cached_tokens", "usage.prompt_tokens_details") if details else 0
    cached = cached or token_count(raw, "cached_tokens", "usage")
    where = "usage.completion_tokens_details"
    out = optional(raw, "completion_tokens_details", Mapping, where)
    reasoning = token_count(out, "reasoning_tokens", where) if out else 0
    return Usage(prompt, completion, total, cached, reasoning)
