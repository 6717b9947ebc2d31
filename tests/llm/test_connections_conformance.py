"""The providers' HTTP/1.1 connections (:mod:`cairn.llm.connections`) against real sockets.

Every case runs through httpx's default transport (httpcore on anyio streams) too: what a
request sends, receives and raises must be the same over both.
"""

from __future__ import annotations

import asyncio
import contextlib
import shutil
import socket
import ssl
import subprocess
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import pytest

from cairn.llm._httpx import httpx
from cairn.llm.connections import ConnectionPool

from ..polling import eventually_async

MAX_CONNECTIONS = 10
LIMITS = httpx.Limits(max_connections=MAX_CONNECTIONS, max_keepalive_connections=MAX_CONNECTIONS)
Handler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def client(
    kind: str, context: ssl.SSLContext | None = None, timeout: float | httpx.Timeout = 30
) -> httpx.AsyncClient:
    context = context or ssl.create_default_context()
    if kind == "cairn":
        pool = ConnectionPool(
            max_connections=MAX_CONNECTIONS, max_keepalive=MAX_CONNECTIONS, tls=context
        )
        return httpx.AsyncClient(timeout=timeout, trust_env=False, transport=pool)
    return httpx.AsyncClient(timeout=timeout, trust_env=False, limits=LIMITS, verify=context)


@pytest.fixture(params=["cairn", "httpx"])
def kind(request: pytest.FixtureRequest) -> str:
    return str(request.param)


class Server:
    """A raw HTTP/1.1 server on 127.0.0.1 whose connections run ``handler``."""

    def __init__(self, handler: Handler) -> None:
        self.handler = handler
        self.connections = 0
        self.open = 0
        self.port = 0

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        self.open += 1
        try:
            await self.handler(reader, writer)
        except (ConnectionError, asyncio.IncompleteReadError):
            pass
        finally:
            writer.close()
            with contextlib.suppress(ConnectionError):
                await writer.wait_closed()
            self.open -= 1


@contextlib.asynccontextmanager
async def serving(handler: Handler, tls: ssl.SSLContext | None = None) -> AsyncIterator[Server]:
    server = Server(handler)
    listener = await asyncio.start_server(server._serve, "127.0.0.1", 0, ssl=tls)
    server.port = listener.sockets[0].getsockname()[1]
    try:
        yield server
    finally:
        listener.close()


async def read_request(reader: asyncio.StreamReader) -> bytes:
    head = await reader.readuntil(b"\r\n\r\n")
    length = 0
    for line in head.split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":")[1])
    return await reader.readexactly(length)


def response(body: bytes, *extra: str) -> bytes:
    headers = "".join(f"{line}\r\n" for line in extra)
    return f"HTTP/1.1 200 OK\r\nContent-Length: {len(body)}\r\n{headers}\r\n".encode() + body


