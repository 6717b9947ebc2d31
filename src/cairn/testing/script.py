"""Scripted replies: what the fake model answers, and the queues that hold them.

A :class:`Reply` describes one answer (text, reasoning, tool calls, usage) and how it is delivered
(delays, HTTP errors, a dropped connection, a missing finish reason). The scripted server and the
in-process scripted provider both play the same replies, so a script works with either.
"""

from __future__ import annotations

import asyncio
import inspect
import json
import threading
from collections import deque
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field, fields
from http import HTTPStatus
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "QueuedReply",
    "Reply",
    "ReplyQueues",
    "ToolCallSpec",
    "call_handler",
    "error_reply",
    "load_script",
    "reply",
    "tool_call",
    "tool_calls",
]

_Request = TypeVar("_Request")
CHARS_PER_TOKEN = 4  # the default usage counts estimate one token per 4 characters


@dataclass
class ToolCallSpec:
    """One tool call. ``args`` may be a string, sent verbatim (e.g. to script invalid JSON).

    Without an ``id`` the server (or provider) assigns ``call_<n>``, counting from 1 per server.
    """

    name: str
    args: Mapping[str, Any] | str = field(default_factory=dict)
    id: str | None = None

    @property
    def arguments(self) -> str:
        """The arguments as the JSON string the wire format carries."""
        return self.args if isinstance(self.args, str) else json.dumps(dict(self.args))


