"""Headless output formats: ``text`` (streamed), ``json`` (one array), ``stream-json``.

With ``partial_messages`` (``--include-partial-messages``), stream-json also writes each answer
as it streams, as Claude Code does: ``stream_event`` messages carrying the Anthropic stream
events (``message_start``, ``content_block_start``/``_delta``/``_stop`` for thinking, text and
each tool call, ``message_delta`` with the stop reason and usage, ``message_stop``), before the
whole ``assistant`` message.

What a model, a tool or a project file wrote never drives the terminal (#24): in ``text`` mode
the answer on a terminal and every line on stderr show control characters and bidi overrides as
visible escapes (:func:`~cairn.vocabulary.terminal.escape_for_terminal`); the answer piped to a
program is written as the model wrote it. JSON escapes C0 controls itself, and C1 controls,
bidi overrides and the two Unicode line separators are written as ``\\u`` escapes too, so
``json`` and ``stream-json`` are safe on a terminal and decode to the same values.
"""

from __future__ import annotations

import json
import re
import sys
import time
from typing import Any, Literal, TextIO

from cairn.ids import new_uuid, random_hex
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    MemoryChanged,
    MemoryRecalled,
    Notice,
    RecapShown,
    SessionEvent,
    StreamReset,
    SubagentUpdate,
    ToolCallStart,
    ToolCallUpdate,
    TurnResult,
)
from cairn.vocabulary.terminal import BIDI_CONTROLS, escape_for_terminal

__all__ = ["OutputFormat", "OutputWriter", "json_line"]

OutputFormat = Literal["text", "json", "stream-json"]
_TERMINAL = {"completed", "failed", "cancelled"}
# What JSON may carry raw that a terminal acts on or reorders: C1 controls, bidi controls, and
# the line and paragraph separators (JSON escapes C0 controls itself). Compiled by ``re`` on first
# use (the JSON formats), not at every start-up.
_JSON_UNSAFE = f"[\x7f-\x9f\u2028\u2029{''.join(sorted(BIDI_CONTROLS))}]"


def json_line(value: Any) -> str:
    """``value`` as compact-enough JSON with nothing a terminal would act on written raw."""
    text = json.dumps(value, ensure_ascii=False)
    return re.sub(_JSON_UNSAFE, lambda m: f"\\u{ord(m.group()):04x}", text)


def _is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):  # no isatty, or a closed stream
        return False


# A finish reason as Anthropic's stop reason (Claude Code's stream events use them).
_STOP_REASONS = {"length": "max_tokens", "filter": "refusal"}


class _OpenMessage:
    """The answer being streamed as partial messages: its id, the open block and its index."""

    def __init__(self, message_id: str) -> None:
        self.id = message_id
        self.index = 0
        self.block: str | None = None  # "text" | "thinking" while a block is open


