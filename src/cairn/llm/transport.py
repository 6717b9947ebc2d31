"""HTTP plumbing shared by the providers: connection pools, TLS, error bodies, SSE reading.

Providers differ in their wire format only; how they reach the endpoint, how a failed response
becomes a :class:`ProviderError` and how an event stream is read are the same for all of them.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import json
import socket
import ssl
import zlib
from collections.abc import AsyncIterator, Mapping
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.llm._httpx import httpx
from cairn.llm.certificates import extra_ca_problem, verifying_context
from cairn.llm.connections import ConnectionPool
from cairn.llm.context_window import context_overflow
from cairn.llm.errors import (
    ContextOverflowError,
    InvalidStreamError,
    ProviderError,
    UnreachableError,
)
from cairn.llm.retry import is_retryable_status

if TYPE_CHECKING:
    from cairn.llm.proxies import ProxyRoutes

__all__ = [
    "DONE_DRAIN_TIMEOUT",
    "MAX_CONNECTIONS",
    "MAX_KEEPALIVE_CONNECTIONS",
    "ClientPools",
    "any_model_request",
    "deadline_error",
    "drain",
    "http_error",
    "request_errors",
    "retry_after_seconds",
    "sse_data",
    "timed",
    "tls_context",
    "untrusted_advice",
]

DONE_DRAIN_TIMEOUT = 1.0  # seconds to wait for the end of the body after the final event
MAX_CONNECTIONS = 200  # open connections to the endpoint, per pool
MAX_KEEPALIVE_CONNECTIONS = 64  # idle connections kept open (5 s at most, httpx's expiry), per pool
MAX_ERROR_CHARS = 500  # of a non-JSON error body quoted in the message
_T = TypeVar("_T")


class ClientPools:
    """A provider's HTTP clients, created on first use, one per slice of the sessions.

    A connection pool checks its idle connections whenever a request starts (httpcore's, before
    :mod:`cairn.llm.connections`, polled each one and counted them all per connection, which
    for 50 concurrent sessions cost more CPU than the rest of a turn). Each of ``pools``
    clients serves the sessions whose id hashes to it, which keeps its connection list short; a
    session always uses the same client, so its connection stays warm. Requests without a
    session id use the first client.

    Each client sends over a :class:`~cairn.llm.connections.ConnectionPool` (HTTP/1.1 on
    asyncio's streams, without httpcore and anyio). TLS: an ``http://`` endpoint's pool has no
    context (building one costs start-up time; should TLS ever be attempted, every certificate is
    refused). For ``https://`` the verifying context is built in a worker thread as soon as the
    provider exists (OpenSSL releases the GIL while it parses the CA bundle), and the first
    request waits for it only if it is not ready yet. The context trusts what ``SSL_CERT_FILE``
    or ``SSL_CERT_DIR`` name when set (httpx's ``trust_env``), else certifi's bundle, and the
    file ``NODE_EXTRA_CA_CERTS`` names besides (:mod:`cairn.llm.certificates`; one context,
    built once, serves every provider and MCP server of the process).

    ``proxies`` is the HTTP proxy in front of the endpoint (:mod:`cairn.llm.proxies`), None
    when none is set. A request a reused connection was closed under before any answer is sent
    again at once on a new connection, whatever its method (:func:`any_model_request`).
    """

    def __init__(
        self,
        base_url: str,
        *,
        timeout: httpx.Timeout,
        pools: int,
        client: httpx.AsyncClient | None,
        proxies: ProxyRoutes | None = None,
    ) -> None:
        self._base_url = base_url
        self._timeout = timeout
        self._proxies = proxies
        self.owned = client is None
        count = 1 if client is not None else max(1, pools)
        self._clients: list[httpx.AsyncClient | None] = [client, *([None] * (count - 1))]
        self._tls = None if client is not None else tls_context(base_url)

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
                # Each pool keeps the limits one pool had: a pool never gets fewer connections
                # than its sessions need at once (no queueing behind an unlucky hash).
                pool = ConnectionPool(
                    max_connections=MAX_CONNECTIONS,
                    max_keepalive=MAX_KEEPALIVE_CONNECTIONS,
                    tls=tls,
                    proxies=self._proxies,
                    replayable=any_model_request,
                )
                client = httpx.AsyncClient(timeout=self._timeout, transport=pool, trust_env=False)
                self._clients[index] = client
        return client

    async def aclose(self) -> None:
        if not self.owned:
            return
        for client in self._clients:
            if client is not None:
                await client.aclose()


def any_model_request(_request: httpx.Request) -> bool:
    """A request to the model endpoint may be sent twice: it changes nothing there (the retry
    policy sends a dropped one again anyway, after a pause, :mod:`cairn.llm.retry`)."""
    return True


def tls_context(base_url: str) -> concurrent.futures.Future[ssl.SSLContext | None]:
    """The TLS context for connections to ``base_url`` (see :class:`ClientPools`): none for
    ``http://``; for ``https://`` the process's shared verifying context
    (:func:`cairn.llm.certificates.verifying_context`: ``SSL_CERT_FILE`` / ``SSL_CERT_DIR``
    replace the CA bundle, as in httpx, and ``NODE_EXTRA_CA_CERTS`` adds to it)."""
    if base_url.lower().startswith("https:"):
        return verifying_context()  # type: ignore[return-value]
    future: concurrent.futures.Future[ssl.SSLContext | None] = concurrent.futures.Future()
    future.set_result(None)
    return future


def http_error(
    status: int, raw: bytes, headers: Mapping[str, str], *, advice: str = ""
) -> ProviderError:
    """A failed response as a :class:`ProviderError`, with the endpoint's own message and then
    ``advice`` (what to check, as a sentence).

    Both wire formats put the message at ``error.message`` (OpenAI ``{"error": {...}}``,
    Anthropic ``{"type": "error", "error": {...}}``); anything else is quoted as text.
    """
    message = raw.decode("utf-8", "replace").strip()[:MAX_ERROR_CHARS]
    data: Any = None
    with contextlib.suppress(ValueError, RecursionError):
        data = json.loads(raw)
        err = data.get("error") if isinstance(data, dict) else None
        if isinstance(err, dict) and err.get("message"):
            message = str(err["message"])
        elif isinstance(err, str):
            message = err
    message = message or "no details"
    overflow = context_overflow(status, data, message)
    if overflow is not None:  # advice about keys and model names does not apply
        return ContextOverflowError(
            f"HTTP {status}: {message}",
            status=status,
            window=overflow.window,
            prompt_tokens=overflow.prompt_tokens,
        )
    if advice:
        message += (" " if message.endswith((".", "!", "?")) else ". ") + advice
    error = ProviderError(
        f"HTTP {status}: {message}",
        status=status,
        retryable=is_retryable_status(status),
    )
    error.retry_after = retry_after_seconds(headers.get("retry-after"))
    return error


def retry_after_seconds(value: str | None) -> float | None:
    """A ``Retry-After`` header in seconds (``None`` when absent or not a number)."""
    if value is None:
        return None
    try:
        seconds = float(value)
    except ValueError:
        return None
    return max(0.0, seconds) if seconds == seconds else None  # NaN is not a delay


@contextlib.asynccontextmanager
async def request_errors(url: str, setting: str) -> AsyncIterator[None]:
    """Turn httpx's transport failures during one attempt into provider errors.

    ``setting`` names where the base URL came from, for the message when nothing answers there.
    """
    try:
        yield
    except (httpx.UnsupportedProtocol, httpx.InvalidURL) as exc:
        raise ProviderError(f"invalid model endpoint URL {url!r} ({setting}): {exc}") from exc
    except httpx.ConnectError as exc:
        raise UnreachableError(
            f"cannot connect to {url}: {_connect_failure(exc)}. Check the endpoint URL ({setting})."
        ) from exc
    except (httpx.ConnectTimeout, httpx.PoolTimeout) as exc:
        raise ProviderError(f"cannot reach {url}: {exc}", retryable=True) from exc
    except httpx.ReadTimeout as exc:
        raise InvalidStreamError(f"the model stopped responding: {exc}", kind="dropped") from exc
    except (httpx.RemoteProtocolError, httpx.ReadError, httpx.DecodingError) as exc:
        raise InvalidStreamError(f"the stream was cut off: {exc}", kind="dropped") from exc
    except httpx.TransportError as exc:  # write errors, proxies, other network failures
        raise ProviderError(f"the request to {url} failed: {exc}", retryable=True) from exc


def untrusted_advice(error: ssl.SSLCertVerificationError) -> str:
    """OpenSSL's reason a certificate is not trusted, and where the CA of a TLS-intercepting
    proxy goes (saying why ``NODE_EXTRA_CA_CERTS`` was not added, when it was set and was not)."""
    advice = (
        f"{error.verify_message or error}; behind a TLS-intercepting proxy, name its CA in "
        "NODE_EXTRA_CA_CERTS (added to the bundle), SSL_CERT_FILE or SSL_CERT_DIR"
    )
    problem = extra_ca_problem()
    return f"{advice}; {problem}" if problem else advice


def _connect_failure(exc: BaseException) -> str:
    """Why a connection failed, in words: refused, a name that does not resolve, or the OS's."""
    cause: BaseException | None = exc
    while cause is not None:
        if isinstance(cause, ssl.SSLCertVerificationError):
            return f"its certificate is not trusted ({untrusted_advice(cause)})"
        if isinstance(cause, socket.gaierror):
            return "the host name does not resolve"
        if isinstance(cause, ConnectionRefusedError):
            return "connection refused (nothing listens there)"
        cause = cause.__cause__ or cause.__context__
    text = str(exc)
    if "Name or service not known" in text or "nodename nor servname" in text:
        return "the host name does not resolve"
    if "Connection refused" in text:
        return "connection refused (nothing listens there)"
    return text or type(exc).__name__


async def timed(
    events: AsyncIterator[_T], *, idle: float, deadline: float, started: float
) -> AsyncIterator[_T]:
    """``events``, failing when none comes for ``idle`` s or ``deadline`` s after ``started``.

    ``started`` is on the event loop's clock. The limits apply while waiting for the next event
    only, never while the consumer handles one. Keep-alive comments are not events, so a stream
    of nothing else ends after ``idle`` seconds.
    """
    loop = asyncio.get_running_loop()
    ends_at = started + deadline
    try:
        while True:
            try:
                async with asyncio.timeout_at(min(loop.time() + idle, ends_at)) as scope:
                    item = await anext(events)
            except StopAsyncIteration:
                return
            except TimeoutError:
                if not scope.expired():
                    raise
                if loop.time() >= ends_at:
                    raise deadline_error(deadline) from None
                raise InvalidStreamError(
                    f"the model sent nothing for {idle:g} s (model.generationConfig.timeout)",
                    kind="idle",
                ) from None
            yield item
    finally:
        closer = getattr(events, "aclose", None)
        if closer is not None:
            await closer()


def deadline_error(deadline: float) -> ProviderError:
    """An attempt that ran past its deadline; not retried, since it would run as long again."""
    return ProviderError(
        f"the model's answer took longer than {deadline:g} s "
        "(model.generationConfig.requestDeadline)"
    )


async def sse_data(response: httpx.Response) -> AsyncIterator[tuple[str, str]]:
    """The ``(event, data)`` of each server-sent event with data, in order."""
    from httpx_sse import EventSource

    async for sse in EventSource(response).aiter_sse():
        data = sse.data.strip()
        if data:
            yield sse.event, data


async def drain(events: AsyncIterator[Any]) -> None:
    """Read the end of the body after the final event so the connection goes back to the pool.

    An HTTP/1.1 connection whose response was not read to the end is closed, and every request
    would then pay for a new connection.
    """
    with contextlib.suppress(TimeoutError, httpx.TransportError):
        async with asyncio.timeout(DONE_DRAIN_TIMEOUT):
            async for _ in events:
                pass
