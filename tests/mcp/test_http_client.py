"""The HTTP and SSE MCP servers' client (:mod:`cairn.mcp.http`) on a connection the server
hangs up on as the next message arrives, the race tinyproxy leaves open: it carries one request
per connection and closes it just after the response, without ``Connection: close``."""

from __future__ import annotations

import json
import ssl
from typing import Any

import httpx
import pytest

from cairn.mcp.config import ProxySettings
from cairn.mcp.http import http_client
from cairn.testing.tinyproxy import TinyProxy, find_tinyproxy

from ..hang_up import OneRequestServer, SlowClosingServer

_INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}


def _client(proxy: str | None = None) -> httpx.AsyncClient:
    return http_client(
        name="web",
        public_only=False,
        headers=None,
        timeout=None,
        auth=None,
        tls=ssl.create_default_context(),
        proxy=ProxySettings(proxy=proxy),
    )


def _request(method: str, **params: Any) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}


@pytest.mark.parametrize(
    "message",
    [_request("tools/list"), _INITIALIZED, [_INITIALIZED, _request("resources/read", uri="x")]],
    ids=["tools/list", "a notification", "a batch"],
)
async def test_a_message_a_reused_connection_was_closed_under_is_sent_again(
    message: object,
) -> None:
    """Bug: behind tinyproxy an SSE server's second message (``notifications/initialized``)
    went out on the connection tinyproxy was closing: "Server disconnected without sending a
    response", and the server never became ready."""
    async with OneRequestServer() as server, _client() as http:
        await http.post(server.url, json=_request("initialize"))
        answer = await http.post(server.url, json=message)

    assert answer.status_code == 202
    assert server.connections == 2
    assert [json.loads(body) for body in server.bodies[1:]] == [message, message]


@pytest.mark.parametrize(
    "message",
    [
        _request("tools/call", name="deploy", arguments={}),
        [_INITIALIZED, _request("tools/call", name="deploy")],
        {"jsonrpc": "2.0", "id": 7, "result": {}},  # a reply to the server's request
        _request("tasks/cancel"),  # a method it does not know
    ],
    ids=["tools/call", "a batch with one", "a reply", "an unknown method"],
)
async def test_a_message_the_server_may_have_acted_on_is_not_sent_again(
    message: object,
) -> None:
    async with OneRequestServer() as server, _client() as http:
        await http.post(server.url, json=_request("initialize"))
        with pytest.raises(httpx.RemoteProtocolError, match="Server disconnected"):
            await http.post(server.url, json=message)

    assert server.connections == 1
    assert len(server.bodies) == 2


@pytest.mark.skipif(find_tinyproxy() is None, reason="tinyproxy is not installed")
async def test_behind_tinyproxy_the_message_after_a_chunked_answer_reaches_the_server() -> None:
    """Bug: a whole-suite run failed an SSE server behind tinyproxy ("through the proxy ...:
    Server disconnected without sending a response"): tinyproxy closes each connection after
    its answer, without saying so, and the next message went out on it before it was closed."""
    async with SlowClosingServer() as server:
        with TinyProxy() as proxy:
            async with _client(proxy.url) as http:
                first = await http.post(server.url, json=_request("initialize"))
                second = await http.post(server.url, json=_INITIALIZED)

    assert (first.status_code, second.status_code, second.text) == (202, 202, "Accepted")
    assert server.connections == 2
