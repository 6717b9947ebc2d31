"""An in-process scripted provider: the same replies as the server, without HTTP.

For fast unit tests of the agent loop. Each reply is rendered into the chat-completions payloads
the scripted server would send (:mod:`cairn.testing.wire`) and read back with the real
provider's parser (:class:`cairn.llm.openai.stream.ChunkParser`), so text, reasoning, tool calls,
usage and every malformed stream behave exactly as they do over HTTP. Failures are retried within
the real provider's budgets, without waiting, and each attempt is recorded.
"""

from __future__ import annotations

import asyncio
import copy
import itertools
import json
import time
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from contextlib import aclosing
from typing import TypeAlias

from cairn.llm import UsageReports
from cairn.llm.errors import InvalidStreamError, ProviderError
from cairn.llm.limits import output_limit
from cairn.llm.openai.format import build_request_body
from cairn.llm.openai.stream import ChunkParser, parse_completion
from cairn.llm.retry import RetryPolicy, retry_stream
from cairn.llm.transport import http_error
from cairn.llm.types import Finished, ListedModel, ModelRequest, StreamEvent
from cairn.testing.request import message_text
from cairn.testing.script import Reply, ReplyQueues, call_handler, wait_to_start
from cairn.testing.wire import ReplyContext, completion_body, error_body, sse_frame, stream_plan
from cairn.values import replace

__all__ = ["ProviderHandler", "ScriptedProvider"]

DEFAULT_MODEL = "scripted-model"

ProviderHandler: TypeAlias = Callable[[ModelRequest], Reply | Awaitable[Reply | None] | None]


