"""The providers' HTTP/1.1 connections: httpx's transport seam on asyncio's streams and h11.

httpx's own transport hands each request to httpcore, whose import brings anyio (its locks and
network backend) and both of httpcore's halves, synchronous and asynchronous: ~125 M
instructions, about a sixth of ``cairn -p``'s start-up before its first request
(benchmarks/README.md, issue 32). A provider speaks plain HTTP/1.1 to one endpoint, so
:class:`ConnectionPool` does what it needs with what an asyncio program has loaded anyway, and
h11 (the same HTTP/1.1 state machine httpcore drives) for the protocol:

- connections kept open per origin and reused, newest first; an idle one the server closed, or
  one idle for :data:`KEEPALIVE_EXPIRY` seconds, is dropped instead; at most ``max_keepalive``
  are kept idle, and at most ``max_connections`` are open at once (a request over the bound
  waits for one, up to the pool timeout);
- httpx's timeouts (connect, write, read for each read, pool) and its exceptions, as its own
  transport raises them (:func:`cairn.llm.transport.request_errors` reads them);
- the ``trace`` extension's events under httpcore's names (``http11.send_request_body.complete``
  tells Recall the request is out);
- TLS with the context it is given; a connection a response was not read to its end, or whose
  request failed or was cancelled, is closed, never reused;
- a request sent on a reused connection that the peer closed (or reset) before one byte of the
  response came back is sent once more, on a new connection, when that is safe: its method is
  idempotent (RFC 9110 9.2.2: ``GET``, ``HEAD``, ``OPTIONS``, ``TRACE``, ``PUT``,
  ``DELETE``), or the pool's ``replayable`` says the owner's request may be sent twice (a model
  request changes nothing; an MCP message other than ``tools/call``). An idle connection the
  peer closed is not reused, but a close still on its way when the next request goes out (a
  server's keep-alive timeout; tinyproxy, which carries one request per connection and closes
  it just after the response without saying ``Connection: close``) is seen only once the
  request is out; curl and browsers send it again, as httpcore and urllib3 do not;
- an HTTP proxy where :class:`~cairn.llm.proxies.ProxyRoutes` names one for the origin: a
  ``CONNECT`` tunnel, then TLS with the origin, for ``https://``; requests in absolute form to
  the proxy for ``http://``. A proxy that cannot be reached, or refuses (``407``, ``403``,
  ``502``...), raises an error naming it (:class:`~cairn.llm.errors.ProxyError`).

HTTP/2 and Unix sockets are not spoken here (the providers use neither); web_fetch keeps
httpx's transport with its checked network backend (:mod:`cairn.tools.web_address`), which
refuses proxies: its address checks must see the address it connects to.
"""

from __future__ import annotations

import asyncio
import collections
import select
import socket
import ssl
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any

import h11

from cairn.llm._httpx import httpx
from cairn.llm.errors import ProxyError, UnreachableError

if TYPE_CHECKING:
    from cairn.llm.proxies import Proxy, ProxyRoutes

__all__ = [
    "IDEMPOTENT_METHODS",
    "KEEPALIVE_EXPIRY",
    "ConnectionPool",
    "Replayable",
    "untrusting_context",
]

KEEPALIVE_EXPIRY = 5.0  # seconds an idle connection is kept (httpx's default)
HAPPY_EYEBALLS_DELAY = 0.25  # seconds before trying a host's next address (anyio's, httpcore's)
READ_SIZE = 64 * 1024  # bytes read at once (httpcore's)
MAX_HEAD_SIZE = 100 * 1024  # bytes of a response's head (httpcore's bound)
DISCONNECTED = "Server disconnected without sending a response."  # httpcore's words
IDEMPOTENT_METHODS = frozenset({b"GET", b"HEAD", b"OPTIONS", b"TRACE", b"PUT", b"DELETE"})

_Origin = tuple[bytes, str, int]
_Trace = Callable[[str, dict[str, Any]], Awaitable[None]]
Replayable = Callable[[httpx.Request], bool]


def untrusting_context() -> ssl.SSLContext:
    """A TLS context that verifies, and trusts no CA: every certificate is refused (for a pool
    given no context, whose endpoint is ``http://``, should TLS ever be attempted)."""
    return ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)


