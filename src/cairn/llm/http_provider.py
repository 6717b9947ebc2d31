"""What every HTTP provider does the same way, whatever its wire format.

:class:`HttpProvider` sends one request per attempt over pooled connections, bounds each attempt
(the wait for each event, the whole attempt), retries what is worth retrying
(:mod:`cairn.llm.retry`) and falls back to another way of asking for JSON when the endpoint
refuses one (:mod:`cairn.llm.structured`). A subclass says what its wire looks like: the URL,
the headers, the body, and how to read the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Callable
from contextlib import aclosing
from typing import Any, Protocol

from cairn.debug_log import get_logger
from cairn.llm._httpx import httpx
from cairn.llm.errors import ProviderError
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
from cairn.llm.types import ListedModel, ModelRequest, StreamEvent

__all__ = [
    "DEFAULT_REQUEST_DEADLINE",
    "PURPOSE_HEADER",
    "SESSION_HEADER",
    "HttpProvider",
    "StreamParser",
    "parse_model_list",
]

PURPOSE_HEADER = "X-Cairn-Purpose"
SESSION_HEADER = "X-Cairn-Session-Id"
MAX_CONNECT_TIMEOUT = 15.0  # seconds to open a connection, whatever the read timeout
DEFAULT_REQUEST_DEADLINE = 1800.0  # seconds one attempt may take, first byte to last
_log = get_logger("PROVIDER")


class StreamParser(Protocol):
    """Reads one streamed answer: fed each server-sent event, then finished."""

    @property
    def done(self) -> bool:
        """The wire's end-of-stream event arrived."""
        ...

    def feed(self, event: str, data: str) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