async def echo_sizes(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    while True:
        body = await read_request(reader)
        writer.write(response(str(len(body)).encode()))
        await writer.drain()


async def test_requests_on_a_kept_connection(kind: str) -> None:
    async with serving(echo_sizes) as server, client(kind) as http:
        answers = [
            (await http.post(f"http://127.0.0.1:{server.port}/", content=b"x" * n)).text
            for n in (1, 10, 100)
        ]

    assert answers == ["1", "10", "100"]
    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused(kind: str) -> None:
    async def once(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(response(b"one"))  # keep-alive by HTTP/1.1's default, then closed
        await writer.drain()

    async with serving(once) as server, client(kind) as http:
        url = f"http://127.0.0.1:{server.port}/"
        first = await http.get(url)
        assert await eventually_async(lambda: server.open == 0)
        second = await http.get(url)

    assert (first.text, second.text) == ("one", "one")
    assert server.connections == 2


async def test_a_large_body_each_way_with_a_slow_reader(kind: str) -> None:
    """Backpressure both ways: the request outgrows the socket's buffers while the server
    reads slowly, and the response outgrows the client's read buffer."""
    size = 4 * 1024 * 1024

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        assert b"content-length: %d" % size in head.lower()
        received = 0
        while received < size:
            received += len(await reader.read(65536))
            await asyncio.sleep(0)
        writer.write(response(b"y" * size))
        await writer.drain()

    async with serving(slow) as server, client(kind) as http:
        answer = await http.post(f"http://127.0.0.1:{server.port}/", content=b"x" * size)

    assert answer.content == b"y" * size


async def test_a_streamed_response_arrives_piece_by_piece(kind: str) -> None:
    release = asyncio.Event()

    async def chunked(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nfirst\r\n")
        await writer.drain()
        await release.wait()
        writer.write(b"6\r\nsecond\r\n0\r\n\r\n")
        await writer.drain()

    async with serving(chunked) as server, client(kind) as http:
        url = f"http://127.0.0.1:{server.port}/"
        async with http.stream("POST", url, content=b"{}") as streamed:
            pieces = streamed.aiter_bytes()
            first = await anext(pieces)
            release.set()
            rest = b"".join([piece async for piece in pieces])

    assert (first, rest) == (b"first", b"second")


async def test_an_answer_before_the_whole_request_was_read(kind: str) -> None:
    """A server refusing a large body answers at once and ends its side of the stream."""

    async def early(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await reader.readuntil(b"\r\n\r\n")
        writer.write(b"HTTP/1.1 413 Payload Too Large\r\nContent-Length: 4\r\n\r\nbig!")
        await writer.drain()
        writer.write_eof()
        while await reader.read(65536):  # until the client stops sending
            pass

    async with serving(early) as server, client(kind) as http:
        answer = await http.post(f"http://127.0.0.1:{server.port}/", content=b"x" * 4_000_000)

    assert (answer.status_code, answer.text) == (413, "big!")


async def test_a_server_that_never_answers_is_a_read_timeout(kind: str) -> None:
    async def silent(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        await reader.read()  # until the client gives up

    # Only the read is short: a loaded machine may take longer than that to accept.
    read_only = httpx.Timeout(30, read=0.2)
    async with serving(silent) as server, client(kind, timeout=read_only) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(f"http://127.0.0.1:{server.port}/")


async def test_a_connection_cut_mid_body_is_a_protocol_error(kind: str) -> None:
    async def cut(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await read_request(reader)
        writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: 100\r\n\r\npartial")
        await writer.drain()

    async with serving(cut) as server, client(kind) as http:
        with pytest.raises(httpx.RemoteProtocolError):
            await http.get(f"http://127.0.0.1:{server.port}/")


async def test_nothing_listening_is_a_connect_error(kind: str) -> None:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]  # bound, not listening: refused
        async with client(kind) as http:
            with pytest.raises(httpx.ConnectError):
                await http.get(f"http://127.0.0.1:{port}/")


@pytest.fixture(scope="module")
def certificate(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    folder = tmp_path_factory.mktemp("tls")
    cert, key = folder / "cert.pem", folder / "key.pem"
    if shutil.which("openssl") is None:
        pytest.skip("openssl (the program) makes the test certificate")
    names = "subjectAltName=DNS:localhost,IP:127.0.0.1"
    command = ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1"]
    command += ["-keyout", str(key), "-out", str(cert), "-subj", "/CN=localhost", "-addext", names]
    subprocess.run(command, check=True, capture_output=True)
    return cert, key


async def test_https_with_a_trusted_certificate(kind: str, certificate: tuple[Path, Path]) -> None:
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    trusting = ssl.create_default_context(cafile=str(cert))

    async with serving(echo_sizes, tls) as server, client(kind, trusting) as http:
        answers = [
            (await http.post(f"https://127.0.0.1:{server.port}/", content=b"x" * n)).text
            for n in (3, 30)
        ]

    assert answers == ["3", "30"]
    assert server.connections == 1


async def test_https_with_an_untrusted_certificate_is_a_connect_error(
    kind: str, certificate: tuple[Path, Path]
) -> None:
    cert, key = certificate
    tls = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    tls.load_cert_chain(cert, key)
    trusting_nothing = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)

    async with serving(echo_sizes, tls) as server, client(kind, trusting_nothing) as http:
        with pytest.raises(httpx.ConnectError):
            await http.get(f"https://127.0.0.1:{server.port}/")