class _Connection:
    """One HTTP/1.1 connection: the streams and the h11 state of its current exchange."""

    def __init__(
        self,
        origin: _Origin,
        reader: asyncio.StreamReader,
        writer: asyncio.StreamWriter,
        forward: Proxy | None = None,
    ):
        self.origin = origin
        self.reader = reader
        self.writer = writer
        self.forward = forward  # the proxy its requests go to in absolute form (http://)
        self.h11 = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_SIZE)
        self.idle_since = 0.0
        self.reused = False  # taken from the idle connections for its current request
        self.answered = False  # a byte of its current response has come back

    def reusable(self, now: float) -> bool:
        """Idle, fresh, and not closed by the server meanwhile (nor sent anything unasked):
        an idle socket with something to read has its end, or bytes no request asked for,
        whether or not the event loop has read them yet (as httpcore checks)."""
        if now - self.idle_since >= KEEPALIVE_EXPIRY or self.writer.is_closing():
            return False
        if self.reader.at_eof() or self.reader._buffer:  # type: ignore[attr-defined]
            return False
        sock = self.writer.get_extra_info("socket")
        return sock is None or not _readable(sock.fileno())

    def close(self) -> None:
        self.writer.close()  # asyncio closes the socket once what is buffered is written

    async def send(
        self, request: httpx.Request, timeouts: dict[str, Any], trace: _Trace | None
    ) -> h11.Response:
        """Write ``request`` (its head, then its body); read the response's head."""
        self.answered = False
        url = request.url
        target, headers = url.raw_path, request.headers.raw
        if self.forward is not None:  # the proxy forwards it: the whole URL, its credentials
            target = str(url.copy_with(fragment=None)).encode("ascii")
            if self.forward.authorization is not None:
                headers = [*headers, (b"Proxy-Authorization", self.forward.authorization)]
        head = h11.Request(method=request.method, target=target, headers=headers)
        await _traced(trace, "http11.send_request_headers", {"request": request})
        parts = [self.h11.send(head)]
        await _traced(trace, "http11.send_request_headers.complete", {})
        await _traced(trace, "http11.send_request_body", {"request": request})
        assert isinstance(request.stream, httpx.AsyncByteStream)
        async for chunk in request.stream:  # a provider's body is a JSON document in memory
            if chunk:
                parts.append(self.h11.send(h11.Data(data=chunk)))
        parts.append(self.h11.send(h11.EndOfMessage()))
        await self._write(b"".join(part for part in parts if part), timeouts.get("write"))
        await _traced(trace, "http11.send_request_body.complete", {})
        await _traced(trace, "http11.receive_response_headers", {"request": request})
        while True:
            event = await self._next_event(timeouts.get("read"))
            if isinstance(event, h11.InformationalResponse):
                continue  # e.g. 100 Continue: the final response follows
            assert isinstance(event, h11.Response)
            await _traced(trace, "http11.receive_response_headers.complete", {})
            return event

    async def body(self, read_timeout: float | None) -> AsyncIterator[bytes]:
        while True:
            event = await self._next_event(read_timeout)
            if isinstance(event, h11.Data):
                yield bytes(event.data)
            elif isinstance(event, h11.EndOfMessage):
                return

    def finish(self) -> bool:
        """After a whole response: ready for the next request (True), or to be closed."""
        if self.h11.our_state is h11.DONE and self.h11.their_state is h11.DONE:
            self.h11.start_next_cycle()
            return True
        return False

    async def _write(self, data: bytes, timeout: float | None) -> None:
        """Write the request, head and body in one go (one system call, one TCP segment when it
        fits, where writing them apart costs two)."""
        try:
            async with asyncio.timeout(timeout):
                self.writer.write(data)
                await self.writer.drain()
        except TimeoutError:
            raise httpx.WriteTimeout("timed out writing the request") from None
        except OSError as exc:
            raise httpx.WriteError(str(exc) or type(exc).__name__) from exc

    async def _next_event(self, timeout: float | None) -> Any:
        while True:
            try:
                event = self.h11.next_event()
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc
            if event is not h11.NEED_DATA:
                if isinstance(event, h11.ConnectionClosed):
                    raise httpx.RemoteProtocolError(DISCONNECTED)
                return event
            try:
                async with asyncio.timeout(timeout):
                    data = await self.reader.read(READ_SIZE)
            except TimeoutError:
                raise httpx.ReadTimeout("timed out reading the response") from None
            except OSError as exc:
                raise httpx.ReadError(str(exc) or type(exc).__name__) from exc
            if not data and self.h11.their_state is h11.SEND_RESPONSE:
                raise httpx.RemoteProtocolError(DISCONNECTED)
            self.answered = self.answered or bool(data)
            try:
                self.h11.receive_data(data)
            except h11.RemoteProtocolError as exc:
                raise httpx.RemoteProtocolError(str(exc)) from exc


