"""What every HTTP provider does the same way, whatever its wire format.

:class:`HttpProvider` sends one request per attempt over pooled connections, bounds each attempt
(the wait for each event, the whole attempt), retries what is worth retrying
(:mod:`cairn.llm.retry`) and falls back to another way of asking for JSON when the endpoint
refuses one (:mod:`cairn.llm.structured`). Every request carries an output bound
(:mod:`cairn.llm.limits`), sent again once with the smaller one a server names when it refuses
it. The model's context window is learnt from the server (:mod:`cairn.llm.context_window`): asked
once per model, and read from every refusal of a prompt too long for it. A subclass says what
its wire looks like: the URL, the headers, the body, and how to read the answer.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import json
import time
from abc import ABC, abstractmethod
from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping
from contextlib import aclosing
from typing import TYPE_CHECKING, Any, Protocol

from cairn.debug_log import get_logger
from cairn.llm._httpx import httpx
from cairn.llm.context_window import probe_context_window
from cairn.llm.errors import ContextOverflowError, ProviderError
from cairn.llm.ledger import UsageReports
from cairn.llm.limits import output_limit, smaller_output_limit
from cairn.llm.request_json import request_json
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
from cairn.llm.types import Finished, ListedModel, ModelRequest, StreamEvent
from cairn.values import replace

if TYPE_CHECKING:
    from cairn.llm.proxies import ProxyRoutes

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
WINDOW_PROBE_TIMEOUT = 5.0  # seconds the questions about the context window may take, in all
_log = get_logger("PROVIDER")


class StreamParser(Protocol):
    """Reads one streamed answer: fed each server-sent event, then finished."""

    @property
    def done(self) -> bool:
        """The wire's end-of-stream event arrived."""
        ...

    def feed(self, event: str, data: str) -> list[StreamEvent]: ...

    def finish(self) -> list[StreamEvent]: ...