class HttpProvider(ABC):
    """The shared part of the OpenAI and Anthropic providers.

    ``pools`` spreads the sessions over that many HTTP clients (see
    :class:`~cairn.llm.transport.ClientPools`); a front end running many concurrent sessions
    (the daemon) asks for several. ``timeout`` bounds the wait for the response headers and for
    each event of the stream; ``attempt_deadline`` bounds one attempt as a whole.
    ``base_url_setting``, ``key_setting`` and ``model_setting`` name where ``base_url``,
    ``api_key`` and ``model`` came from, for the message when nothing answers there, the key is
    rejected (401, 403) or the model or URL is unknown (404). ``structured_output`` is
    ``model.structuredOutput``: how a side query asks
    for JSON (:mod:`cairn.llm.structured`); ``supports_images`` false sends each image as a
    one-line note; ``prompt_caching`` is ``model.promptCaching``. ``sleep`` and ``clock``
    (monotonic) are injectable for tests.
    """

    default_base_url_setting = "the base URL"

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
        base_url_setting: str | None = None,
        key_setting: str | None = None,
        model_setting: str | None = None,
        structured_output: str = "auto",
        supports_images: bool = True,
        prompt_caching: str = "auto",
    ) -> None:
        self.model = model
        self.fast_model = fast_model or None
        self._base_url = base_url.rstrip("/")
        self._api_key = api_key
        self._timeout = timeout
        self._deadline = attempt_deadline
        self._retry = retry or RetryPolicy()
        self._sleep = sleep
        self._clock = clock
        self._base_url_setting = base_url_setting or self.default_base_url_setting
        self._key_setting = key_setting or "the API key setting"
        self._model_setting = model_setting or "the model setting"
        self._structured = structured_output
        self._images = supports_images
        self._caching = prompt_caching
        self._url: httpx.URL | None = None
        self._clients = ClientPools(
            self._base_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, MAX_CONNECT_TIMEOUT)),
            pools=pools,
            client=client,
        )

    # ----- what a wire format says -----

    @abstractmethod
    def endpoint_url(self) -> str:
        """Where one request is sent."""

    def models_url(self) -> str:
        """Where the endpoint lists its models."""
        return self._base_url + "/models"

    def auth_headers(self) -> dict[str, str]:
        return {"Authorization": f"Bearer {self._api_key}"}

    def request_headers(self, request: ModelRequest) -> dict[str, str]:
        """Headers a request needs besides authentication and attribution."""
        return {}

    @abstractmethod
    def build_body(self, request: ModelRequest, strategy: Strategy) -> dict[str, Any]:
        """The request body, asking for JSON by ``strategy`` when it has a schema."""

    @abstractmethod
    def new_parser(self) -> StreamParser:
        """A reader for one streamed answer."""

    @abstractmethod
    def parse_body(self, raw: bytes) -> list[StreamEvent]:
        """The events of a whole (non-streamed) answer."""

    def first_strategy(self, request: ModelRequest) -> Strategy:
        """How to ask for JSON first (only read when the request has a response schema)."""
        return ENDPOINTS.strategy(self._structured, self._base_url, request.model)

    # ----- the provider protocol -----

    async def warm_up(self) -> None:
        """Open a connection ahead of the first request (best effort, never raises)."""
        with contextlib.suppress(Exception):  # warming is an optimisation only
            client = await self._clients.get(None)
            await client.head(self.models_url(), headers=self._headers("warmup", None))

    async def list_models(self) -> list[ListedModel]:
        """``GET /models`` (both wires answer ``{"data": [{"id", "display_name"?}]}``), once,
        without retries: a picker that cannot list falls back to the configured model."""
        url = self.models_url()
        client = await self._clients.get(None)
        async with request_errors(url, self._base_url_setting):
            headers = {**self._headers("models", None), "Accept": "application/json"}
            response = await client.get(url, headers=headers)
            if response.status_code != 200:
                raise http_error(response.status_code, response.content, response.headers)
        return parse_model_list(response.content, url)

    async def aclose(self) -> None:
        await self._clients.aclose()

    def _advice(self, status: int) -> str:
        """What to check after a refusal that configuration causes, naming where it came from."""
        if status in (401, 403):
            return f"Check the API key ({self._key_setting})."
        if status == 404:
            return (
                f"Check the model name ({self._model_setting}) "
                f"and the base URL ({self._base_url_setting})."
            )
        return ""

    async def stream(self, request: ModelRequest) -> AsyncGenerator[StreamEvent, None]:
        headers = self._headers(request.purpose, request.session_id)
        headers.update(self.request_headers(request))
        strategy = self.first_strategy(request)
        while True:
            body = self.build_body(request, strategy)
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
        headers = {**self.auth_headers(), "Accept": "text/event-stream", PURPOSE_HEADER: purpose}
        if session_id:
            headers[SESSION_HEADER] = session_id
        return headers

    async def _attempt(
        self, body: dict[str, Any], headers: dict[str, str], session_id: str | None
    ) -> AsyncIterator[StreamEvent]:
        url = self.endpoint_url()
        client = await self._clients.get(session_id)
        started = asyncio.get_running_loop().time()
        async with (
            request_errors(url, self._base_url_setting),
            contextlib.AsyncExitStack() as stack,
        ):
            if self._url is None:  # parsed once: httpx re-parses a str URL per request
                self._url = httpx.URL(url)
            try:
                async with asyncio.timeout(self._deadline):
                    response = await stack.enter_async_context(
                        client.stream("POST", self._url, json=body, headers=headers)
                    )
                    if response.status_code != 200:
                        raise http_error(
                            response.status_code,
                            await response.aread(),
                            response.headers,
                            advice=self._advice(response.status_code),
                        )
                    whole = None
                    if "text/event-stream" not in response.headers.get("content-type", ""):
                        whole = self.parse_body(await response.aread())
            except TimeoutError:
                raise deadline_error(self._deadline) from None
            if whole is not None:
                for event in whole:
                    yield event
                return
            payloads = timed(
                sse_data(response), idle=self._timeout, deadline=self._deadline, started=started
            )
            async for event in _read_stream(self.new_parser(), payloads):
                yield event


def parse_model_list(raw: bytes, url: str) -> list[ListedModel]:
    """The models of a ``GET /models`` answer; a body of another shape is a ProviderError."""
    try:
        entries = json.loads(raw)["data"]
        if not isinstance(entries, list):
            raise TypeError("data is not a list")
    except (ValueError, TypeError, KeyError) as exc:
        raise ProviderError(f"{url} did not answer with a model list ({exc})") from None
    listed: list[ListedModel] = []
    for entry in entries:
        if isinstance(entry, dict) and isinstance(entry.get("id"), str) and entry["id"]:
            name = entry.get("display_name")
            listed.append(ListedModel(entry["id"], name if isinstance(name, str) else ""))
    return listed


async def _read_stream(
    parser: StreamParser, payloads: AsyncIterator[tuple[str, str]]
) -> AsyncIterator[StreamEvent]:
    async for event_name, data in payloads:
        for event in parser.feed(event_name, data):
            yield event
        if parser.done:
            await drain(payloads)
            break
    for event in parser.finish():
        yield event