async def _through(
    proxy: Proxy, origin: _Origin, tls: ssl.SSLContext | None, timeout: float | None
) -> _Connection:
    """A connection to ``origin`` through ``proxy``: to the proxy itself for ``http://`` (its
    requests then go in absolute form), a ``CONNECT`` tunnel and TLS for ``https://``."""
    _, host, port = origin
    try:
        async with asyncio.timeout(timeout):
            reader, writer = await asyncio.open_connection(
                proxy.host, proxy.port, happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY, limit=READ_SIZE
            )
    except TimeoutError:
        raise httpx.ConnectTimeout(f"timed out connecting to {proxy.named()}") from None
    except OSError as exc:
        raise UnreachableError(
            f"cannot connect to {proxy.named()}: {_refused_why(exc)}. Check the proxy URL."
        ) from exc
    if tls is None:
        return _Connection(origin, reader, writer, forward=proxy)
    authority = _authority(host, port)
    try:
        async with asyncio.timeout(timeout):
            await _tunnel(reader, writer, proxy, authority)
            await writer.start_tls(tls, server_hostname=host)
    except TimeoutError:
        writer.close()
        raise httpx.ConnectTimeout(
            f"timed out opening a tunnel to {authority} through {proxy.named()}"
        ) from None
    except OSError as exc:  # the origin's certificate, or the proxy hung up
        writer.close()
        raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
    except BaseException:
        writer.close()
        raise
    return _Connection(origin, reader, writer)


async def _tunnel(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, proxy: Proxy, authority: str
) -> None:
    """Ask ``proxy`` for a tunnel to ``authority`` (``CONNECT host:port``); return once it is
    open, raise :class:`~cairn.llm.errors.ProxyError` when the proxy refuses."""
    connection = h11.Connection(h11.CLIENT, max_incomplete_event_size=MAX_HEAD_SIZE)
    headers = [(b"Host", authority.encode())]
    if proxy.authorization is not None:
        headers.append((b"Proxy-Authorization", proxy.authorization))
    request = h11.Request(method=b"CONNECT", target=authority.encode(), headers=headers)
    writer.write(connection.send(request) + connection.send(h11.EndOfMessage()))
    await writer.drain()
    try:
        while True:
            event = connection.next_event()
            if event is h11.NEED_DATA:
                data = await reader.read(READ_SIZE)
                if not data:
                    raise ProxyError(
                        f"{proxy.named()} closed the connection instead of opening a tunnel "
                        f"to {authority}",
                        retryable=True,
                    )
                connection.receive_data(data)
            elif isinstance(event, h11.Response):
                break
            elif not isinstance(event, h11.InformationalResponse):
                raise h11.RemoteProtocolError(f"unexpected {type(event).__name__}")
    except h11.RemoteProtocolError as exc:
        raise ProxyError(
            f"{proxy.named()} did not answer CONNECT as an HTTP proxy does ({exc})"
        ) from None
    if not 200 <= event.status_code < 300:
        raise _refusal(proxy, event.status_code, event.reason, authority)


def _refusal(proxy: Proxy, status: int, reason: bytes, authority: str) -> ProxyError:
    """The proxy's refusal to carry a request to ``authority``, in words a user can act on."""
    said = f"HTTP {status} {reason.decode('latin-1').strip()}".strip()
    if status in (401, 407):  # tinyproxy answers a CONNECT with bad credentials 401
        fix = (
            "it did not accept the user and password in the proxy URL"
            if proxy.authorization is not None
            else "it wants a user and password (http://user:password@host:port)"
        )
        return ProxyError(f"{proxy.named()} refused the request ({said}): {fix}", status=status)
    if status == 403:
        return ProxyError(
            f"{proxy.named()} refused to connect to {authority} ({said}): its rules do not "
            "allow this endpoint",
            status=status,
        )
    return ProxyError(
        f"{proxy.named()} could not connect to {authority} ({said})",
        status=status,
        retryable=status >= 500,
    )


def _named(exc: httpx.TransportError, proxy: Proxy) -> httpx.TransportError:
    """``exc``, naming the proxy a request in absolute form went through (one that refuses a
    request may hang up before reading its body: the reset is all the client sees)."""
    return type(exc)(f"through {proxy.named()}: {exc}")


