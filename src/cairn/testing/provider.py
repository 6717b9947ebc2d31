"""An in-process scripted provider: the same replies as the server, without HTTP.

For fast unit tests of the agent loop. It plays :class:`~cairn.testing.script.Reply` objects as
:mod:`cairn.llm.types` stream events the way :class:`cairn.llm.openai.OpenAIProvider` would:
text and reasoning as they stream, tool calls once the stream has finished, then
:class:`~cairn.llm.types.Finished`. Failures are retried within the real provider's budgets,
without waiting, and each attempt is recorded.
"""

from __future__ import annotations

import asyncio
import dataclasses
import inspect
import itertools
import json
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import Any, TypeAlias

from cairn.content import FunctionCall
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.retry import RetryPolicy, is_retryable_status, retry_stream
from cairn.llm.types import (
    INVALID_ARGUMENTS_KEY,
    Finished,
    ModelRequest,
    StreamEvent,
    TextDelta,
    ThoughtDelta,
    ToolCallDelta,
    Usage,
)
from cairn.testing.script import Reply, ReplyQueues

__all__ = ["ProviderHandler", "ScriptedProvider"]

DEFAULT_MODEL = "scripted-model"
MAX_INVALID_ARGUMENTS_CHARS = 2000  # as much of unparseable arguments as the marker keeps
_FINISH_REASONS = {"function_call": "tool_calls", "content_filter": "filter"}

ProviderHandler: TypeAlias = Callable[[ModelRequest], Reply | Awaitable[Reply | None] | None]


class ScriptedProvider:
    """A :class:`cairn.llm.types.Provider` that answers from scripted replies.

    Replies are chosen like :class:`~cairn.testing.ScriptedServer` chooses them: ``handler``,
    then the queues (by ``request.purpose`` and ``request.session_id``), then ``default``. With
    none, :meth:`stream` raises :class:`ProviderError` ("script exhausted", not retried).
    ``raw_sse`` replies need the HTTP server and are refused.
    """

    def __init__(
        self,
        default: Reply | ProviderHandler | None = None,
        *,
        handler: ProviderHandler | None = None,
        model: str = DEFAULT_MODEL,
        fast_model: str | None = None,
        max_attempts: int = RetryPolicy.max_attempts,
    ) -> None:
        self.handler = handler
        self.default = default
        self.max_attempts = max_attempts
        self.requests: list[ModelRequest] = []  # one snapshot per attempt, in order
        self.closed = False
        self._model = model
        self._fast_model = fast_model or None
        self._queues = ReplyQueues()
        self._call_ids = itertools.count(1)

    @property
    def model(self) -> str:
        return self._model

    @model.setter
    def model(self, value: str) -> None:
        self._model = value

    @property
    def fast_model(self) -> str | None:
        return self._fast_model

    @fast_model.setter
    def fast_model(self, value: str | None) -> None:
        self._fast_model = value or None

    def enqueue(
        self, *replies: Reply, purpose: str | None = None, session_id: str | None = None
    ) -> None:
        """Queue replies (FIFO) for requests of this purpose (None: any request)."""
        for item in replies:
            if item.raw_sse is not None:
                raise ValueError("raw_sse replies need the HTTP server (ScriptedServer)")
            self._queues.put(item, purpose, session_id)

    @property
    def pending_replies(self) -> int:
        return self._queues.pending()

    def requests_for(self, purpose: str | None) -> list[ModelRequest]:
        return [r for r in self.requests if r.purpose == purpose]

    def clear(self) -> None:
        """Forget recorded requests and queued replies (handler and default stay)."""
        self.requests.clear()
        self._queues.clear()

    async def aclose(self) -> None:
        self.closed = True

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Play replies with the real provider's retry rules, without waiting between tries."""

        async def attempt() -> AsyncIterator[StreamEvent]:
            snapshot = self._record(request)
            answer = await self._choose_reply(snapshot)
            async for event in self._play(answer, _prompt_chars(snapshot)):
                yield event

        events = retry_stream(
            attempt,
            policy=RetryPolicy(max_attempts=self.max_attempts),
            max_attempts=max(1, request.max_attempts or self.max_attempts),
            sleep=_no_wait,
        )
        async with aclosing(events):
            async for event in events:
                yield event

    def _record(self, request: ModelRequest) -> ModelRequest:
        contents = [c.shallow_copy() for c in request.contents]
        snapshot = dataclasses.replace(request, contents=contents, tools=tuple(request.tools))
        self.requests.append(snapshot)
        return snapshot

    async def _choose_reply(self, request: ModelRequest) -> Reply:
        answer = await _call(self.handler, request)
        if answer is None:
            answer = self._queues.take(request.purpose, request.session_id)
        if answer is None:
            default = self.default
            answer = default if isinstance(default, Reply) else await _call(default, request)
        if answer is None:
            index = len(self.requests) - 1
            raise ProviderError(
                f"script exhausted: no reply for request #{index} (purpose {request.purpose!r})",
                status=500,
            )
        if not isinstance(answer, Reply):
            raise TypeError(f"the script returned {type(answer).__name__}, not a Reply")
        if answer.raw_sse is not None:
            raise ValueError("raw_sse replies need the HTTP server (ScriptedServer)")
        return answer

    async def _play(self, answer: Reply, prompt_chars: int) -> AsyncIterator[StreamEvent]:
        if answer.delay > 0:
            await asyncio.sleep(answer.delay)
        if answer.is_error:
            raise _http_error(answer)
        deltas: list[StreamEvent] = []
        if answer.reasoning:
            deltas.append(ThoughtDelta(answer.reasoning))
        deltas.extend(TextDelta(text) for text in answer.content_chunks)
        calls = [self._call_event(spec.id, spec.name, spec.args) for spec in answer.tool_calls]
        cut_at = answer.drop_after_chunks
        for i, event in enumerate(deltas):
            if cut_at is not None and i >= cut_at:
                break
            if i and answer.chunk_delay > 0:
                await asyncio.sleep(answer.chunk_delay)
            yield event
        if cut_at is not None:
            raise InvalidStreamError("the stream was cut off", kind="dropped")
        if answer.omit_finish:
            raise InvalidStreamError(
                "the stream ended without a finish reason", kind="no_finish_reason"
            )
        if not deltas and not calls:
            raise InvalidStreamError("the model returned an empty response", kind="no_response")
        for call in calls:
            yield call
        yield Finished(_finish_reason(answer), _usage(answer.usage_for(prompt_chars)))

    def _call_event(
        self, call_id: str | None, name: str, args: Mapping[str, Any] | str
    ) -> ToolCallDelta:
        resolved = call_id or f"call_{next(self._call_ids)}"
        return ToolCallDelta(FunctionCall(resolved, name, _arguments(args)))


