"""The HTTP client of an HTTP or SSE MCP server: its proxy and the CAs it trusts, as the model
endpoint's.

- The proxy is chosen by :mod:`cairn.llm.proxies`, as for the model endpoint: ``--proxy``
  (``CAIRN_PROXY``), the ``proxy`` setting, then ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``
  (the settings' ``env`` as their fallback), with ``NO_PROXY`` by curl's rules; requests go
  over the model endpoint's connections (:class:`~cairn.llm.connections.ConnectionPool`: a
  ``CONNECT`` tunnel for ``https://``, absolute form for ``http://``). The settings' parts come
  from the user's settings, or a trusted project's (an untrusted project's ``proxy`` and ``env``
  are left out when the settings load, and its servers never start).
- A message a reused connection was closed under before any answer (tinyproxy closes each
  connection just after its response, without saying so) is sent again on a new connection
  when the server may see it twice: a request that reads, or sets what it sets again, and
  notifications; never a ``tools/call`` (the tool may act twice) nor an unknown method
  (:func:`replayable_message`).
- TLS verifies with the process's one context (:mod:`cairn.llm.certificates`: certifi's
  bundle or ``SSL_CERT_FILE``/``SSL_CERT_DIR``, plus ``NODE_EXTRA_CA_CERTS``).
- A ``public_only`` server's (a daemon tenant's) opens every connection only to a public
  address, checked as it is resolved (:mod:`cairn.tools.web_address`), and never through a
  proxy: the proxy would connect in the check's place, to any address it can reach.

Imported with the MCP SDK (httpx is loaded by then), never on the start-up path.
"""

from __future__ import annotations

import json
import ssl

import httpx

from cairn.llm import ConnectionPool, ProviderError, proxy_routes
from cairn.mcp.config import ProxySettings

__all__ = [
    "HTTP_READ_TIMEOUT_SECONDS",
    "HTTP_TIMEOUT_SECONDS",
    "ProxySettings",
    "http_client",
    "replayable_message",
]

HTTP_TIMEOUT_SECONDS = 30.0  # connect and send; an SSE stream's read may wait 300 s
HTTP_READ_TIMEOUT_SECONDS = 300.0  # SSE streams stay open between events
MAX_CONNECTIONS = 100  # open connections to one server (httpx's default bound)
MAX_KEEPALIVE_CONNECTIONS = 20  # idle ones kept (httpx's default)
REPLAYABLE_METHODS = frozenset(  # JSON-RPC requests a server may get twice: reads, idempotent sets
    {
        "initialize",
        "ping",
        "tools/list",
        "prompts/list",
        "prompts/get",
        "resources/list",
        "resources/templates/list",
        "resources/read",
        "resources/subscribe",
        "resources/unsubscribe",
        "logging/setLevel",
        "completion/complete",
    }
)


class _NamedProxyErrors(httpx.AsyncBaseTransport):
    """The model endpoint's connections, whose proxy failures (a :class:`ProviderError` naming
    the proxy, never its password) reach the MCP SDK as the httpx error it handles."""

    def __init__(self, pool: ConnectionPool) -> None:
        self._pool = pool

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        try:
            return await self._pool.handle_async_request(request)
        except ProviderError as exc:
            raise httpx.ProxyError(str(exc), request=request) from exc

    async def aclose(self) -> None:
        await self._pool.aclose()


def replayable_message(request: httpx.Request) -> bool:
    """``request`` (a ``POST`` of JSON-RPC) may reach the server twice: each message in it is a
    notification or one of :data:`REPLAYABLE_METHODS`; never a ``tools/call``, a reply to the
    server, an unknown method, or a body that is not JSON-RPC."""
    try:
        message = json.loads(request.content)
    except (ValueError, httpx.RequestNotRead):
        return False
    messages = message if isinstance(message, list) else [message]
    return bool(messages) and all(
        isinstance(item, dict)
        and isinstance(method := item.get("method"), str)
        and (method in REPLAYABLE_METHODS or method.startswith("notifications/"))
        for item in messages
    )


def http_client(
    *,
    name: str,
    public_only: bool,
    headers: dict[str, str] | None,
    timeout: httpx.Timeout | None,
    auth: httpx.Auth | None,
    tls: ssl.SSLContext,
    proxy: ProxySettings,
) -> httpx.AsyncClient:
    """The client of server ``name`` (redirects are the MCP transports' to follow, within the
    server's origin); ``tls`` is :func:`cairn.llm.certificates.verifying_context`'s."""
    timeout = timeout or httpx.Timeout(HTTP_TIMEOUT_SECONDS, read=HTTP_READ_TIMEOUT_SECONDS)
    if public_only:
        from cairn.tools.web_address import (
            CheckedNetworkBackend,
            checked_transport,
            system_resolver,
        )

        backend = CheckedNetworkBackend(
            system_resolver,
            user=f"MCP server {name}",
            allowed_by="cairn serve --allow-private-mcp",
        )
        transport: httpx.AsyncBaseTransport = checked_transport(backend, tls)
    else:
        pool = ConnectionPool(
            max_connections=MAX_CONNECTIONS,
            max_keepalive=MAX_KEEPALIVE_CONNECTIONS,
            tls=tls,
            proxies=proxy_routes(proxy.proxy, proxy.env),
            replayable=replayable_message,
        )
        transport = _NamedProxyErrors(pool)
    # trust_env=False: the proxy and CAs are the ones above, never httpx's own reading of them
    return httpx.AsyncClient(
        headers=headers, timeout=timeout, auth=auth, trust_env=False, transport=transport
    )