@dataclass
class Reply:
    """One scripted answer and how to deliver it.

    ``text`` is sent as one content chunk, ``chunks`` as several (``chunks`` wins when both are
    set). ``delay`` waits before the response starts, ``chunk_delay`` between stream chunks.
    ``status`` other than 200 answers with an OpenAI-style error body. ``drop_after_chunks`` cuts
    the connection after that many chunks (role chunk not counted) with no finish and no
    ``[DONE]``; ``omit_finish`` ends the stream cleanly without a finish reason. ``raw_sse``
    replaces the generated stream with these ``data:`` payloads, sent verbatim; ``raw_body``
    answers with this text as a whole ``application/json`` body instead (to script a malformed
    answer). ``stream`` overrides the request's ``stream`` flag (a proxy that ignores it, for
    instance). ``hold``, a ``threading.Event``, keeps the response from starting until the test
    sets it: a turn that is still running for as long as the test needs, however slow the machine.
    ``endless`` is a model that never emits its end token: after the text it goes on generating
    (text that never repeats, four characters a token) until the request's ``max_tokens`` or the
    server's context window is reached, then finishes with ``length``; with neither it streams
    until the client hangs up.
    """

    text: str | None = None
    chunks: list[str] | None = None
    reasoning: str | None = None
    tool_calls: list[ToolCallSpec] = field(default_factory=list)
    finish_reason: str | None = None
    usage: dict[str, Any] | None = None
    delay: float = 0.0
    chunk_delay: float = 0.0
    status: int = 200
    error_message: str | None = None
    headers: dict[str, str] = field(default_factory=dict)
    drop_after_chunks: int | None = None
    omit_finish: bool = False
    raw_sse: list[str] | None = None
    raw_body: str | None = None
    model: str | None = None
    stream: bool | None = None  # None: as the request asks; False: a JSON answer regardless
    hold: threading.Event | None = field(default=None, compare=False, repr=False)
    endless: bool = False

    def __post_init__(self) -> None:
        if not 100 <= self.status <= 599:
            raise ValueError(f"status must be an HTTP status (100-599), not {self.status}")
        if self.delay < 0 or self.chunk_delay < 0:
            raise ValueError("delay and chunk_delay must not be negative")
        if self.drop_after_chunks is not None and self.drop_after_chunks < 0:
            raise ValueError("drop_after_chunks must not be negative")

    @property
    def content_chunks(self) -> list[str]:
        """The content as it is streamed: ``chunks``, else ``[text]``, else nothing."""
        if self.chunks is not None:
            return [c for c in self.chunks if c]
        return [self.text] if self.text else []

    @property
    def content(self) -> str | None:
        """The whole answer text (``None`` when there is none)."""
        chunks = self.content_chunks
        return "".join(chunks) if chunks else None

    @property
    def resolved_finish_reason(self) -> str:
        if self.finish_reason:
            return self.finish_reason
        if self.endless:
            return "length"
        return "tool_calls" if self.tool_calls else "stop"

    @property
    def is_error(self) -> bool:
        return self.status != 200

    @property
    def resolved_error_message(self) -> str:
        if self.error_message:
            return self.error_message
        try:
            return HTTPStatus(self.status).phrase
        except ValueError:
            return f"HTTP {self.status}"

    def output_chars(self) -> int:
        """Characters of model output, for the default usage counts."""
        calls = sum(len(c.name) + len(c.arguments) for c in self.tool_calls)
        return len(self.content or "") + len(self.reasoning or "") + calls

    def usage_for(self, prompt_chars: int) -> dict[str, Any]:
        """``usage`` if given, else plausible counts estimated from the prompt and output size."""
        if self.usage is not None:
            return dict(self.usage)
        prompt = max(1, prompt_chars // CHARS_PER_TOKEN)
        completion = max(1, self.output_chars() // CHARS_PER_TOKEN)
        total = prompt + completion
        return {"prompt_tokens": prompt, "completion_tokens": completion, "total_tokens": total}

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> Reply:
        """Build a reply from its JSON form (the field names above; tool calls as objects)."""
        known = {f.name for f in fields(cls)}
        unknown = sorted(set(data) - known)
        if unknown:
            raise ValueError(f"unknown reply field(s) {unknown}; known fields: {sorted(known)}")
        values = dict(data)
        values["tool_calls"] = [_tool_call_from(raw) for raw in data.get("tool_calls") or []]
        return cls(**values)


def _tool_call_from(raw: Any) -> ToolCallSpec:
    if not isinstance(raw, Mapping) or not isinstance(raw.get("name"), str):
        raise ValueError(f"a tool call needs at least a string 'name': {raw!r}")
    args = raw.get("args", raw.get("arguments", {}))
    return ToolCallSpec(raw["name"], args, raw.get("id"))


def reply(text: str | None = None, **fields: Any) -> Reply:
    """A reply: ``reply("Hello")``, ``reply(chunks=["Hel", "lo"])``, ``reply("x", delay=0.5)``."""
    return Reply(text=text, **fields)


def tool_call(
    name: str, args: Mapping[str, Any] | str | None = None, id: str | None = None
) -> Reply:
    """A reply with one tool call and no text."""
    return Reply(tool_calls=[ToolCallSpec(name, {} if args is None else args, id)])


def tool_calls(*calls: ToolCallSpec, text: str | None = None) -> Reply:
    """A reply with several tool calls (and optionally some text before them)."""
    return Reply(text=text, tool_calls=list(calls))


def error_reply(status: int, message: str | None = None, retry_after: float | None = None) -> Reply:
    """An HTTP error answer; ``retry_after`` sets the ``Retry-After`` header (seconds)."""
    headers = {} if retry_after is None else {"Retry-After": _seconds(retry_after)}
    return Reply(status=status, error_message=message, headers=headers)


def _seconds(value: float) -> str:
    return str(int(value)) if float(value).is_integer() else str(value)


_QueueKey = tuple[str | None, str | None]  # (purpose, session id); None matches any


class ReplyQueues:
    """FIFO reply queues keyed by purpose and session; safe to fill from another thread.

    A request takes from the most specific non-empty queue: its purpose and session, then any
    purpose for its session, then its purpose for any session, then the queue for any request.
    """

    def __init__(self) -> None:
        self._queues: dict[_QueueKey, deque[Reply]] = {}
        self._lock = threading.Lock()

    def put(self, reply: Reply, purpose: str | None = None, session_id: str | None = None) -> None:
        if not isinstance(reply, Reply):
            kind = type(reply).__name__
            raise TypeError(f"enqueue a Reply (see cairn.testing.reply), not {kind}")
        with self._lock:
            self._queues.setdefault((purpose, session_id), deque()).append(reply)

    def take(self, purpose: str | None, session_id: str | None) -> Reply | None:
        keys: Sequence[_QueueKey] = (
            (purpose, session_id),
            (None, session_id),
            (purpose, None),
            (None, None),
        )
        with self._lock:
            for key in keys:
                queue = self._queues.get(key)
                if queue:
                    return queue.popleft()
        return None

    def pending(self) -> int:
        """How many replies are still queued."""
        with self._lock:
            return sum(len(q) for q in self._queues.values())

    def clear(self) -> None:
        with self._lock:
            self._queues.clear()


@dataclass(frozen=True)
class QueuedReply:
    """A reply and the queue it goes to (``None``: any purpose or session)."""

    reply: Reply
    purpose: str | None = None
    session_id: str | None = None


def load_script(path: Path) -> tuple[list[QueuedReply], Reply | None]:
    """Read a JSON script: a list of replies, or ``{"replies": [...], "default": {...}}``.

    A reply object uses :class:`Reply`'s field names (tool calls as ``{"name", "args", "id"}``)
    and may carry ``"purpose"`` and ``"session_id"`` to choose its queue.
    """
    data = json.loads(path.read_text(encoding="utf-8"))
    if isinstance(data, list):
        data = {"replies": data}
    if not isinstance(data, dict) or set(data) - {"replies", "default"}:
        raise ValueError(f"{path}: a script is a list of replies or {{'replies', 'default'}}")
    queued = [_queued_reply(path, i, raw) for i, raw in enumerate(data.get("replies") or [])]
    raw_default = data.get("default")
    if raw_default is not None and not isinstance(raw_default, dict):
        raise ValueError(f"{path}: 'default' must be a reply object")
    default = Reply.from_dict(raw_default) if raw_default else None
    return queued, default


def _queued_reply(path: Path, index: int, raw: Any) -> QueuedReply:
    if not isinstance(raw, dict):
        raise ValueError(f"{path}: reply #{index} must be a JSON object")
    fields_ = dict(raw)
    purpose = fields_.pop("purpose", None)
    session_id = fields_.pop("session_id", None)
    try:
        return QueuedReply(Reply.from_dict(fields_), purpose, session_id)
    except (TypeError, ValueError) as exc:
        raise ValueError(f"{path}: reply #{index}: {exc}") from exc


async def call_handler(
    fn: Callable[[_Request], Reply | Awaitable[Reply | None] | None] | None, request: _Request
) -> Reply | None:
    """What a handler (plain or async) answers ``request`` with; ``None`` without a handler."""
    if fn is None:
        return None
    result = fn(request)
    if inspect.isawaitable(result):
        result = await result
    return result


async def wait_to_start(answer: Reply) -> None:
    """What the answer waits for before its response starts: its ``delay``, then its ``hold``."""
    if answer.delay > 0:
        await asyncio.sleep(answer.delay)
    while answer.hold is not None and not answer.hold.is_set():
        await asyncio.sleep(0.01)  # polled, so cancelling the request ends the wait at once
