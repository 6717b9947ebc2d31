"""The sockets under httpx's connection pool: asyncio protocols instead of anyio streams.

httpcore reaches the network through a backend (``httpcore.AsyncNetworkBackend``); its default
wraps each socket in an anyio stream, and every read and write then enters an anyio cancel scope,
asks sniffio which event loop runs, and, to tell whether an idle pooled connection was closed by
the server, builds the stream's table of attributes to find its socket. Under the daemon's load
that is several percent of a turn's CPU. This backend speaks to asyncio directly: a protocol
buffers what arrives, a read waits on one future with one timer, a write hands the bytes to the
transport and waits only when the transport asks it to, and the readability check polls the
socket it keeps. What goes over the wire, the timeouts and the errors raised (httpcore's
``ConnectError``, ``ReadTimeout``, ...) are those of the default backend.
"""

from __future__ import annotations

import asyncio
import select
import socket
import ssl
from collections.abc import Iterable
from typing import Any

import httpcore

from cairn.llm._httpx import httpx

__all__ = ["AsyncioBackend", "AsyncioTransport"]

READ_HIGH_WATER = 256 * 1024  # buffered bytes at which the socket stops being read
READ_LOW_WATER = 64 * 1024  # ... and is read again once a reader took it below this

_SocketOption = (
    tuple[int, int, int] | tuple[int, int, bytes | bytearray] | tuple[int, int, None, int]
)


class _Protocol(asyncio.Protocol):
    """What one connection received, and whether its writer must wait."""

    def __init__(self) -> None:
        self.transport: asyncio.Transport | None = None
        self.buffer = bytearray()
        self.closed = False  # the peer ended its stream, or the connection was lost
        self.lost = False  # the connection is gone: nothing more can be written
        self.error: BaseException | None = None
        self.reading_paused = False
        self.writing_paused = False
        self._data_waiter: asyncio.Future[None] | None = None
        self._drain_waiter: asyncio.Future[None] | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self.transport = transport  # type: ignore[assignment]

    def data_received(self, data: bytes) -> None:
        self.buffer += data
        if len(self.buffer) >= READ_HIGH_WATER and not self.reading_paused:
            self.reading_paused = True
            assert self.transport is not None
            self.transport.pause_reading()
        self._wake_reader()

    def eof_received(self) -> bool:
        self.closed = True
        self._wake_reader()
        # Half-closed, as anyio keeps it: the request may still be written (a server that
        # answers early); asyncio's TLS transports cannot stay open, and say so if asked.
        assert self.transport is not None
        return self.transport.get_extra_info("sslcontext") is None

    def connection_lost(self, exc: Exception | None) -> None:
        self.closed = True
        self.lost = True
        self.error = exc
        self._wake_reader()
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def pause_writing(self) -> None:
        self.writing_paused = True

    def resume_writing(self) -> None:
        self.writing_paused = False
        waiter = self._drain_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def _wake_reader(self) -> None:
        waiter = self._data_waiter
        if waiter is not None and not waiter.done():
            waiter.set_result(None)

    def take(self, max_bytes: int) -> bytes:
        buffer = self.buffer
        if len(buffer) <= max_bytes:
            data = bytes(buffer)
            buffer.clear()
        else:
            data = bytes(buffer[:max_bytes])
            del buffer[:max_bytes]
        if self.reading_paused and len(buffer) < READ_LOW_WATER and not self.closed:
            self.reading_paused = False
            assert self.transport is not None
            self.transport.resume_reading()
        return data

    async def wait_for_data(self, timeout: float | None) -> None:
        self._data_waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await _within(waiter, timeout)
        finally:
            self._data_waiter = None

    async def drain(self, timeout: float | None) -> None:
        self._drain_waiter = waiter = asyncio.get_running_loop().create_future()
        try:
            await _within(waiter, timeout)
        finally:
            self._drain_waiter = None


async def _within(waiter: asyncio.Future[None], timeout: float | None) -> None:
    """Wait for ``waiter``; ``TimeoutError`` after ``timeout`` seconds (None: no limit)."""
    if timeout is None:
        await waiter
        return
    timer = asyncio.get_running_loop().call_later(timeout, _expire, waiter)
    try:
        await waiter
    finally:
        timer.cancel()


def _expire(waiter: asyncio.Future[None]) -> None:
    if not waiter.done():
        waiter.set_exception(TimeoutError())


