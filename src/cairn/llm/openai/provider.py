"""The OpenAI-compatible chat-completions provider (httpx + httpx-sse).

It sends the body :mod:`cairn.llm.openai.format` builds, reads the answer with
:class:`~cairn.llm.openai.stream.ChunkParser` and retries what is worth retrying: HTTP 429/5xx
and connection failures up to ``max_attempts`` times with backoff, and a dropped or empty stream
twice more.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import time
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any

from cairn.debug_log import get_logger
from cairn.llm._httpx import httpx
from cairn.llm.caching import extra_cache_headers, marks_cache
from cairn.llm.errors import ProviderError
from cairn.llm.openai.format import WireOptions, build_request_body
from cairn.llm.openai.stream import ChunkParser, parse_completion
from cairn.llm.retry import RetryPolicy, retry_stream
from cairn.llm.structured import ENDPOINTS, Strategy, downgrade
from cairn.llm.transport import (
    ClientPools,
    deadline_error,
    drain,
    http_error,
    request_errors,
    sse_data,
    timed,
)
from cairn.llm.types import ModelRequest, StreamEvent

__all__ = ["PURPOSE_HEADER", "SESSION_HEADER", "OpenAIProvider"]

PURPOSE_HEADER = "X-Cairn-Purpose"
SESSION_HEADER = "X-Cairn-Session-Id"
MAX_CONNECT_TIMEOUT = 15.0  # seconds to open a connection, whatever the read timeout
DEFAULT_REQUEST_DEADLINE = 1800.0  # seconds one attempt may take, first byte to last
DEFAULT_BASE_URL_SETTING = "OPENAI_BASE_URL or security.auth.baseUrl"
_log = get_logger("PROVIDER")


class OpenAIProvider:
    """A provider for any endpoint that speaks OpenAI chat completions.

    ``pools`` spreads the sessions over that many HTTP clients (see
    :class:`~cairn.llm.transport.ClientPools`); a front end running many concurrent sessions
    (the daemon) asks for several. ``timeout`` bounds the wait for the response headers and for
    each event of the stream; ``attempt_deadline`` bounds one attempt as a whole.
    ``base_url_setting`` names where ``base_url`` came from, for the message when nothing
    answers there. ``structured_output`` is ``model.structuredOutput``: how a side query asks
    for JSON (:mod:`cairn.llm.structured`); ``supports_images`` false sends each image as a
    one-line note; ``prompt_caching`` is ``model.promptCaching`` (:mod:`cairn.llm.caching`).
    ``sleep`` and ``clock`` (monotonic) are injectable for tests.
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
        clock: Callable[[], float] = time.monotonic,
        pools: int = 1,
        attempt_deadline: float = DEFAULT_REQUEST_DEADLINE,
        base_url_setting: str = DEFAULT_BASE_URL_SETTING,
        structured_output: str = "auto",
        supports_images: bool = True,
        prompt_caching: str = "auto",
    ) -> None:
        self._structured = structured_output
        self._images = supports_images
        self._caching = prompt_caching
        self._base_url = base_url.rstrip("/")
        self._timeout = timeout
        self._deadline = attempt_deadline
        self._clock = clock
        self._base_url_setting = base_url_setting
        self._api_key = api_key
        self.model = model
        self.fast_model = fast_model or None
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._chat_url: httpx.URL | None = None
        self._clients = ClientPools(
            self._base_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, MAX_CONNECT_TIMEOUT)),
            pools=pools,
            client=client,
        )

    async def warm_up(self) -> None:
        """Open a connection ahead of the first request (best effort, never raises)."""
        with contextlib.suppress(Exception):  # warming is an optimisation only
            client = await self._clients.get(None)
            await client.head(self._base_url + "/models", headers=self._headers("warmup", None))

    async def aclose(self) -> None:
        await self._clients.aclose()

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        headers = self._headers(request.purpose, request.session_id)
        cache = marks_cache(self._caching, self._base_url, request.model)
        if cache:
            headers.update(extra_cache_headers(self._base_url))
        strategy = ENDPOINTS.strategy(self._structured, self._base_url, request.model)
        while True:
            options = WireOptions(structured=strategy, images=self._images, cache=cache)
            body = build_request_body(request, options)
            events = retry_stream(
                functools.partial(self._attempt, body, headers, request.session_id),
                policy=self._retry,
                max_attempts=max(1, request.max_attempts or self._retry.max_attempts),
                sleep=self._sleep,
                clock=self._clock,
            )
            produced = False
            try:
                async with aclosing(events):
                    async for event in events:
                        produced = True
                        yield event
                return
            except ProviderError as exc:
                fallback = self._fallback(request, strategy, exc) if not produced else None
                if fallback is None:
                    raise
                strategy = fallback

    def _fallback(
        self, request: ModelRequest, strategy: Strategy, error: ProviderError
    ) -> Strategy | None:
        """The next way to ask for JSON after the endpoint refused this one (``auto`` only)."""
        if request.response_schema is None or self._structured != "auto":
            return None
        fallback = downgrade(strategy, error)
        if fallback is not None:
            _log.info(f"{self._base_url} refused {strategy} structured output; using {fallback}")
            ENDPOINTS.refused(self._base_url, request.model, fallback)
        return fallback

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
        started = asyncio.get_running_loop().time()
        async with (
            request_errors(url, self._base_url_setting),
            contextlib.AsyncExitStack() as stack,
        ):
            if self._chat_url is None:  # parsed once: httpx re-parses a str URL per request
                self._chat_url = httpx.URL(url)
            try:
                async with asyncio.timeout(self._deadline):
                    response = await stack.enter_async_context(
                        client.stream("POST", self._chat_url, json=body, headers=headers)
                    )
                    if response.status_code != 200:
                        raise http_error(
                            response.status_code, await response.aread(), response.headers
                        )
                    if "text/event-stream" not in response.headers.get("content-type", ""):
                        events = parse_completion(await response.aread())
                    else:
                        events = None
            except TimeoutError:
                raise deadline_error(self._deadline) from None
            if events is not None:
                for event in events:
                    yield event
                return
            payloads = timed(
                sse_data(response), idle=self._timeout, deadline=self._deadline, started=started
            )
            async for event in _events_from_sse(payloads):
                yield event


async def _events_from_sse(payloads: AsyncIterator[tuple[str, str]]) -> AsyncIterator[StreamEvent]:
    parser = ChunkParser()
    async for _event, data in payloads:
        for event in parser.feed_payload(data):
            yield event
        if parser.done:
            await drain(payloads)
            break
    for event in parser.finish():
        yield event