class HttpProvider(UsageReports, ABC):
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
    one-line note; ``prompt_caching`` is ``model.promptCaching``; ``output_limits`` is
    ``model.generationConfig.maxOutputTokens`` (output bounds by request kind); ``proxies`` the
    HTTP proxy in front of the endpoint (:func:`cairn.llm.proxies.proxy_routes`). ``sleep`` and
    ``clock`` (monotonic) are injectable for tests.
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
        output_limits: Mapping[str, int] | None = None,
        proxies: ProxyRoutes | None = None,
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
        self._output_limits = dict(output_limits or {})
        self._windows: dict[str, int] = {}  # context windows the server told, by model
        self._probes: dict[str, asyncio.Future[int | None]] = {}  # one question per model
        self._url: httpx.URL | None = None
        self._clients = ClientPools(
            self._base_url,
            timeout=httpx.Timeout(timeout, connect=min(timeout, MAX_CONNECT_TIMEOUT)),
            pools=pools,
            client=client,
            proxies=proxies,
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
        probes = [probe for probe in self._probes.values() if not probe.done()]
        for probe in probes:
            probe.cancel()
        await asyncio.gather(*probes, return_exceptions=True)
        await self._clients.aclose()

    # ----- the context window (cairn.llm.context_window) -----

    def context_window(self, model: str) -> int | None:
        """The window the server gave ``model`` (asked, or named in a refusal); ``None``: not
        known. Never waits."""
        return self._windows.get(model)

    async def learn_context_window(self, model: str) -> int | None:
        """Ask the server for ``model``'s window, once per model (later calls share the answer);
        bounded by :data:`WINDOW_PROBE_TIMEOUT`, never raises."""
        probe = self._probes.get(model)
        if probe is None:
            probe = asyncio.ensure_future(self._probe_window(model))
            self._probes[model] = probe
        window = await asyncio.shield(probe)
        return self._windows.get(model, window)

    async def _probe_window(self, model: str) -> int | None:
        try:
            async with asyncio.timeout(WINDOW_PROBE_TIMEOUT):
                window = await probe_context_window(
                    self._fetch_json, self._base_url, model, models_url=self.models_url()
                )
        except Exception as exc:  # best effort: the window is learnt from a refusal otherwise
            _log.info(f"{self._base_url} did not say the context window of {model}: {exc!r}")
            return None
        if window is not None:
            _log.info(f"{self._base_url} serves {model} with a context window of {window}")
            self._windows.setdefault(model, window)  # a refusal's n_ctx is the fresher truth
        return window

    async def _fetch_json(self, method: str, url: str, body: Any) -> tuple[int, Any]:
        """One question about the server (no retries); ``(status, parsed JSON or None)``."""
        client = await self._clients.get(None)
        headers = {**self._headers("models", None), "Accept": "application/json"}
        async with request_errors(url, self._base_url_setting):
            response = await client.request(method, url, headers=headers, json=body)
        try:
            return response.status_code, response.json()
        except ValueError:
            return response.status_code, None

    def _learn_from(self, model: str, error: ContextOverflowError) -> None:
        if error.window is not None:
            self._windows[model] = error.window

    # ----- the output bound (cairn.llm.limits) -----

    def bounded(self, request: ModelRequest) -> ModelRequest:
        """``request`` with its output bound resolved (the user's setting for its kind, the
        bound it asked for, or the kind's default)."""
        limit = output_limit(request.purpose, request.max_output_tokens, self._output_limits)
        if limit == request.max_output_tokens:
            return request
        return replace(request, max_output_tokens=limit)

    def rephrased(self, error: ProviderError, request: ModelRequest) -> bool:
        """Whether the wire can ask again another way after the endpoint refused ``request``
        with ``error`` (e.g. ``max_completion_tokens`` where ``max_tokens`` is refused)."""
        return False

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
        request = self.bounded(request)
        headers = self._headers(request.purpose, request.session_id)
        headers.update(self.request_headers(request))
        strategy = self.first_strategy(request)
        shrunk = False  # the output bound was lowered once to what the server takes
        while True:
            body = self.build_body(request, strategy)
            events = retry_stream(
                functools.partial(
                    self._attempt, body, headers, request.session_id, request.on_sent
                ),
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
                        if isinstance(event, Finished):
                            self.report_usage(request, event.usage)
                        yield event
                return
            except ContextOverflowError as exc:
                self._learn_from(request.model, exc)
                raise
            except ProviderError as exc:
                if produced:
                    raise
                fallback = self._fallback(request, strategy, exc)
                if fallback is not None:
                    strategy = fallback
                    continue
                if self.rephrased(exc, request):
                    continue
                asked = request.max_output_tokens or 0
                smaller = None if shrunk else smaller_output_limit(str(exc), asked)
                if smaller is None:
                    raise
                _log.info(f"{self._base_url} takes at most {smaller} output tokens; asking again")
                request = replace(request, max_output_tokens=smaller)
                shrunk = True

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
        self,
        body: dict[str, Any],
        headers: dict[str, str],
        session_id: str | None,
        on_sent: Callable[[], None] | None = None,
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
                        client.stream(
                            "POST",
                            self._url,
                            content=request_json(body),
                            headers={**headers, "Content-Type": "application/json"},
                            extensions=None if on_sent is None else {"trace": _sent(on_sent)},
                        )
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


def _sent(on_sent: Callable[[], None]) -> Callable[[str, Mapping[str, Any]], Awaitable[None]]:
    """httpcore's ``trace`` extension calling ``on_sent`` once the request body is written."""

    async def trace(event: str, _info: Mapping[str, Any]) -> None:
        if event.endswith(".send_request_body.complete"):  # http11. or http2.
            try:
                on_sent()
            except Exception as exc:  # a listener's bug never fails the request
                _log.warning(f"request-sent listener failed: {exc!r}")

    return trace


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