def _authority(host: str, port: int) -> str:
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _refused_why(exc: OSError) -> str:
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused (nothing listens there)"
    if isinstance(exc, socket.gaierror):
        return "the host name does not resolve"
    return str(exc) or type(exc).__name__


def _readable(fd: int) -> bool:
    if hasattr(select, "poll"):
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(0))
    return bool(select.select([fd], [], [], 0)[0])  # pragma: no cover - without poll()


async def _traced(trace: _Trace | None, name: str, info: dict[str, Any]) -> None:
    if trace is not None:
        if not name.endswith(".complete"):
            name += ".started"
        await trace(name, info)


class _ResponseBody(httpx.AsyncByteStream):
    """A response's body, read from its connection; the connection goes back to the pool once
    the body has ended, and is closed if the body is closed before that."""

    def __init__(self, pool: ConnectionPool, connection: _Connection, read_timeout: float | None):
        self._pool = pool
        self._connection: _Connection | None = connection
        self._read_timeout = read_timeout

    async def __aiter__(self) -> AsyncIterator[bytes]:
        connection = self._connection
        if connection is None:
            raise httpx.StreamClosed()
        try:
            async for chunk in connection.body(self._read_timeout):
                yield chunk
        except httpx.TransportError as exc:
            self._end(reuse=False)
            if connection.forward is None:
                raise
            raise _named(exc, connection.forward) from exc
        except BaseException:
            self._end(reuse=False)
            raise
        self._end(reuse=True)

    async def aclose(self) -> None:
        self._end(reuse=False)  # a no-op once the body has ended

    def _end(self, *, reuse: bool) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            self._pool._release(connection, reuse=reuse and connection.finish())