class ScriptedProvider(UsageReports):
    """A :class:`cairn.llm.types.Provider` that answers from scripted replies.

    Replies are chosen like :class:`~cairn.testing.ScriptedServer` chooses them: ``handler``,
    then the queues (by ``request.purpose`` and ``request.session_id``), then ``default``. With
    none, :meth:`stream` raises :class:`ProviderError` ("script exhausted", not retried).

    Every request gets its output bound as the real provider resolves it (``output_limits``:
    ``model.generationConfig.maxOutputTokens``), so an ``endless`` reply ends with ``length``
    there. ``context_window`` is the window the endpoint says it serves (``None``: it says
    nothing), as the real provider learns it.
    """

    def __init__(
        self,
        default: Reply | ProviderHandler | None = None,
        *,
        handler: ProviderHandler | None = None,
        model: str = DEFAULT_MODEL,
        fast_model: str | None = None,
        max_attempts: int = RetryPolicy().max_attempts,
        models: Sequence[str] | None = None,
        output_limits: Mapping[str, int] | None = None,
        context_window: int | None = None,
    ) -> None:
        self.handler = handler
        self.output_limits = dict(output_limits or {})
        self.window = context_window
        self.models = list(models) if models is not None else [model]
        self.default = default
        self.max_attempts = max_attempts
        self.requests: list[ModelRequest] = []  # one snapshot per attempt, in order
        self.closed = False
        self.model = model
        self.fast_model = fast_model or None
        self._queues = ReplyQueues()
        self._call_ids = itertools.count(1)

    def enqueue(
        self, *replies: Reply, purpose: str | None = None, session_id: str | None = None
    ) -> None:
        """Queue replies (FIFO) for requests of this purpose (None: any request)."""
        for item in replies:
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

    async def warm_up(self) -> None:
        return None

    async def list_models(self) -> list[ListedModel]:
        """What ``GET /models`` would list: ``models`` (default: the model it was made with)."""
        return [ListedModel(name) for name in self.models]

    async def aclose(self) -> None:
        self.closed = True

    def context_window(self, model: str) -> int | None:
        return self.window

    async def learn_context_window(self, model: str) -> int | None:
        return self.window

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        """Play replies with the real provider's retry rules, without waiting between tries."""
        limit = output_limit(request.purpose, request.max_output_tokens, self.output_limits)
        request = replace(request, max_output_tokens=limit)

        async def attempt() -> AsyncIterator[StreamEvent]:
            snapshot = self._record(request)
            if request.on_sent is not None:  # received: as the real provider once it is written
                request.on_sent()
            answer = await self._choose_reply(snapshot)
            async for event in self._play(answer, snapshot):
                yield event

        events = retry_stream(
            attempt,
            policy=RetryPolicy(max_attempts=self.max_attempts),
            max_attempts=max(1, request.max_attempts or self.max_attempts),
            sleep=_no_wait,
        )
        async with aclosing(events):
            async for event in events:
                if isinstance(event, Finished):
                    self.report_usage(request, event.usage)
                yield event

    def _record(self, request: ModelRequest) -> ModelRequest:
        contents = [c.shallow_copy() for c in request.contents]
        snapshot = copy.copy(request)
        snapshot.contents, snapshot.tools = contents, tuple(request.tools)
        self.requests.append(snapshot)
        return snapshot

    async def _choose_reply(self, request: ModelRequest) -> Reply:
        answer = await call_handler(self.handler, request)
        if answer is None:
            answer = self._queues.take(request.purpose, request.session_id)
        if answer is None:
            default = self.default
            answer = default if isinstance(default, Reply) else await call_handler(default, request)
        if answer is None:
            index = len(self.requests) - 1
            raise ProviderError(
                f"script exhausted: no reply for request #{index} (purpose {request.purpose!r})",
                status=500,
            )
        if not isinstance(answer, Reply):
            raise TypeError(f"the script returned {type(answer).__name__}, not a Reply")
        return answer

    async def _play(self, answer: Reply, request: ModelRequest) -> AsyncIterator[StreamEvent]:
        """The reply as the server would send it, read by the real provider's parser."""
        await wait_to_start(answer)
        headers = {name.lower(): value for name, value in answer.headers.items()}
        if answer.is_error:
            raw = json.dumps(error_body(answer.status, answer.resolved_error_message))
            raise http_error(answer.status, raw.encode(), headers)
        if answer.raw_body is not None:
            for event in parse_completion(answer.raw_body.encode()):
                yield event
            return
        ctx = self._context(answer, request)
        if answer.raw_sse is None and answer.stream is False:
            if answer.drop_after_chunks is not None:
                raise InvalidStreamError("the stream was cut off", kind="dropped")
            for event in parse_completion(json.dumps(completion_body(answer, ctx)).encode()):
                yield event
            return
        plan = stream_plan(answer, ctx)
        parser = ChunkParser()
        for i, payload in enumerate(plan.payloads):
            if i and answer.chunk_delay > 0:
                await asyncio.sleep(answer.chunk_delay)
            data = _sse_data(sse_frame(payload))
            for event in parser.feed_payload(data) if data else []:
                yield event
            if parser.done:
                break
        if plan.drop and not parser.done:
            raise InvalidStreamError("the stream was cut off", kind="dropped")
        for event in parser.finish():
            yield event

    def _context(self, answer: Reply, request: ModelRequest) -> ReplyContext:
        messages = build_request_body(request)["messages"]
        return ReplyContext(
            completion_id=f"chatcmpl-scripted-{len(self.requests) - 1}",
            created=int(time.time()),
            model=answer.model or request.model or DEFAULT_MODEL,
            call_ids=[spec.id or f"call_{next(self._call_ids)}" for spec in answer.tool_calls],
            usage=answer.usage_for(sum(len(message_text(m)) for m in messages)),
            room=request.max_output_tokens,
        )


def _sse_data(frame: bytes) -> str:
    """The data of one SSE frame, as an SSE client reads it (comments and other fields dropped)."""
    lines = [
        line[5:].removeprefix(" ")
        for line in frame.decode().split("\n")
        if line.startswith("data:")
    ]
    return "\n".join(lines).strip()


async def _no_wait(seconds: float) -> None:
    return None
