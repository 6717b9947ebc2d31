"""The providers' HTTP/1.1 connection pool against a real loopback server: reuse, what is never
reused, the bound on open connections, timeouts and the trace extension."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from cairn.llm._httpx import httpx
from cairn.llm.connections import KEEPALIVE_EXPIRY, ConnectionPool
from cairn.llm.transport import ClientPools

from ..hang_up import OneRequestServer
from ..polling import eventually_async

BODY = b"0123456789" * 10


class LoopbackServer:
    """Answers each GET with ``BODY`` (in two parts, ``pause`` seconds apart), keeps the
    connection open unless ``close_after_response``; counts the connections it accepted."""

    def __init__(self) -> None:
        self.connections = 0
        self.close_after_response = False
        self.pause = 0.0
        self.release = asyncio.Event()
        self.release.set()
        self.closed: list[asyncio.Event] = []
        self.url = ""
        self._server: asyncio.Server | None = None

    async def start(self) -> None:
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0)
        port = self._server.sockets[0].getsockname()[1]
        self.url = f"http://127.0.0.1:{port}/models"

    async def stop(self) -> None:
        assert self._server is not None
        self._server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.connections += 1
        closed = asyncio.Event()
        self.closed.append(closed)
        try:
            while True:
                try:
                    await reader.readuntil(b"\r\n\r\n")
                except asyncio.IncompleteReadError:
                    return
                await self.release.wait()
                half = len(BODY) // 2
                writer.write(b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % len(BODY))
                writer.write(BODY[:half])
                await writer.drain()
                await asyncio.sleep(self.pause)
                writer.write(BODY[half:])
                await writer.drain()
                if self.close_after_response:
                    return
        except ConnectionError:
            return
        finally:
            writer.close()
            closed.set()


@pytest.fixture
async def server() -> AsyncIterator[LoopbackServer]:
    served = LoopbackServer()
    await served.start()
    yield served
    await served.stop()


def client(connections: ConnectionPool, **timeouts: Any) -> httpx.AsyncClient:
    return httpx.AsyncClient(
        transport=connections, timeout=httpx.Timeout(5.0, **timeouts), trust_env=False
    )


def new_pool(**kwargs: Any) -> ConnectionPool:
    return ConnectionPool(**{"max_connections": 10, "max_keepalive": 10, **kwargs})


async def test_a_whole_response_leaves_its_connection_for_the_next_request(
    server: LoopbackServer,
) -> None:
    async with client(new_pool()) as http:
        for _ in range(3):
            response = await http.get(server.url)
            assert (response.status_code, response.content) == (200, BODY)

    assert server.connections == 1


async def test_a_connection_the_server_closed_while_idle_is_not_reused(
    server: LoopbackServer,
) -> None:
    server.close_after_response = True
    async with client(new_pool()) as http:
        first = await http.get(server.url)
        await server.closed[0].wait()  # the server's end is closed; this loop may not know yet
        second = await http.get(server.url)

    assert first.content == second.content == BODY
    assert server.connections == 2


async def test_a_body_closed_before_its_end_closes_its_connection(
    server: LoopbackServer,
) -> None:
    server.pause = 0.2
    async with client(new_pool()) as http:
        async with http.stream("GET", server.url) as response:
            async for _chunk in response.aiter_raw():
                break  # the rest of the body is never read
        await server.closed[0].wait()
        server.pause = 0.0
        again = await http.get(server.url)

    assert again.content == BODY
    assert server.connections == 2


async def test_a_connection_idle_for_its_expiry_is_not_reused(server: LoopbackServer) -> None:
    now = [1000.0]
    async with client(new_pool(clock=lambda: now[0])) as http:
        await http.get(server.url)
        now[0] += KEEPALIVE_EXPIRY - 0.1
        await http.get(server.url)
        assert server.connections == 1
        now[0] += KEEPALIVE_EXPIRY
        await http.get(server.url)

    assert server.connections == 2


async def test_requests_over_the_bound_wait_for_a_connection(server: LoopbackServer) -> None:
    server.pause = 0.05
    async with client(new_pool(max_connections=1)) as http:
        responses = await asyncio.gather(*(http.get(server.url) for _ in range(3)))

    assert [r.content for r in responses] == [BODY] * 3
    assert server.connections == 1


async def test_a_request_waiting_past_the_pool_timeout_fails_with_httpx_pool_timeout(
    server: LoopbackServer,
) -> None:
    server.release.clear()  # the first request holds the only connection
    async with client(new_pool(max_connections=1), pool=0.1) as http:
        first = asyncio.ensure_future(http.get(server.url))
        assert await eventually_async(lambda: server.connections == 1)
        with pytest.raises(httpx.PoolTimeout):
            await http.get(server.url)
        server.release.set()
        assert (await first).content == BODY


async def test_a_silent_server_is_a_read_timeout(server: LoopbackServer) -> None:
    server.release.clear()
    async with client(new_pool(), read=0.1) as http:
        with pytest.raises(httpx.ReadTimeout):
            await http.get(server.url)
    server.release.set()


async def test_nothing_listening_is_a_connect_error_caused_by_the_refusal(
    server: LoopbackServer,
) -> None:
    url = server.url
    await server.stop()
    async with client(new_pool()) as http:
        with pytest.raises(httpx.ConnectError) as raised:
            await http.get(url)

    assert isinstance(raised.value.__cause__, ConnectionRefusedError)


async def test_the_trace_extension_gets_httpcores_event_names_in_order(
    server: LoopbackServer,
) -> None:
    seen: list[str] = []

    async def trace(name: str, info: dict[str, Any]) -> None:
        seen.append(name)

    async with client(new_pool()) as http:
        await http.get(server.url, extensions={"trace": trace})

    assert seen == [
        "http11.send_request_headers.started",
        "http11.send_request_headers.complete",
        "http11.send_request_body.started",
        "http11.send_request_body.complete",
        "http11.receive_response_headers.started",
        "http11.receive_response_headers.complete",
    ]


def every_request(_request: httpx.Request) -> bool:
    return True


@pytest.mark.parametrize("read", [True, False], ids=["end-of-stream", "reset"])
@pytest.mark.parametrize("method", ["GET", "POST"])
async def test_a_request_a_reused_connection_hung_up_on_is_sent_again_on_a_new_one(
    read: bool, method: str
) -> None:
    """Bug: a connection the peer closes while the next request is on its way (tinyproxy, which
    carries one request per connection and closes it just after the response, yet does not say
    ``Connection: close``) failed that request, "Server disconnected without sending a
    response", though nothing of it was answered: an MCP server's message, a user's turn."""
    async with (
        OneRequestServer(read=read) as server,
        client(new_pool(replayable=every_request)) as http,
    ):
        first = await http.request(method, server.url, content=b"{}")
        second = await http.request(method, server.url, content=b"{}")

    assert (first.status_code, second.status_code, second.content) == (202, 202, b"Accepted")
    assert server.connections == 2  # the first, reused and hung up on; then a new one
    if read:  # the second reached the server twice: as a POST may, only when allowed
        assert [line.split()[0] for line in server.requests] == [method.encode()] * 3
        assert len(server.hung_up_on) == 1


