"""A loopback HTTP/1.1 server that hangs up on a kept connection as the next request arrives:
the race a keep-alive client meets behind tinyproxy or at a server's keep-alive timeout."""

from __future__ import annotations

import asyncio
import socket
import struct
from typing import Self

__all__ = ["OneRequestServer", "SlowClosingServer"]


class _LoopbackServer:
    """An asyncio server on a loopback port, serving each connection with :meth:`_serve`."""

    def __init__(self) -> None:
        self.connections = 0
        self.url = ""
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Self:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/messages"
        return self

    async def __aexit__(self, *_exc: object) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        raise NotImplementedError


async def _read_request(reader: asyncio.StreamReader, first: bytes = b"") -> tuple[bytes, bytes]:
    """One request: (its request line, its body)."""
    head = first + await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    return head.split(b"\r\n", 1)[0], await reader.readexactly(length)


class OneRequestServer(_LoopbackServer):
    """Like tinyproxy: each connection carries one request, answered as HTTP/1.1 without
    ``Connection: close`` (so the client keeps it), then is closed. The close is held back
    until the next request arrives on it, the moment of reuse (the race a proxy's slow close,
    or a server's keep-alive timeout, leaves open): ``read`` reads that request first (the
    client sees the end of the stream), else the connection is reset.
    With ``answer_first`` False no request is ever answered."""

    def __init__(self, *, read: bool = True, answer_first: bool = True) -> None:
        super().__init__()
        self.read = read
        self.answer_first = answer_first
        self.requests: list[bytes] = []  # the request lines it read
        self.hung_up_on: list[bytes] = []  # those it read and closed the connection on
        self.bodies: list[bytes] = []  # the bodies of the requests it read

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await self._request(reader)
            if self.answer_first:
                writer.write(b"HTTP/1.1 202 Accepted\r\nContent-Length: 8\r\n\r\nAccepted")
                await writer.drain()
                first = await reader.readexactly(1)  # the next request's first byte: the reuse
                if self.read:
                    self.hung_up_on.append(await self._request(reader, first))
                else:  # closed with lingering off: the kernel resets the connection
                    sock = writer.get_extra_info("socket")
                    sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    writer.transport.abort()
                    return
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()

    async def _request(self, reader: asyncio.StreamReader, first: bytes = b"") -> bytes:
        """Read a request; its request line."""
        request_line, body = await _read_request(reader, first)
        self.requests.append(request_line)
        self.bodies.append(body)
        return request_line


class SlowClosingServer(_LoopbackServer):
    """Answers one request per connection with a chunked body, then closes the connection
    ``linger`` seconds later (as a server told ``Connection: close`` may). tinyproxy, which
    asks for that close, forwards a body without ``Content-Length`` until the server has
    closed, and only then closes its client's connection, without having said it would: the
    client, which has the whole answer, sends its next request meanwhile, and tinyproxy hangs
    up on it."""

    def __init__(self, linger: float = 0.3) -> None:
        super().__init__()
        self.linger = linger

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        try:
            await _read_request(reader)
            writer.write(
                b"HTTP/1.1 202 Accepted\r\nTransfer-Encoding: chunked\r\n\r\n"
                b"8\r\nAccepted\r\n0\r\n\r\n"
            )
            await writer.drain()
            await asyncio.sleep(self.linger)
        except (asyncio.IncompleteReadError, ConnectionError, asyncio.CancelledError):
            pass
        finally:
            writer.close()