class AsyncioStream(httpcore.AsyncNetworkStream):
    def __init__(self, transport: asyncio.Transport, protocol: _Protocol) -> None:
        self._transport = transport
        self._protocol = protocol
        self._socket: socket.socket | None = transport.get_extra_info("socket")

    async def read(self, max_bytes: int, timeout: float | None = None) -> bytes:
        protocol = self._protocol
        if not protocol.buffer and not protocol.closed:
            try:
                await protocol.wait_for_data(timeout)
            except TimeoutError:
                raise httpcore.ReadTimeout("timed out") from None
        if protocol.buffer:
            return protocol.take(max_bytes)
        if protocol.error is not None:
            raise httpcore.ReadError(str(protocol.error) or type(protocol.error).__name__)
        return b""  # the peer ended the stream

    async def write(self, buffer: bytes, timeout: float | None = None) -> None:
        if not buffer:
            return
        protocol = self._protocol
        if protocol.lost or self._transport.is_closing():
            raise httpcore.WriteError(str(protocol.error or "the connection is closed"))
        self._transport.write(buffer)
        if protocol.writing_paused:
            try:
                await protocol.drain(timeout)
            except TimeoutError:
                raise httpcore.WriteTimeout("timed out") from None
            if protocol.error is not None:
                raise httpcore.WriteError(str(protocol.error))

    async def aclose(self) -> None:
        self._transport.close()

    async def start_tls(
        self,
        ssl_context: ssl.SSLContext,
        server_hostname: str | None = None,
        timeout: float | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport = await loop.start_tls(
                    self._transport,
                    self._protocol,
                    ssl_context,
                    server_hostname=server_hostname,
                    ssl_handshake_timeout=timeout,
                )
        except TimeoutError:
            self._transport.abort()
            raise httpcore.ConnectTimeout("the TLS handshake timed out") from None
        except (OSError, ssl.SSLError) as exc:
            self._transport.abort()
            raise httpcore.ConnectError(str(exc)) from exc
        if transport is None:
            raise httpcore.ConnectError("the connection closed during the TLS handshake")
        self._protocol.transport = transport
        return AsyncioStream(transport, self._protocol)

    def get_extra_info(self, info: str) -> Any:
        if info == "is_readable":
            return self._protocol.closed or bool(self._protocol.buffer) or _readable(self._socket)
        if info == "ssl_object":
            return self._transport.get_extra_info("ssl_object")
        if info == "client_addr":
            return self._transport.get_extra_info("sockname")
        if info == "server_addr":
            return self._transport.get_extra_info("peername")
        if info == "socket":
            return self._socket
        return None


def _readable(sock: socket.socket | None) -> bool:
    """Whether the kernel has data or an end of stream for ``sock`` (httpcore's own check)."""
    if sock is None or sock.fileno() < 0:
        return True
    poller = select.poll()
    poller.register(sock, select.POLLIN)
    return bool(poller.poll(0))


class AsyncioBackend(httpcore.AsyncNetworkBackend):
    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[_SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        local = None if local_address is None else (local_address, 0)
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_connection(
                    _Protocol, host, port, local_addr=local
                )
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {host}:{port} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return self._stream(transport, protocol, socket_options)

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[_SocketOption] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        loop = asyncio.get_running_loop()
        try:
            async with asyncio.timeout(timeout):
                transport, protocol = await loop.create_unix_connection(_Protocol, path)
        except TimeoutError:
            raise httpcore.ConnectTimeout(f"connecting to {path} timed out") from None
        except OSError as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        return self._stream(transport, protocol, socket_options)

    @staticmethod
    def _stream(
        transport: asyncio.BaseTransport,
        protocol: asyncio.BaseProtocol,
        socket_options: Iterable[_SocketOption] | None,
    ) -> AsyncioStream:
        stream = AsyncioStream(transport, protocol)  # type: ignore[arg-type]
        sock = stream.get_extra_info("socket")
        for option in socket_options or ():
            sock.setsockopt(*option)
        return stream

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


class AsyncioTransport(httpx.AsyncHTTPTransport):
    """httpx's HTTP/1.1 transport (no proxies, no HTTP/2) over :class:`AsyncioBackend`."""

    def __init__(self, ssl_context: ssl.SSLContext, limits: httpx.Limits) -> None:
        # httpx's own __init__ only builds this pool, with its default backend; the request
        # and error mapping around the pool is inherited.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=ssl_context,
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            http1=True,
            http2=False,
            network_backend=AsyncioBackend(),
        )
