"""The OpenAI-compatible chat-completions provider (httpx + httpx-sse).

The only module in cairn that knows the OpenAI wire format. It converts cairn's content model to
``messages``, streams the answer back as :mod:`cairn.llm.types` events, assembles tool-call
fragments by index, maps ``reasoning_content`` to thoughts and retries what is worth retrying:
HTTP 429/5xx and connection failures up to ``max_attempts`` times with backoff, and a dropped or
empty stream twice more.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import ssl
import threading
import time
import zlib
from collections.abc import AsyncGenerator, AsyncIterator, Callable, Mapping, Sequence
from contextlib import aclosing
from dataclasses import dataclass, field
from typing import Any, TypeVar

from cairn.content import Content, FunctionCall, FunctionResponse, Text, Thought
from cairn.llm._httpx import httpx
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
    ToolDeclaration,
    Usage,
)

__all__ = ["OpenAIProvider", "to_openai_messages"]


PURPOSE_HEADER = "X-Cairn-Purpose"
SESSION_HEADER = "X-Cairn-Session-Id"
DONE_DRAIN_TIMEOUT = 1.0  # seconds to wait for the end of the body after [DONE]
MAX_INVALID_ARGUMENTS_CHARS = 2000  # how much of unparseable tool arguments the marker keeps
MAX_CONNECTIONS = 200  # open connections to the endpoint, per pool
MAX_KEEPALIVE_CONNECTIONS = 64  # idle connections kept open (5 s at most, httpx's expiry), per pool
_T = TypeVar("_T")
_FINISH_REASONS = {
    "stop": "stop",
    "tool_calls": "tool_calls",
    "function_call": "tool_calls",
    "length": "length",
    "content_filter": "filter",
}


class OpenAIProvider:
    """A provider for any endpoint that speaks OpenAI chat completions.

    ``pools`` spreads the sessions over that many HTTP clients (see :class:`_ClientPools`); a
    front end running many concurrent sessions (the daemon) asks for several.
    """

    def __init__(
        self,
        *,
        base_url: str,
        api_key: str,
        model: str,
        fast_model: str | None = None,
        timeout: float = 120.0,
        retry: RetryPolicy | None = None,
        client: httpx.AsyncClient | None = None,
        sleep: Any = asyncio.sleep,
        pools: int = 1,
    ) -> None:
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._model = model
        self._fast_model = fast_model or None
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._owns_client = client is None
        self._chat_url: httpx.URL | None = None
        self._clients = _ClientPools(
            self._base_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, 15.0)),
            pools=pools,
            client=client,
        )

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

    async def warm_up(self) -> None:
        """Open a connection ahead of the first request (best effort, never raises)."""
        with contextlib.suppress(Exception):  # warming is an optimisation only
            client = await self._clients.get(None)
            await client.head(self._base_url + "/models", headers=self._headers("warmup", None))

    async def aclose(self) -> None:
        if self._owns_client:
            await self._clients.aclose()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        body = build_request_body(request)
        headers = self._headers(request.purpose, request.session_id)
        events = retry_stream(
            lambda: self._attempt(body, headers, request.session_id),
            policy=self._retry,
            max_attempts=max(1, request.max_attempts or self._retry.max_attempts),
            sleep=self._sleep,
        )
        async with aclosing(events):
            async for event in events:
                yield event

    def _headers(self, purpose: str, session_id: str | None) -> dict[str, str]:
        headers = {
            "Authorization": f"Bearer {self._api_key}",
            "Accept": "text/event-stream",
            PURPOSE_HEADER: purpose,
        }
        if session_id:
            headers[SESSION_HEADER] = session_id
        return headers

    async def _attempt(
        self, body: dict[str, Any], headers: dict[str, str], session_id: str | None
    ) -> AsyncIterator[StreamEvent]:
        url = self._base_url + "/chat/completions"
        client = await self._clients.get(session_id)
        try:
            if self._chat_url is None:  # parsed once: httpx re-parses a str URL per request
                self._chat_url = httpx.URL(url)
            async with client.stream(
                "POST", self._chat_url, json=body, headers=headers
            ) as response:
                if response.status_code != 200:
                    raw = await response.aread()
                    raise _http_error(response.status_code, raw, response.headers)
                content_type = response.headers.get("content-type", "")
                if "text/event-stream" not in content_type:
                    raw = await response.aread()
                    for event in _events_from_completion(raw):
                        yield event
                    return
                async for event in _events_from_sse(response):
                    yield event
        except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
            raise ProviderError(f"invalid model endpoint URL {url!r}: {exc}") from exc
        except (httpx.ConnectError, httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
            raise ProviderError(f"cannot reach {url}: {exc}", retryable=True) from exc
        except httpx.ReadTimeout as exc:
            raise InvalidStreamError(
                f"the model stopped responding: {exc}", kind="dropped"
            ) from exc
        except (httpx.RemoteProtocolError, httpx.ReadError, httpx.DecodingError) as exc:
            raise InvalidStreamError(f"the stream was cut off: {exc}", kind="dropped") from exc
        except httpx.TransportError as exc:  # write errors, proxies, other network failures
            raise ProviderError(f"the request to {url} failed: {exc}", retryable=True) from exc


class _ClientPools:
    """The provider's HTTP clients, created on first use, one per slice of the sessions.

    httpcore's connection pool re-checks every pooled connection whenever a request starts or a
    response ends (a ``poll()`` per idle connection and a count of idle connections per idle
    connection), so one pool serving 50 concurrent sessions costs more CPU than the rest of a
    turn. Each of ``pools`` clients serves the sessions whose id hashes to it, which keeps its
    connection list short; a session always uses the same client, so its connection stays warm.
    Requests without a session id use the first client.

    TLS: an ``http://`` endpoint gets a context with no CA certificates (loading the bundle
    costs ~40 ms at start-up; should TLS ever be attempted, every certificate is refused). For
    ``https://`` the verifying context is built in a worker thread as soon as the provider
    exists (OpenSSL releases the GIL while it parses the CA bundle), and the first request
    waits for it only if it is not ready yet.
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: httpx.Timeout,
        pools: int,
        client: httpx.AsyncClient | None,
    ) -> None:
        self._base_url = base_url
        self._timeout = timeout
        count = 1 if client is not None else max(1, pools)
        self._clients: list[httpx.AsyncClient | None] = [client, *([None] * (count - 1))]
        # Each pool keeps the limits one pool had: a pool never gets fewer connections than
        # its sessions need at once (no queueing behind an unlucky hash), and idle ones expire.
        self._limits = httpx.Limits(
            max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_KEEPALIVE_CONNECTIONS
        )
        self._tls = None if client is not None else _tls_context(base_url)

    async def get(self, session_id: str | None) -> httpx.AsyncClient:
        index = zlib.crc32(session_id.encode()) % len(self._clients) if session_id else 0
        client = self._clients[index]
        if client is None:
            assert self._tls is not None
            try:
                tls = await asyncio.wrap_future(self._tls)
            except OSError as exc:  # e.g. an unreadable CA bundle
                raise ProviderError(f"cannot set up TLS for {self._base_url}: {exc}") from exc
            client = self._clients[index]  # another request may have created it meanwhile
            if client is None:
                client = httpx.AsyncClient(
                    timeout=self._timeout, limits=self._limits, trust_env=False, verify=tls
                )
                self._clients[index] = client
        return client

    async def aclose(self) -> None:
        for client in self._clients:
            if client is not None:
                await client.aclose()


