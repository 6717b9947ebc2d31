"""A scripted OpenAI-compatible chat-completions server on 127.0.0.1, for tests and demos.

The server runs its own asyncio event loop in a daemon thread, so synchronous tests, async tests
and tests that start ``cairn`` subprocesses can all use it. It records every request before
answering it and answers from a script: a handler, FIFO queues per purpose, then a default.

Run it on its own (e.g. to point another agent at the same scripted model)::

    python -m cairn.testing.server --port 0 --script script.json
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import itertools
import json
import signal
import ssl
import sys
import threading
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import Any, TextIO, TypeAlias

from cairn.testing._service import Service
from cairn.testing.anthropic_wire import (
    anthropic_blocks,
    anthropic_error_body,
    anthropic_message,
    anthropic_stream,
    anthropic_usage,
    request_problem,
    signature_for,
)
from cairn.testing.cache import CacheMode, CacheUse, PromptCache, openai_blocks
from cairn.testing.http11 import (
    MAX_BODY_BYTES,
    MAX_HEAD_BYTES,
    HttpError,
    IncomingRequest,
    read_request,
    send_body,
    send_json,
    send_stream,
)
from cairn.testing.local_server import Flavour, LocalServer, request_tokens
from cairn.testing.request import RecordedRequest, message_text
from cairn.testing.script import Reply, ReplyQueues, call_handler, load_script, wait_to_start
from cairn.testing.wire import (
    ReplyContext,
    StreamPlan,
    cached_usage,
    completion_body,
    error_body,
    sse_frame,
    stream_plan,
)

__all__ = ["DEFAULT_MODEL", "Handler", "ScriptedServer", "main"]

HOST = "127.0.0.1"  # loopback only, by design
DEFAULT_MODEL = "scripted-model"
LISTEN_BACKLOG = 1024  # pending connections; benchmarks open hundreds at once
START_TIMEOUT = 10.0  # seconds to wait for the server thread to listen
STOP_TIMEOUT = 5.0  # seconds to wait for open connections to be cancelled on stop()
DEFAULT_WAIT_TIMEOUT = 10.0  # wait_for_requests' default, in seconds

Handler: TypeAlias = Callable[[RecordedRequest], Reply | Awaitable[Reply | None] | None]


class ScriptedServer(Service):
    """A fake OpenAI-compatible model endpoint that answers from a script.

    A chat-completion request is answered by, in order: ``handler`` (when it returns a
    :class:`Reply`), the reply queues (:meth:`enqueue`), ``default`` (a reply or a handler).
    With none of them it gets HTTP 500 "script exhausted" with ``Retry-After: 0``, so a
    client's retries fail fast instead of backing off for minutes.

    ``unsupported`` names request fields (``response_format``, ``tool_choice``...) the server
    refuses as some endpoints do: a request carrying one gets HTTP 400 naming it, before the
    script is asked. ``response_formats`` names the ``response_format`` types the server takes
    (``None``: any): a request asking for another type gets HTTP 400 saying so, as an endpoint
    that knows ``json_object`` but not ``json_schema`` answers. ``prompt_cache`` (``"marked"``
    or ``"automatic"``) makes the default usage report cache hits as an endpoint with that kind
    of prompt cache would (:class:`~cairn.testing.cache.PromptCache`).

    ``context_window`` makes it a local server serving that many tokens of context, as
    ``flavour`` (``llama.cpp``, ``vllm`` or ``ollama``) says and enforces it
    (:mod:`cairn.testing.local_server`): a prompt that does not fit is refused with that server's
    400, and an ``endless`` reply stops when the window is full. ``tls`` (a server context with
    its certificate) makes it serve HTTPS: :attr:`base_url` is then ``https://``.
    """

    def __init__(
        self,
        default: Reply | Handler | None = None,
        *,
        handler: Handler | None = None,
        port: int = 0,
        models: Sequence[str] = (DEFAULT_MODEL,),
        unsupported: Sequence[str] = (),
        response_formats: Sequence[str] | None = None,
        prompt_cache: CacheMode | None = None,
        context_window: int | None = None,
        flavour: Flavour = "llama.cpp",
        tls: ssl.SSLContext | None = None,
    ) -> None:
        self.tls = tls
        self.handler: Handler | None = handler
        self.unsupported = set(unsupported)  # request fields answered with 400
        # response_format types taken (None: any); another type is answered with 400
        self.response_formats = None if response_formats is None else list(response_formats)
        # None: no cache hits are reported; see cairn.testing.cache for the two modes
        self.prompt_cache = PromptCache(prompt_cache) if prompt_cache else None
        # None: no window is said or enforced; see cairn.testing.local_server
        self.local = LocalServer(context_window, flavour) if context_window is not None else None
        self._signatures: set[str] = set()  # thinking signatures issued (Anthropic wire)
        self.default: Reply | Handler | None = default
        self.models = list(models)  # what GET /v1/models lists
        self.requests: list[RecordedRequest] = []  # chat-completion requests, in arrival order
        self.other_requests: list[RecordedRequest] = []  # model lists, unknown paths
        self.errors: list[str] = []  # script failures answered with 500 (exceptions, exhaustion)
        self.dropped: list[RecordedRequest] = []  # chat requests whose client hung up mid-reply
        self._queues = ReplyQueues()
        self._requested_port = port
        self._port: int | None = None
        self._changed = threading.Condition()  # guards the lists above; notified on each request
        self._async_waiters: set[tuple[asyncio.AbstractEventLoop, asyncio.Event]] = set()
        self._call_ids = itertools.count(1)
        self._connection_ids = itertools.count(1)
        self._thread: threading.Thread | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._server: asyncio.Server | None = None
        self._tasks: set[asyncio.Task[None]] = set()
        self._start_error: OSError | None = None

    # -- lifecycle ---------------------------------------------------------------------------

    def start(self) -> ScriptedServer:
        """Listen on 127.0.0.1 (port 0: a free port) and serve from a daemon thread."""
        if self._thread is not None:
            raise RuntimeError("the scripted server is already running")
        ready = threading.Event()
        self._start_error = None
        self._thread = threading.Thread(
            target=self._run, args=(ready,), name="cairn-scripted-server", daemon=True
        )
        self._thread.start()
        if not ready.wait(START_TIMEOUT):
            raise RuntimeError("the scripted server did not start listening in time")
        if self._start_error is not None:
            self._thread.join()
            self._thread = None
            raise RuntimeError(f"the scripted server cannot listen: {self._start_error}")
        return self

    def stop(self) -> None:
        """Close every connection and stop the server thread. Safe to call twice."""
        thread, loop = self._thread, self._loop
        if thread is None or loop is None:
            return
        if loop.is_running():
            future = asyncio.run_coroutine_threadsafe(self._shutdown(), loop)
            with contextlib.suppress(Exception):
                future.result(STOP_TIMEOUT)
            loop.call_soon_threadsafe(loop.stop)
        thread.join(STOP_TIMEOUT)
        self._thread = None

    async def __aenter__(self) -> ScriptedServer:
        return self.start()

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await asyncio.to_thread(self.stop)

    @property
    def port(self) -> int:
        if self._port is None:
            raise RuntimeError("the scripted server has not been started")
        return self._port

    @property
    def base_url(self) -> str:
        """``http://127.0.0.1:<port>/v1``, the value for ``OPENAI_BASE_URL``.

        It serves the Anthropic wire too (``POST /v1/messages``): cairn's Anthropic provider
        takes the same URL as ``ANTHROPIC_BASE_URL``, with or without the ``/v1``.
        """
        return f"{'http' if self.tls is None else 'https'}://{HOST}:{self.port}/v1"

    # -- script ------------------------------------------------------------------------------

    def enqueue(
        self, *replies: Reply, purpose: str | None = None, session_id: str | None = None
    ) -> None:
        """Queue replies (FIFO) for requests with this ``X-Cairn-Purpose`` (None: any).

        ``session_id`` narrows the queue to one ``X-Cairn-Session-Id``. A request takes from
        its purpose-and-session queue, then its session's, then its purpose's, then the queue
        for any request.
        """
        for item in replies:
            self._queues.put(item, purpose, session_id)

    @property
    def pending_replies(self) -> int:
        """How many queued replies no request has taken yet."""
        return self._queues.pending()

    def clear(self) -> None:
        """Forget recorded requests, errors and queued replies (handler and default stay)."""
        self._queues.clear()
        with self._changed:
            self.requests.clear()
            self.other_requests.clear()
            self.errors.clear()
            self.dropped.clear()

    # -- recorded requests -------------------------------------------------------------------

    def requests_for(self, purpose: str | None) -> list[RecordedRequest]:
        """The chat-completion requests whose ``X-Cairn-Purpose`` is ``purpose``."""
        with self._changed:
            return [r for r in self.requests if r.purpose == purpose]

    def wait_for_requests(
        self, n: int, *, purpose: str | None = None, timeout: float = DEFAULT_WAIT_TIMEOUT
    ) -> list[RecordedRequest]:
        """Block until at least ``n`` chat requests (of ``purpose``, if given) have arrived:
        returns all of them, or raises :class:`TimeoutError` saying how many came."""
        deadline = time.monotonic() + timeout
        with self._changed:
            while (arrived := self._arrived(n, purpose, deadline, timeout)) is None:
                self._changed.wait(deadline - time.monotonic())
            return arrived

    async def async_wait_for_requests(
        self, n: int, *, purpose: str | None = None, timeout: float = DEFAULT_WAIT_TIMEOUT
    ) -> list[RecordedRequest]:
        """:meth:`wait_for_requests` for async code: it never blocks the caller's loop."""
        loop, arrived = asyncio.get_running_loop(), asyncio.Event()
        deadline = time.monotonic() + timeout
        with self._changed:
            self._async_waiters.add((loop, arrived))
        try:
            while True:
                arrived.clear()
                with self._changed:
                    found = self._arrived(n, purpose, deadline, timeout)
                if found is not None:
                    return found
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(arrived.wait(), deadline - time.monotonic())
        finally:
            with self._changed:
                self._async_waiters.discard((loop, arrived))

    def _arrived(
        self, n: int, purpose: str | None, deadline: float, timeout: float
    ) -> list[RecordedRequest] | None:
        """The matching requests once there are ``n``, ``None`` while there is time to wait;
        past ``deadline`` raises :class:`TimeoutError` saying how many came. Lock held."""
        matching = self._matching(purpose)
        if len(matching) >= n:
            return matching
        if deadline - time.monotonic() <= 0:
            raise TimeoutError(_wait_message(n, purpose, len(matching), timeout))
        return None

    def _matching(self, purpose: str | None) -> list[RecordedRequest]:
        if purpose is None:
            return list(self.requests)
        return [r for r in self.requests if r.purpose == purpose]

    def _record(
        self, incoming: IncomingRequest, body: Any, connection: int, *, chat: bool
    ) -> RecordedRequest:
        target = self.requests if chat else self.other_requests
        with self._changed:
            recorded = RecordedRequest(
                method=incoming.method,
                path=incoming.path,
                headers=incoming.headers,
                body=body,
                raw=incoming.body,
                received_at=incoming.received_at,
                index=len(target),
                connection=connection,
            )
            target.append(recorded)
            self._changed.notify_all()
            waiters = list(self._async_waiters)
        for loop, arrived in waiters:
            with contextlib.suppress(RuntimeError):  # that waiter's loop has closed
                loop.call_soon_threadsafe(arrived.set)
        return recorded

    # -- the server thread -------------------------------------------------------------------

    def _run(self, ready: threading.Event) -> None:
        loop = asyncio.new_event_loop()
        self._loop = loop
        try:
            self._server = loop.run_until_complete(
                asyncio.start_server(
                    self._serve_connection,
                    HOST,
                    self._requested_port,
                    limit=MAX_HEAD_BYTES,
                    backlog=LISTEN_BACKLOG,
                    ssl=self.tls,
                )
            )
        except OSError as exc:
            self._start_error = exc
            loop.close()
            ready.set()
            return
        self._port = self._server.sockets[0].getsockname()[1]
        loop.call_soon(ready.set)  # once the loop runs, so stop() always finds it running
        try:
            loop.run_forever()
        finally:
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.close()

    async def _shutdown(self) -> None:
        if self._server is not None:
            self._server.close()
        tasks = list(self._tasks)
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)

    async def _serve_connection(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter
    ) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        connection = next(self._connection_ids)
        try:
            await self._serve_requests(reader, writer, connection)
        except asyncio.CancelledError:
            # stop(): end quietly (asyncio's stream callback would log a re-raised cancel).
            writer.transport.abort()
            return
        except (ConnectionError, asyncio.IncompleteReadError):
            pass  # the client went away; there is nobody to answer
        except Exception as exc:  # a server bug: drop this connection, keep serving others
            with self._changed:
                self.errors.append(f"the server failed on connection {connection}: {exc!r}")
            writer.transport.abort()
            return
        finally:
            self._tasks.discard(task)
        writer.close()

    async def _serve_requests(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, connection: int
    ) -> None:
        while True:
            try:
                incoming = await read_request(reader, writer)
            except HttpError as exc:
                body = error_body(exc.status, str(exc))
                await send_json(writer, exc.status, body, keep_alive=False)
                return
            if incoming is None or not await self._dispatch(incoming, writer, connection):
                return

    async def _dispatch(
        self, incoming: IncomingRequest, writer: asyncio.StreamWriter, connection: int
    ) -> bool:
        """Answer one request; False when the connection must close afterwards."""
        route = incoming.path.rstrip("/")
        if incoming.method == "POST" and route.endswith(("/chat/completions", "/messages")):
            return await self._chat(incoming, writer, connection)
        self._record(incoming, _parse_json(incoming.body)[0], connection, chat=False)
        if incoming.too_large:
            return await _send_too_large(writer)
        keep_alive = incoming.keep_alive
        about = None
        if self.local is not None:
            about = self.local.answer(
                incoming.method, route, self.models, _parse_json(incoming.body)[0]
            )
        if about is not None:
            return await send_json(writer, 200, about, keep_alive=keep_alive)
        if incoming.method in ("GET", "HEAD") and route.endswith("/models"):
            head_only = incoming.method == "HEAD"
            return await send_json(
                writer, 200, self._model_list(), keep_alive=keep_alive, head_only=head_only
            )
        message = f"no route for {incoming.method} {incoming.path}"
        return await send_json(writer, 404, error_body(404, message), keep_alive=keep_alive)

    def _model_list(self) -> dict[str, Any]:
        extra = self.local.model_fields() if self.local is not None else {}
        data = [{**_model_entry(m), **extra} for m in self.models]
        first, last = (data[0]["id"], data[-1]["id"]) if data else (None, None)
        return {
            "object": "list",
            "data": data,
            "has_more": False,
            "first_id": first,
            "last_id": last,
        }

    async def _chat(
        self, incoming: IncomingRequest, writer: asyncio.StreamWriter, connection: int
    ) -> bool:
        body, problem = (None, None) if incoming.too_large else _parse_json(incoming.body)
        recorded = self._record(incoming, body, connection, chat=True)
        if incoming.too_large:
            return await _send_too_large(writer)
        refused = sorted(n for n in self.unsupported if isinstance(body, dict) and n in body)
        if problem is None and refused:
            problem = f"Unsupported parameter: '{refused[0]}' is not supported by this endpoint."
        if problem is None:
            problem = self._response_format_problem(body)
        if problem is None and recorded.wire == "anthropic":
            with self._changed:
                problem = request_problem(body, self._signatures)
        if problem is not None:
            error = _error_body(recorded, 400, problem)
            return await send_json(writer, 400, error, keep_alive=incoming.keep_alive)
        if self.local is not None:
            refusal = self.local.refusal(request_tokens(recorded), recorded.max_tokens)
            if refusal is not None:
                return await send_json(writer, 400, refusal, keep_alive=incoming.keep_alive)
        answer = await self._choose_reply(recorded)
        try:
            return await self._play(answer, recorded, writer, keep_alive=incoming.keep_alive)
        except ConnectionError:
            with self._changed:
                self.dropped.append(recorded)  # the client went away before the reply ended
            raise
        except Exception as exc:  # rendering fails before anything is written, so answer 500
            failure = self._failure(f"the reply cannot be sent: {type(exc).__name__}: {exc}")
            return await self._play(failure, recorded, writer, keep_alive=False)

    def _response_format_problem(self, body: Any) -> str | None:
        """Why the request's ``response_format`` type is refused (``None``: it is taken)."""
        wanted = body.get("response_format") if isinstance(body, dict) else None
        if self.response_formats is None or not isinstance(wanted, dict):
            return None
        kind = wanted.get("type")
        if kind in self.response_formats:
            return None
        taken = ", ".join(self.response_formats) or "none"
        return f"response_format type {kind!r} is not supported by this endpoint; it takes: {taken}"

    async def _choose_reply(self, request: RecordedRequest) -> Reply:
        try:
            answer = await call_handler(self.handler, request)
            if answer is None:
                answer = self._queues.take(request.purpose, request.session_id)
            if answer is None:
                default = self.default
                answer = (
                    default if isinstance(default, Reply) else await call_handler(default, request)
                )
        except Exception as exc:  # a broken script must not take the server down
            return self._failure(f"the script raised {type(exc).__name__}: {exc}")
        if answer is None:
            return self._failure(
                f"script exhausted: no reply for request #{request.index} "
                f"(purpose {request.purpose!r}, session {request.session_id!r})",
                retry_after="0",
            )
        if not isinstance(answer, Reply):
            return self._failure(f"the script returned {type(answer).__name__}, not a Reply")
        return answer

    def _failure(self, message: str, retry_after: str | None = None) -> Reply:
        with self._changed:
            self.errors.append(message)
        headers = {} if retry_after is None else {"Retry-After": retry_after}
        return Reply(status=500, error_message=message, headers=headers)

    async def _play(
        self,
        answer: Reply,
        request: RecordedRequest,
        writer: asyncio.StreamWriter,
        *,
        keep_alive: bool,
    ) -> bool:
        await wait_to_start(answer)
        extra = list(answer.headers.items())
        if answer.is_error:
            body = _error_body(request, answer.status, answer.resolved_error_message)
            return await send_json(writer, answer.status, body, keep_alive=keep_alive, extra=extra)
        if answer.raw_body is not None:
            data = answer.raw_body.encode()
            return await send_body(writer, 200, data, keep_alive=keep_alive, extra=extra)
        ctx, cache = self._context(answer, request)
        streamed = request.stream if answer.stream is None else answer.stream
        if request.wire == "anthropic":
            streamed = streamed or answer.raw_sse is not None
            return await self._play_anthropic(
                answer, request, writer, ctx, cache, keep_alive=keep_alive, streamed=streamed
            )
        if answer.raw_sse is not None or streamed:
            plan = stream_plan(answer, ctx)
            return await _send_plan(writer, plan, answer, keep_alive=keep_alive)
        if answer.drop_after_chunks is not None:
            return False  # close the connection without answering
        body = completion_body(answer, ctx)
        return await send_json(writer, 200, body, keep_alive=keep_alive, extra=extra)

    async def _play_anthropic(
        self,
        answer: Reply,
        request: RecordedRequest,
        writer: asyncio.StreamWriter,
        ctx: ReplyContext,
        cache: CacheUse | None,
        *,
        keep_alive: bool,
        streamed: bool,
    ) -> bool:
        extra = list(answer.headers.items())
        usage = anthropic_usage(ctx, cache, answer)
        signature = signature_for(answer.reasoning or "", request.index)
        if answer.reasoning:
            with self._changed:
                self._signatures.add(signature)
        if streamed:
            plan = anthropic_stream(answer, ctx, usage, signature)
            return await _send_plan(writer, plan, answer, keep_alive=keep_alive)
        if answer.drop_after_chunks is not None:
            return False  # close the connection without answering
        body = anthropic_message(answer, ctx, usage, signature)
        return await send_json(writer, 200, body, keep_alive=keep_alive, extra=extra)

    def _context(
        self, answer: Reply, request: RecordedRequest
    ) -> tuple[ReplyContext, CacheUse | None]:
        call_ids = [spec.id or f"call_{next(self._call_ids)}" for spec in answer.tool_calls]
        prompt_chars = sum(len(message_text(m)) for m in request.messages)
        if request.wire == "anthropic":
            prompt_chars += len(request.system or "")
        cache = None
        if self.prompt_cache is not None and answer.usage is None:
            blocks = anthropic_blocks if request.wire == "anthropic" else openai_blocks
            cache = self.prompt_cache.use(blocks(request.body))
            answer = dataclasses.replace(answer, usage=cached_usage(answer, cache))
        rooms = [request.max_tokens]
        if self.local is not None:
            rooms.append(self.local.room(request_tokens(request)))
        ctx = ReplyContext(
            completion_id=f"chatcmpl-scripted-{request.index}",
            created=int(request.received_at),
            model=answer.model or request.model or DEFAULT_MODEL,
            call_ids=call_ids,
            usage=answer.usage_for(prompt_chars),
            room=min((room for room in rooms if room is not None), default=None),
        )
        return ctx, cache