class ConnectionPool(httpx.AsyncBaseTransport):
    """HTTP/1.1 connections for one client (see the module's docstring).

    ``tls`` is the context for ``https://`` origins; without one, a TLS connection verifies
    against no CA at all (every certificate is refused), as for an ``http://`` endpoint's
    client, which should never need one. ``proxies`` names the proxy (or none) for each origin.
    ``replayable`` says whether a request of another method than :data:`IDEMPOTENT_METHODS` may
    be sent twice, should a reused connection be closed under it (none may by default).
    """

    def __init__(
        self,
        *,
        max_connections: int,
        max_keepalive: int,
        tls: ssl.SSLContext | None = None,
        proxies: ProxyRoutes | None = None,
        clock: Callable[[], float] = time.monotonic,
        replayable: Replayable | None = None,
    ) -> None:
        self._max_connections = max_connections
        self._max_keepalive = max_keepalive
        self._tls = tls
        self._proxies = proxies
        self._clock = clock
        self._replayable = replayable
        self._idle: collections.OrderedDict[_Connection, None] = collections.OrderedDict()
        self._open = 0  # connections open, idle or in use, and being opened
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()
        self._closed = False

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        scheme = request.url.raw_scheme
        if scheme not in (b"http", b"https"):
            raise httpx.UnsupportedProtocol(
                f"Request URL has an unsupported protocol '{scheme.decode()}://'."
            )
        port = request.url.port or (443 if scheme == b"https" else 80)
        origin: _Origin = (scheme, request.url.host, port)
        timeouts = request.extensions.get("timeout", {})
        trace = request.extensions.get("trace")
        connection = await self._acquire(origin, timeouts)
        while True:
            try:
                head = await connection.send(request, timeouts, trace)
                break
            except httpx.TransportError as exc:
                self._release(connection, reuse=False)
                if self._hung_up(connection, exc) and self._may_replay(request):
                    connection = await self._acquire(origin, timeouts, idle=False)
                    continue
                if connection.forward is None:
                    raise
                raise _named(exc, connection.forward) from exc
            except BaseException:
                self._release(connection, reuse=False)
                raise
        if connection.forward is not None and head.status_code == 407:
            self._release(connection, reuse=False)
            raise _refusal(connection.forward, 407, head.reason, _authority(request.url.host, port))
        return httpx.Response(
            head.status_code,
            headers=head.headers.raw_items(),
            stream=_ResponseBody(self, connection, timeouts.get("read")),
            extensions={"http_version": b"HTTP/1.1", "reason_phrase": bytes(head.reason)},
        )

    @staticmethod
    def _hung_up(connection: _Connection, exc: httpx.TransportError) -> bool:
        """The peer closed (or reset) a reused connection before a byte of the response: the
        close of an idle connection that crossed the request (not a timeout: a peer that is
        slow to answer may be acting on the request)."""
        return (
            connection.reused
            and not connection.answered
            and isinstance(exc, httpx.ReadError | httpx.WriteError | httpx.RemoteProtocolError)
        )

    def _may_replay(self, request: httpx.Request) -> bool:
        """``request`` may be sent again: its body is in memory, and its method idempotent or
        the owner's ``replayable`` says so."""
        if not isinstance(request.stream, httpx.ByteStream):
            return False
        if request.method.encode() in IDEMPOTENT_METHODS:
            return True
        return self._replayable is not None and self._replayable(request)

    async def aclose(self) -> None:
        self._closed = True
        for connection in self._idle:
            connection.close()
            self._open -= 1
        self._idle.clear()

    async def _acquire(
        self, origin: _Origin, timeouts: dict[str, Any], *, idle: bool = True
    ) -> _Connection:
        """A connection to ``origin``: an idle one that is still open (unless not ``idle``), or
        a new one once the bound on open connections allows."""
        if self._closed:
            raise RuntimeError("the connection pool is closed")
        now = self._clock()
        for connection in reversed(self._idle) if idle else ():  # the newest: likeliest open
            if connection.origin == origin:
                del self._idle[connection]
                if connection.reusable(now):
                    connection.reused = True
                    return connection
                connection.close()
                self._open -= 1
                break
        self._expire(now)
        if self._open >= self._max_connections:
            if self._idle:  # another origin's idle connection makes room
                self._idle.popitem(last=False)[0].close()
                self._open -= 1
            else:
                await self._wait_for_room(timeouts.get("pool"))
                return await self._acquire(origin, timeouts, idle=idle)
        self._open += 1
        try:
            return await self._connect(origin, timeouts.get("connect"))
        except BaseException:
            self._open -= 1
            self._wake()
            raise

    async def _wait_for_room(self, timeout: float | None) -> None:
        waiter = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        try:
            async with asyncio.timeout(timeout):
                await waiter
        except BaseException as exc:
            if waiter in self._waiters:
                self._waiters.remove(waiter)
            elif waiter.done() and not waiter.cancelled():
                self._wake()  # woken, then cancelled or timed out: the room goes to the next
            if isinstance(exc, TimeoutError):
                raise httpx.PoolTimeout("timed out waiting for a connection") from None
            raise

    async def _connect(self, origin: _Origin, timeout: float | None) -> _Connection:
        scheme, host, port = origin
        tls = None
        if scheme == b"https":
            tls = self._tls if self._tls is not None else untrusting_context()
        if self._proxies is not None:
            proxy = self._proxies.for_origin(scheme.decode(), host, port)
            if proxy is not None:
                return await _through(proxy, origin, tls, timeout)
        try:
            async with asyncio.timeout(timeout):
                reader, writer = await asyncio.open_connection(
                    host,
                    port,
                    ssl=tls,
                    server_hostname=host if tls is not None else None,
                    happy_eyeballs_delay=HAPPY_EYEBALLS_DELAY,
                    limit=READ_SIZE,
                )
        except TimeoutError:
            raise httpx.ConnectTimeout(f"timed out connecting to {host}:{port}") from None
        except OSError as exc:  # refused, unresolvable, a TLS failure
            raise httpx.ConnectError(str(exc) or type(exc).__name__) from exc
        return _Connection(origin, reader, writer)

    def _release(self, connection: _Connection, *, reuse: bool) -> None:
        if reuse and not self._closed:
            connection.idle_since = self._clock()
            self._idle[connection] = None
            while len(self._idle) > self._max_keepalive:
                self._idle.popitem(last=False)[0].close()
                self._open -= 1
        else:
            connection.close()
            self._open -= 1
        self._wake()

    def _expire(self, now: float) -> None:
        """Close the connections idle too long (the oldest come first; no socket is polled)."""
        while self._idle:
            oldest = next(iter(self._idle))
            if now - oldest.idle_since < KEEPALIVE_EXPIRY:
                return
            del self._idle[oldest]
            oldest.close()
            self._open -= 1

    def _wake(self) -> None:
        while self._waiters:
            waiter = self._waiters.popleft()
            if not waiter.done():
                waiter.set_result(None)
                return