def _tls_context(base_url: str) -> concurrent.futures.Future[ssl.SSLContext]:
    """The TLS context for connections to ``base_url`` (see :class:`_ClientPools`)."""
    if base_url.lower().startswith("https:"):
        return _in_thread(lambda: httpx.create_ssl_context(trust_env=False))
    future: concurrent.futures.Future[ssl.SSLContext] = concurrent.futures.Future()
    future.set_result(ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT))  # verifying, and trusting no CA
    return future


def _in_thread(build: Callable[[], _T]) -> concurrent.futures.Future[_T]:
    """Run ``build`` in a daemon thread (one that never delays the process's exit)."""
    future: concurrent.futures.Future[_T] = concurrent.futures.Future()

    def run() -> None:
        try:
            future.set_result(build())
        except BaseException as exc:  # handed to whoever waits for the result
            future.set_exception(exc)

    threading.Thread(target=run, name="cairn-tls-context", daemon=True).start()
    return future


def _http_error(status: int, raw: bytes, headers: Mapping[str, str]) -> ProviderError:
    message = raw.decode("utf-8", "replace").strip()[:500]
    try:
        data = json.loads(raw)
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("message"):
            message = str(err["message"])
        elif isinstance(err, str):
            message = err
    except ValueError:
        pass
    error = ProviderError(
        f"HTTP {status}: {message or 'no details'}",
        status=status,
        retryable=is_retryable_status(status),
    )
    retry_after = headers.get("retry-after")
    if retry_after is not None:
        try:
            error.retry_after = max(0.0, float(retry_after))
        except ValueError:
            error.retry_after = None
    return error


