"""Reading an Anthropic Messages answer: the event stream (or one message body) as stream events.

Text and thinking stream as they arrive; a thinking block ends with a :class:`ThoughtDelta`
carrying its signature (the API wants it back with the conversation), a redacted block is one
such delta. Tool calls are assembled from their ``input_json_delta`` fragments and emitted once
the stream has finished, then :class:`Finished` with the usage: the prompt tokens counted as
OpenAI counts them (read from the cache, written to it and neither, together), so every front
end shows one figure.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.openai.stream import answer_end
from cairn.llm.shapes import load_json_object, malformed, optional, token_count
from cairn.llm.think import InlineThinkSplitter
from cairn.llm.types import (
    Finished,
    StreamEvent,
    ThoughtDelta,
    Usage,
)

__all__ = ["STOP_REASONS", "EventParser", "parse_message"]

# The API's stop reasons as cairn's finish reasons.
STOP_REASONS = {
    "end_turn": "stop",
    "stop_sequence": "stop",
    "pause_turn": "stop",
    "tool_use": "tool_calls",
    "max_tokens": "length",
    "model_context_window_exceeded": "length",
    "refusal": "filter",
}
# Error types in the stream worth another attempt (the rest fail the same way again).
_RETRYABLE_ERRORS = {"overloaded_error", "api_error", "rate_limit_error", "timeout_error"}


@dataclass
class _Block:
    kind: str
    call_id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)
    signature: str = ""


class EventParser:
    """The state of one answer being read; feed it events, then call :meth:`finish`."""

    def __init__(self) -> None:
        self.done = False  # message_stop arrived
        self._blocks: dict[int, _Block] = {}
        self._calls: list[_Block] = []
        self._stop: str | None = None
        self._input = 0  # prompt tokens not read from the cache nor written to it
        self._cache_read = 0
        self._cache_write = 0
        self._output = 0
        self._saw_output = False
        self._think = InlineThinkSplitter()

    def feed(self, event: str, data: str) -> list[StreamEvent]:
        """One server-sent event; its ``type`` field decides, the SSE event name may be empty."""
        payload = load_json_object(data)
        kind = payload.get("type", event)
        if kind == "error":
            raise _stream_error(payload)
        if kind == "message_start":
            message = optional(payload, "message", Mapping, "message")
            if message is not None:
                self._read_usage(optional(message, "usage", Mapping, "message.usage"))
            return []
        if kind == "content_block_start":
            return self._start(payload)
        if kind == "content_block_delta":
            return self._delta(payload)
        if kind == "content_block_stop":
            return self._stop_block(payload)
        if kind == "message_delta":
            delta = optional(payload, "delta", Mapping, "delta") or {}
            reason = optional(delta, "stop_reason", str, "delta.stop_reason")
            if reason:
                self._stop = reason
            self._read_usage(optional(payload, "usage", Mapping, "usage"))
            return []
        if kind == "message_stop":
            self.done = True
        return []  # ping, and event types added later

    def _start(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        index = _index(payload)
        block = optional(payload, "content_block", Mapping, "content_block") or {}
        kind = optional(block, "type", str, "content_block.type") or ""
        state = _Block(kind)
        self._blocks[index] = state
        if kind == "tool_use":
            state.call_id = optional(block, "id", str, "content_block.id") or ""
            state.name = optional(block, "name", str, "content_block.name") or ""
            initial = block.get("input")
            if isinstance(initial, Mapping) and initial:
                state.arguments.append(json.dumps(initial))
            return []
        if kind == "redacted_thinking":
            data = optional(block, "data", str, "content_block.data") or ""
            self._saw_output = True
            return [ThoughtDelta("", signature=data, redacted=True)]
        if kind == "text":
            return self._text(optional(block, "text", str, "content_block.text") or "")
        if kind == "thinking":
            return self._thought(optional(block, "thinking", str, "content_block.thinking") or "")
        return []

    def _delta(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        index = _index(payload)
        delta = optional(payload, "delta", Mapping, "delta") or {}
        kind = optional(delta, "type", str, "delta.type")
        state = self._blocks.setdefault(index, _Block(""))
        if kind == "text_delta":
            return self._text(optional(delta, "text", str, "delta.text") or "")
        if kind == "thinking_delta":
            return self._thought(optional(delta, "thinking", str, "delta.thinking") or "")
        if kind == "signature_delta":
            state.signature += optional(delta, "signature", str, "delta.signature") or ""
        elif kind == "input_json_delta":
            state.arguments.append(optional(delta, "partial_json", str, "delta.partial_json") or "")
        return []

    def _stop_block(self, payload: Mapping[str, Any]) -> list[StreamEvent]:
        state = self._blocks.pop(_index(payload), None)
        if state is None:
            return []
        if state.kind == "tool_use":
            self._calls.append(state)
        elif state.kind == "thinking" and state.signature:
            return [ThoughtDelta("", signature=state.signature)]
        return []

    def _text(self, text: str) -> list[StreamEvent]:
        if not text:
            return []
        self._saw_output = True
        return list(self._think.feed(text))

    def _thought(self, text: str) -> list[StreamEvent]:
        if not text:
            return []
        self._saw_output = True
        return [ThoughtDelta(text)]

    def _read_usage(self, usage: Mapping[str, Any] | None) -> None:
        """Counts arrive in message_start and (cumulative) in message_delta; later ones win."""
        if usage is None:
            return
        self._input = token_count(usage, "input_tokens", "usage") or self._input
        self._cache_read = (
            token_count(usage, "cache_read_input_tokens", "usage") or self._cache_read
        )
        write = token_count(usage, "cache_creation_input_tokens", "usage")
        self._cache_write = write or self._cache_write
        self._output = token_count(usage, "output_tokens", "usage") or self._output

    def finish(self) -> list[StreamEvent]:
        """The tool calls and :class:`Finished`; raises when the answer is incomplete or empty."""
        if self._stop is None:
            raise InvalidStreamError(
                "the stream ended without a stop reason", kind="no_finish_reason"
            )
        calls = [(n, c.call_id, c.name, c.arguments) for n, c in enumerate(self._calls)]
        events = answer_end(self._think, calls, "toolu", saw_output=self._saw_output)
        return [*events, Finished(STOP_REASONS.get(self._stop, self._stop), self.usage)]

    @property
    def usage(self) -> Usage:
        prompt = self._input + self._cache_read + self._cache_write
        return Usage(
            input_tokens=prompt,
            output_tokens=self._output,
            total_tokens=prompt + self._output,
            cached_tokens=self._cache_read,
            cache_write_tokens=self._cache_write,
        )


def parse_message(raw: bytes) -> list[StreamEvent]:
    """The events of a non-streamed ``message`` body."""
    try:
        message = load_json_object(raw.decode("utf-8", "replace"))
    except InvalidStreamError as exc:
        raise InvalidStreamError(
            f"the response is neither an event stream nor a message: {exc}", kind="no_response"
        ) from exc
    if message.get("type") == "error":
        raise _stream_error(message)
    parser = EventParser()
    parser._read_usage(optional(message, "usage", Mapping, "usage"))
    events: list[StreamEvent] = []
    content = optional(message, "content", list, "content") or []
    for index, block in enumerate(content):
        if not isinstance(block, Mapping):
            raise malformed(f"content[{index}]", block, "an object")
        events.extend(parser._start({"index": index, "content_block": block}))
        if block.get("type") == "thinking":
            signature = optional(block, "signature", str, f"content[{index}].signature") or ""
            parser._blocks[index].signature = signature
        events.extend(parser._stop_block({"index": index}))
    reason = optional(message, "stop_reason", str, "stop_reason")
    if reason:
        parser._stop = reason
    return events + parser.finish()


def _index(payload: Mapping[str, Any]) -> int:
    index = payload.get("index", 0)
    if not isinstance(index, int) or isinstance(index, bool) or index < 0:
        raise malformed("index", index, "a non-negative integer")
    return index


def _stream_error(payload: Mapping[str, Any]) -> ProviderError:
    error = payload.get("error")
    kind = error.get("type") if isinstance(error, Mapping) else None
    message = error.get("message") if isinstance(error, Mapping) else error
    text = f"stream error: {str(message or kind or 'unknown')[:500]}"
    return ProviderError(text, status=529 if kind == "overloaded_error" else None,
                         retryable=kind in _RETRYABLE_ERRORS or kind is None)  # fmt: skip