async def test_a_post_is_not_sent_again_unless_the_pool_is_told_it_may_be() -> None:
    """A POST the server may have acted on before it hung up (RFC 9110 9.2.2) is sent again
    only when its pool's owner says its requests may be."""
    async with OneRequestServer() as server, client(new_pool()) as http:
        await http.post(server.url, content=b"{}")
        with pytest.raises(httpx.RemoteProtocolError, match="Server disconnected"):
            await http.post(server.url, content=b"{}")

    assert server.connections == 1
    assert len(server.requests) == 2


async def test_a_request_a_new_connection_got_no_answer_to_is_not_sent_again() -> None:
    """A hang-up on a new connection is the server's answer, not a stale connection's."""
    async with (
        OneRequestServer(answer_first=False) as server,
        client(new_pool(replayable=every_request)) as http,
    ):
        with pytest.raises(httpx.RemoteProtocolError, match="Server disconnected"):
            await http.get(server.url)

    assert server.connections == 1


async def test_the_model_endpoints_request_a_reused_connection_was_closed_under_is_sent_again() -> (
    None
):
    """The model endpoint's POST is sent again at once: a user's turn does not fail, nor wait
    for the retry policy's pause."""
    async with OneRequestServer() as server:
        pools = ClientPools(server.url, timeout=httpx.Timeout(5.0), pools=1, client=None)
        http = await pools.get(None)
        await http.post(server.url, content=b"{}")
        answer = await http.post(server.url, content=b"{}")
        await pools.aclose()

    assert answer.status_code == 202
    assert server.connections == 2