def _model_entry(model: str) -> dict[str, Any]:
    """One model as both wires list it (OpenAI's fields and Anthropic's)."""
    return {
        "id": model,
        "object": "model",
        "created": 0,
        "owned_by": "cairn",
        "type": "model",
        "display_name": model,
        "created_at": "1970-01-01T00:00:00Z",
    }


async def _send_plan(
    writer: asyncio.StreamWriter, plan: StreamPlan, answer: Reply, *, keep_alive: bool
) -> bool:
    return await send_stream(
        writer,
        (sse_frame(p) for p in plan.payloads)
        if not isinstance(plan.payloads, list)
        else [sse_frame(p) for p in plan.payloads],
        keep_alive=keep_alive,
        extra=list(answer.headers.items()),
        frame_delay=answer.chunk_delay,
        drop=plan.drop,
    )


def _error_body(request: RecordedRequest, status: int, message: str) -> dict[str, Any]:
    if request.wire == "anthropic":
        return anthropic_error_body(status, message)
    return error_body(status, message)


def _wait_message(n: int, purpose: str | None, got: int, timeout: float) -> str:
    which = "requests" if purpose is None else f"requests with purpose {purpose!r}"
    return f"expected {n} {which} within {timeout} s, got {got}"


def _parse_json(raw: bytes) -> tuple[Any, str | None]:
    """The parsed body and, when it is not a JSON object, what is wrong with it."""
    if not raw:
        return None, "the request body is empty"
    try:
        value = json.loads(raw)
    except ValueError as exc:
        return None, f"invalid JSON in the request body: {exc}"
    if not isinstance(value, dict):
        return value, "the request body must be a JSON object"
    return value, None