async def _call(fn: ProviderHandler | None, request: ModelRequest) -> Reply | None:
    if fn is None:
        return None
    result = fn(request)
    if inspect.isawaitable(result):
        result = await result
    return result


def _http_error(answer: Reply) -> ProviderError:
    error = ProviderError(
        f"HTTP {answer.status}: {answer.resolved_error_message}",
        status=answer.status,
        retryable=is_retryable_status(answer.status),
    )
    retry_after = {k.lower(): v for k, v in answer.headers.items()}.get("retry-after")
    if retry_after is not None:
        try:
            error.retry_after = max(0.0, float(retry_after))
        except ValueError:
            error.retry_after = None
    return error


def _arguments(args: Mapping[str, Any] | str) -> dict[str, Any]:
    """Arguments as the real provider parses them; bad JSON becomes the invalid marker."""
    if not isinstance(args, str):
        return dict(args)
    if not args.strip():
        return {}
    try:
        value = json.loads(args)
    except ValueError:
        value = None
    if isinstance(value, dict):
        return value
    return {INVALID_ARGUMENTS_KEY: args[:MAX_INVALID_ARGUMENTS_CHARS]}


def _finish_reason(answer: Reply) -> str:
    reason = answer.resolved_finish_reason
    return _FINISH_REASONS.get(reason, reason)


def _prompt_chars(request: ModelRequest) -> int:
    return len(request.system or "") + sum(len(c.text) for c in request.contents)


def _usage(raw: Mapping[str, Any]) -> Usage:
    """OpenAI-style usage counts as cairn's :class:`Usage`."""

    def number(key: str) -> int:
        value = raw.get(key)
        return int(value) if isinstance(value, int | float) else 0

    prompt, completion = number("prompt_tokens"), number("completion_tokens")
    total = number("total_tokens") or prompt + completion
    details = raw.get("prompt_tokens_details")
    cached = details.get("cached_tokens", 0) if isinstance(details, dict) else 0
    return Usage(prompt, completion, total, int(cached or 0), 0)


async def _no_wait(seconds: float) -> None:
    return None