@dataclass
class _ToolCallBuffer:
    id: str = ""
    name: str = ""
    arguments: list[str] = field(default_factory=list)


class _StreamState:
    def __init__(self) -> None:
        self.calls: dict[int, _ToolCallBuffer] = {}
        self.finish_reason: str | None = None
        self.usage = Usage()
        self.saw_output = False

    def feed(self, chunk: Mapping[str, Any]) -> list[StreamEvent]:
        events: list[StreamEvent] = []
        usage = chunk.get("usage")
        if isinstance(usage, Mapping):
            self.usage = _usage(usage)
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
                self.finish_reason = _FINISH_REASONS.get(reason, reason)
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
            events.append(ToolCallDelta(FunctionCall(call_id, buffer.name, _parse_args(buffer))))
        if not events and not self.saw_output:
            raise InvalidStreamError("the model returned an empty response", kind="no_response")
        events.append(Finished(self.finish_reason, self.usage))
        return events


def _parse_args(buffer: _ToolCallBuffer) -> dict[str, Any]:
    raw = "".join(buffer.arguments).strip()
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


async def _events_from_sse(response: httpx.Response) -> AsyncIterator[StreamEvent]:
    from httpx_sse import EventSource

    state = _StreamState()
    events = EventSource(response).aiter_sse()
    async for sse in events:
        data = sse.data.strip()
        if not data:
            continue
        if data == "[DONE]":
            await _drain(events)
            break
        try:
            chunk = json.loads(data)
        except ValueError as exc:
            raise InvalidStreamError(
                f"invalid JSON in stream: {data[:80]}", kind="dropped"
            ) from exc
        if not isinstance(chunk, dict):
            continue
        if "error" in chunk and not chunk.get("choices"):
            err = chunk["error"]
            message = err.get("message") if isinstance(err, dict) else str(err)
            raise ProviderError(f"stream error: {message}", retryable=True)
        for event in state.feed(chunk):
            yield event
    for event in state.finish():
        yield event


async def _drain(events: AsyncIterator[Any]) -> None:
    """Read the end of the body after ``[DONE]`` so the connection goes back to the pool.

    An HTTP/1.1 connection whose response was not read to the end is closed, and every request
    would then pay for a new connection.
    """
    with contextlib.suppress(TimeoutError, httpx.TransportError):
        async with asyncio.timeout(DONE_DRAIN_TIMEOUT):
            async for _ in events:
                pass


def _events_from_completion(raw: bytes) -> list[StreamEvent]:
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise InvalidStreamError(
            "the response is neither SSE nor JSON", kind="no_response"
        ) from exc
    if not isinstance(data, dict):
        raise InvalidStreamError("the response is not a JSON object", kind="no_response")
    state = _StreamState()
    events = state.feed(data)
    return events + state.finish()


def _usage(raw: Mapping[str, Any]) -> Usage:
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


def build_request_body(request: ModelRequest) -> dict[str, Any]:
    body: dict[str, Any] = {
        "model": request.model,
        "messages": to_openai_messages(request.system, request.contents),
        "stream": True,
        "stream_options": {"include_usage": True},
    }
    if request.tools:
        body["tools"] = [_tool(t) for t in request.tools]
    if request.max_output_tokens is not None:
        body["max_tokens"] = request.max_output_tokens
    if request.temperature is not None:
        body["temperature"] = request.temperature
    if request.top_p is not None:
        body["top_p"] = request.top_p
    if request.json_mode:
        body["response_format"] = {"type": "json_object"}
    return body


def _tool(tool: ToolDeclaration) -> dict[str, Any]:
    return {
        "type": "function",
        "function": {
            "name": tool.name,
            "description": tool.description,
            "parameters": dict(tool.parameters),
        },
    }