class OutputWriter:
    """Turns session events into the chosen output format."""

    def __init__(
        self,
        fmt: OutputFormat,
        *,
        session_id: str,
        stdout: TextIO | None = None,
        stderr: TextIO | None = None,
        partial_messages: bool = False,
    ) -> None:
        self.fmt = fmt
        self.partial = partial_messages and fmt == "stream-json"
        self._open: _OpenMessage | None = None  # the answer streaming now (partial messages)
        self.session_id = session_id
        self.out = stdout or sys.stdout
        self.err = stderr or sys.stderr
        self._escape_out = _is_terminal(self.out)  # a program reading a pipe gets the text
        self.messages: list[dict[str, Any]] = []
        self.denials: list[dict[str, Any]] = []  # Claude Code's permission_denials entries
        self._calls: dict[str, ToolCallStart] = {}
        self._text_written = False
        self._ended_with_newline = True
        self._finished = False  # the result was written
        self._said: set[str] = set()  # warnings and errors already on stderr (text mode)
        self._model = ""  # the session's model, from init

    def init(
        self,
        *,
        cwd: str,
        model: str,
        tools: list[str],
        mode: str,
        version: str,
        commands: list[str],
    ) -> None:
        self._model = model
        self._message(
            {
                "type": "system",
                "subtype": "init",
                "cwd": cwd,
                "model": model,
                "tools": tools,
                "permission_mode": mode,
                "slash_commands": commands,
                "version": version,
            }
        )

    async def __call__(self, event: SessionEvent) -> None:
        if self.partial and isinstance(event, AssistantText | AssistantThought):
            self._partial_delta(event)
        if isinstance(event, SubagentUpdate):
            self._subagent(event)
        elif isinstance(event, AssistantText) and self.fmt == "text":
            self.out.write(self._shown(event.text))
            self.out.flush()
            self._text_written = True
            self._ended_with_newline = event.text.endswith("\n")
        elif isinstance(event, StreamReset):
            self._open = None  # what streamed is discarded; the retry starts a new message
            self._retry(event)
        elif isinstance(event, ToolCallStart):
            self._calls[event.call_id] = event
        elif isinstance(event, Notice):
            if self._finished and event.level != "info":  # after the result: memory not saved
                self.err.write(f"{escape_for_terminal(event.text)}\n")
                self.err.flush()
            elif self.fmt == "text" and event.level != "info":
                self.err.write(f"{escape_for_terminal(event.text)}\n")
                self._said.add(event.text)
            elif self.fmt != "text":
                self._message(
                    {
                        "type": "system",
                        "subtype": "notice",
                        "level": event.level,
                        "source": event.source,
                        "text": event.text,
                    }
                )
        elif isinstance(event, MemoryRecalled | MemoryChanged) and event.memories:
            self._memory(event)
        elif isinstance(event, RecapShown) and self.fmt != "text":
            self._message({"type": "system", "subtype": "recap", "text": event.text})
        elif isinstance(event, AssistantMessage):
            self._assistant(event)
        elif isinstance(event, ToolCallUpdate) and event.status in _TERMINAL:
            self._tool_result(event)

    def _subagent(self, update: SubagentUpdate) -> None:
        """A subagent's tool calls, results and answers, as Claude Code writes them: the same
        messages, with ``parent_tool_use_id`` naming the agent call (text mode: denials)."""
        event, parent = update.event, update.parent_call_id
        if isinstance(event, ToolCallStart):
            self._calls[event.call_id] = event
        elif isinstance(event, ToolCallUpdate) and event.status in _TERMINAL:
            self._tool_result(event, parent=parent)
        elif isinstance(event, AssistantMessage) and self.fmt != "text":
            self._assistant(event, parent=parent)

    def _tool_result(self, event: ToolCallUpdate, *, parent: str | None = None) -> None:
        if event.denied:
            self._denied(event)
        self._message(
            {
                "type": "user",
                "parent_tool_use_id": parent,
                "message": {
                    "role": "user",
                    "content": [
                        {
                            "type": "tool_result",
                            "tool_use_id": event.call_id,
                            "content": event.output or "",
                            "is_error": event.status != "completed",
                        }
                    ],
                },
            }
        )

    def _retry(self, event: StreamReset) -> None:
        if self.fmt == "text":
            self._end_stdout_line()
            self.err.write(f"[{escape_for_terminal(event.describe())}]\n")
            return
        # Claude Code's api_retry message counts retries, where cairn counts attempts.
        self._message(
            {
                "type": "system",
                "subtype": "api_retry",
                "attempt": max(event.attempt - 1, 1),
                "max_retries": max(event.max_attempts - 1, 0),
                "retry_delay_ms": int(event.delay * 1000),
                "error_status": None,
                "error": event.reason,
            }
        )

    def _denied(self, event: ToolCallUpdate) -> None:
        start = self._calls.get(event.call_id)
        name = start.name if start is not None else ""
        self.denials.append(
            {
                "tool_name": name,
                "tool_use_id": event.call_id,
                "tool_input": dict(start.args) if start is not None else {},
            }
        )
        if self.fmt == "text":
            title = (start.title or start.name) if start is not None else event.call_id
            self._end_stdout_line()
            shown = escape_for_terminal(title, keep_newlines=False)
            reason = escape_for_terminal(event.output or "permission denied")
            self.err.write(f"Denied {shown}: {reason}\n")

    def _end_stdout_line(self) -> None:
        """Before a line on stderr: end a streamed line on stdout, so the two don't mix."""
        if self._text_written and not self._ended_with_newline:
            self.out.write("\n")
            self.out.flush()
            self._ended_with_newline = True

    def _memory(self, event: MemoryRecalled | MemoryChanged) -> None:
        """Memory at work: a line on stderr, or a ``system`` message (before the result only:
        an Extract that saves while ``cairn -p`` waits for it is told on stderr)."""
        if self.fmt == "text" or self._finished:
            for line in event.describe().splitlines():
                self.err.write(f"[{escape_for_terminal(line)}]\n")
            self.err.flush()
            return
        body: dict[str, Any] = {"type": "system", "subtype": "memory"}
        if isinstance(event, MemoryRecalled):
            body.update(action="recalled", phase=event.phase)
        else:
            body.update(action="changed", operation=event.operation)
            body.update({key: [r.relative_path for r in getattr(event, key)]
                         for key in ("saved", "updated", "removed")})  # fmt: skip
        body["memories"] = [
            {"name": r.name, "scope": r.scope, "relative_path": r.relative_path, "path": r.path}
            | ({"note": r.note} if r.note else {})
            for r in event.memories
        ]
        self._message(body)

    # ----- partial messages (stream-json --include-partial-messages) -----

    def _stream_event(self, event: dict[str, Any]) -> None:
        self._message({"type": "stream_event", "event": event, "parent_tool_use_id": None})

    def _opened(self, model: str = "") -> _OpenMessage:
        if self._open is None:
            self._open = _OpenMessage(f"msg_{random_hex(24)}")
            message: dict[str, Any] = {
                "id": self._open.id,
                "type": "message",
                "role": "assistant",
                "model": model or self._model,
                "content": [],
                "stop_reason": None,
                "stop_sequence": None,
                "usage": {"input_tokens": 0, "output_tokens": 0},
            }
            self._stream_event({"type": "message_start", "message": message})
        return self._open

    def _partial_delta(self, event: AssistantText | AssistantThought) -> None:
        kind = "text" if isinstance(event, AssistantText) else "thinking"
        if not event.text:
            return
        opened = self._opened()
        if opened.block != kind:
            self._close_block(opened)
            opened.block = kind
            block = {"type": "text", "text": ""} if kind == "text" else {
                "type": "thinking", "thinking": "", "signature": ""}  # fmt: skip
            self._stream_event(
                {"type": "content_block_start", "index": opened.index, "content_block": block}
            )
        delta = {"type": "text_delta", "text": event.text} if kind == "text" else {
            "type": "thinking_delta", "thinking": event.text}  # fmt: skip
        self._stream_event({"type": "content_block_delta", "index": opened.index, "delta": delta})

    def _close_block(self, opened: _OpenMessage) -> None:
        if opened.block is not None:
            self._stream_event({"type": "content_block_stop", "index": opened.index})
            opened.index += 1
            opened.block = None

    def _partial_end(self, event: AssistantMessage) -> str:
        """The tool calls and the end of the streaming message; its id."""
        opened = self._opened(event.model)
        self._close_block(opened)
        for call in event.calls:
            block = {"type": "tool_use", "id": call.id, "name": call.name, "input": {}}
            arguments = json.dumps(dict(call.args), ensure_ascii=False, default=str)
            index = opened.index
            self._stream_event(
                {"type": "content_block_start", "index": index, "content_block": block}
            )
            delta = {"type": "input_json_delta", "partial_json": arguments}
            self._stream_event({"type": "content_block_delta", "index": index, "delta": delta})
            self._stream_event({"type": "content_block_stop", "index": index})
            opened.index += 1
        stop = _STOP_REASONS.get(event.finish_reason) or ("tool_use" if event.calls else "end_turn")
        self._stream_event(
            {
                "type": "message_delta",
                "delta": {"stop_reason": stop, "stop_sequence": None},
                "usage": event.usage.to_dict(),
            }
        )
        self._stream_event({"type": "message_stop"})
        self._open = None
        return opened.id

    def _assistant(self, event: AssistantMessage, *, parent: str | None = None) -> None:
        message_id = f"msg_{random_hex(24)}"
        if self.partial and parent is None:
            message_id = self._partial_end(event)
        content: list[dict[str, Any]] = []
        if event.thought:
            content.append({"type": "thinking", "thinking": event.thought})
        if event.text:
            content.append({"type": "text", "text": event.text})
        for call in event.calls:
            content.append(
                {"type": "tool_use", "id": call.id, "name": call.name, "input": dict(call.args)}
            )
        self._message(
            {
                "type": "assistant",
                "parent_tool_use_id": parent,
                "message": {
                    "id": message_id,
                    "type": "message",
                    "role": "assistant",
                    "model": event.model,
                    "content": content,
                    "usage": event.usage.to_dict(),
                },
            }
        )

    def result(
        self,
        result: TurnResult,
        *,
        subtype: str,
        duration_ms: int,
        api_duration_ms: int,
        is_error: bool,
        error: str | None = None,
        usage_by_purpose: dict[str, Any] | None = None,
        context: dict[str, Any] | None = None,
    ) -> None:
        self._finished = True
        if self.fmt == "text":
            if result.handled_locally and result.text and not is_error:
                self.out.write(self._shown(result.text) + "\n")  # a command's answer
            elif self._text_written and not self._ended_with_newline:
                self.out.write("\n")
            if error and error not in self._said:
                self.err.write(escape_for_terminal(error) + "\n")
            self.out.flush()
            return
        message: dict[str, Any] = {
            "type": "result",
            "subtype": subtype,
            "is_error": is_error,
            "duration_ms": duration_ms,
            "duration_api_ms": api_duration_ms,
            "num_turns": result.requests,
            "result": result.text,
            "stop_reason": result.stop_reason,
            "usage": result.usage.to_dict(),
            "permission_denials": self.denials,
        }
        if usage_by_purpose is not None:  # tokens by X-Cairn-Purpose: session and today
            message["usage_by_purpose"] = usage_by_purpose
        if context is not None:  # what fills the context window, by part
            message["context"] = context
        if error:
            message["error"] = {"message": error, "status": result.error_status}
        self._message(message)
        if self.fmt == "json":
            self.out.write(json_line(self.messages) + "\n")
        self.out.flush()

    def _message(self, body: dict[str, Any]) -> None:
        body.setdefault("uuid", new_uuid())
        body.setdefault("session_id", self.session_id)
        body.setdefault("timestamp", time.time())
        if self.fmt == "stream-json":
            self.out.write(json_line(body) + "\n")
            self.out.flush()
        elif self.fmt == "json":
            self.messages.append(body)

    def _shown(self, text: str) -> str:
        """Text for stdout: escaped on a terminal, as it is for a program."""
        return escape_for_terminal(text) if self._escape_out else text
