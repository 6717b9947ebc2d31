"""The OpenAI-compatible chat-completions provider (httpx + httpx-sse).

It sends the body :mod:`cairn.llm.openai.format` builds, reads the answer with
:class:`~cairn.llm.openai.stream.ChunkParser` and retries what is worth retrying: HTTP 429/5xx
and connection failures up to ``max_attempts`` times with backoff, and a dropped or empty stream
twice more.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncGenerator, AsyncIterator
from contextlib import aclosing
from typing import Any

from cairn.llm._httpx import httpx
from cairn.llm.openai.format import build_request_body
from cairn.llm.openai.stream import ChunkParser, parse_completion
from cairn.llm.retry import RetryPolicy, retry_stream
from cairn.llm.transport import ClientPools, drain, http_error, request_errors, sse_data
from cairn.llm.types import ModelRequest, StreamEvent

__all__ = ["PURPOSE_HEADER", "SESSION_HEADER", "OpenAIProvider"]

PURPOSE_HEADER = "X-Cairn-Purpose"
SESSION_HEADER = "X-Cairn-Session-Id"
MAX_CONNECT_TIMEOUT = 15.0  # seconds to open a connection, whatever the read timeout


class OpenAIProvider:
    """A provider for any endpoint that speaks OpenAI chat completions.

    ``pools`` spreads the sessions over that many HTTP clients (see
    :class:`~cairn.llm.transport.ClientPools`); a front end running many concurrent sessions
    (the daemon) asks for several.
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
        async with request_errors(url):
            if self._chat_url is None:  # parsed once: httpx re-parses a str URL per request
                self._chat_url = httpx.URL(url)
            async with client.stream(
                "POST", self._chat_url, json=body, headers=headers
            ) as response:
                if response.status_code != 200:
                    raw = await response.aread()
                    raise http_error(response.status_code, raw, response.headers)
                if "text/event-stream" not in response.headers.get("content-type", ""):
                    for event in parse_completion(await response.aread()):
                        yield event
                    return
                async for event in _events_from_sse(response):
                    yield event


async def _events_from_sse(response: httpx.Response) -> AsyncIterator[StreamEvent]:
    parser = ChunkParser()
    payloads = sse_data(response)
    async for _event, data in payloads:
        for event in parser.feed_payload(data):
            yield event
        if parser.done:
            await drain(payloads)
            break
    for event in parser.finish():
        yield event