def to_openai_messages(system: str | None, contents: Sequence[Content]) -> list[dict[str, Any]]:
    """Convert cairn content to chat-completions messages.

    Function responses become ``tool`` messages right after the assistant message that issued the
    calls; text in the same user entry follows as a user message. Calls without a response and
    responses without a call are dropped, since providers reject both.
    """
    messages: list[dict[str, Any]] = []
    if system:
        messages.append({"role": "system", "content": system})
    for content in contents:
        if content.role == "model":
            messages.append(_assistant_message(content))
            continue
        texts: list[str] = []
        for part in content.parts:
            if isinstance(part, FunctionResponse):
                messages.append(
                    {"role": "tool", "tool_call_id": part.id, "content": _response_text(part)}
                )
            elif isinstance(part, Text) and part.text:
                texts.append(part.text)
        if texts:
            messages.append({"role": "user", "content": "\n\n".join(texts)})
    return _merge_assistants(_drop_orphans(_merge_assistants(messages)))


def _assistant_message(content: Content) -> dict[str, Any]:
    text = "".join(p.text for p in content.parts if isinstance(p, Text))
    reasoning = "".join(p.text for p in content.parts if isinstance(p, Thought))
    calls: list[dict[str, Any]] = []
    seen: set[str] = set()
    for i, part in enumerate(content.parts):
        if isinstance(part, FunctionCall):
            call_id = part.id or f"call_{i}"
            if call_id in seen:
                continue
            seen.add(call_id)
            calls.append(
                {
                    "id": call_id,
                    "type": "function",
                    "function": {"name": part.name, "arguments": json.dumps(dict(part.args))},
                }
            )
    message: dict[str, Any] = {"role": "assistant", "content": text or (None if calls else "")}
    if reasoning:
        message["reasoning_content"] = reasoning
    if calls:
        message["tool_calls"] = calls
    return message


def _response_text(part: FunctionResponse) -> str:
    for key in ("output", "error"):
        value = part.response.get(key)
        if isinstance(value, str):
            return value
    return json.dumps(dict(part.response), default=str)


def _merge_assistants(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    merged: list[dict[str, Any]] = []
    for message in messages:
        previous = merged[-1] if merged else None
        if previous and previous["role"] == "assistant" == message["role"]:
            text = (previous.get("content") or "") + (message.get("content") or "")
            calls = previous.get("tool_calls", []) + message.get("tool_calls", [])
            previous["content"] = text or (None if calls else "")
            if calls:
                previous["tool_calls"] = calls
            if message.get("reasoning_content"):
                previous["reasoning_content"] = (
                    previous.get("reasoning_content", "") + message["reasoning_content"]
                )
        else:
            merged.append(message)
    return merged


def _drop_orphans(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Keep only tool calls answered by the tool messages right after them, and those answers."""
    out: list[dict[str, Any]] = []
    i = 0
    while i < len(messages):
        message = messages[i]
        i += 1
        if message["role"] == "tool":
            continue  # not right after an assistant's calls: an orphan
        if message["role"] != "assistant" or not message.get("tool_calls"):
            out.append(message)
            continue
        replies: list[dict[str, Any]] = []
        while i < len(messages) and messages[i]["role"] == "tool":
            replies.append(messages[i])
            i += 1
        out.extend(_answered_calls(message, replies))
    return out


def _answered_calls(
    assistant: dict[str, Any], replies: list[dict[str, Any]]
) -> list[dict[str, Any]]:
    """The assistant message trimmed to its answered calls, followed by one answer per call."""
    call_ids = {call["id"] for call in assistant["tool_calls"]}
    answers: dict[str, dict[str, Any]] = {}
    for reply in replies:
        if reply["tool_call_id"] in call_ids:
            answers.setdefault(reply["tool_call_id"], reply)
    message = dict(assistant)
    calls = [call for call in assistant["tool_calls"] if call["id"] in answers]
    if calls:
        message["tool_calls"] = calls
        return [message, *(answers[call["id"]] for call in calls)]
    message.pop("tool_calls")
    if not message.get("content") and not message.get("reasoning_content"):
        return []
    message["content"] = message.get("content") or ""
    return [message]