async def _send_too_large(writer: asyncio.StreamWriter) -> bool:
    message = f"the request body exceeds {MAX_BODY_BYTES} bytes"
    return await send_json(writer, 413, error_body(413, message), keep_alive=False)


# -- command line ----------------------------------------------------------------------------


def _request_logger(out: TextIO) -> Handler:
    """A handler that appends each request to ``out`` as JSON and lets the script answer."""

    def log(request: RecordedRequest) -> None:
        record = {
            "index": request.index,
            "received_at": request.received_at,
            "path": request.path,
            "purpose": request.purpose,
            "session_id": request.session_id,
            "body": request.body,
        }
        out.write(json.dumps(record, ensure_ascii=False) + "\n")
        out.flush()

    return log


def _parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m cairn.testing.server",
        description="Serve scripted OpenAI-compatible chat completions on 127.0.0.1.",
    )
    parser.add_argument("--port", type=int, default=0, help="port to listen on (0: any free one)")
    parser.add_argument("--script", type=Path, help="JSON script of replies")
    parser.add_argument("--default-text", help="answer this text once the script runs out")
    parser.add_argument("--record", type=Path, help="append every request to this JSONL file")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    """Serve until SIGINT or SIGTERM; the base URL is the first line on stdout."""
    args = _parse_args(argv)
    try:
        queued, default = load_script(args.script) if args.script else ([], None)
    except (OSError, ValueError) as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    if args.default_text is not None:
        default = Reply(text=args.default_text)
    server = ScriptedServer(default, port=args.port)
    for item in queued:
        server.enqueue(item.reply, purpose=item.purpose, session_id=item.session_id)
    with contextlib.ExitStack() as stack:
        if args.record:
            log_file = stack.enter_context(args.record.open("a", encoding="utf-8"))
            server.handler = _request_logger(log_file)
        try:
            stack.enter_context(server)
        except RuntimeError as exc:
            print(f"error: {exc}", file=sys.stderr)
            return 1
        print(server.base_url, flush=True)
        _wait_for_signal()
    return 0


def _wait_for_signal() -> None:
    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())
    while not stop.wait(1.0):
        pass


if __name__ == "__main__":
    sys.exit(main())
