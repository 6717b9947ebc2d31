"""The HTTP client of an HTTP or SSE MCP server: its proxy and the CAs it trusts, as the model
endpoint's.

- The proxy is chosen by :mod:`cairn.llm.proxies`, as for the model endpoint: ``--proxy``
  (``CAIRN_PROXY``), the ``proxy`` setting, then ``HTTPS_PROXY``/``HTTP_PROXY``/``ALL_PROXY``
  (the settings' ``env`` as their fallback), with ``NO_PROXY`` by curl's rules; requests go
  over the model endpoint's connections (:class:`~cairn.llm.connections.ConnectionPool`: a
  ``CONNECT`` tunnel for ``https://``, absolute form for ``http://``). The settings' parts come
  from the user's settings, or a trusted project's (an untrusted project's ``proxy`` and ``env``
  are left out when the settings load, and its servers never start).
- TLS verifies with the process's one context (:mod:`cairn.llm.certificates`: certifi's
  bundle or ``SSL_CERT_FILE``/``SSL_CERT_DIR``, plus ``NODE_EXTRA_CA_CERTS``).
- A ``public_only`` server's (a daemon tenant's) opens every connection only to a public
  address, checked as it is resolved (:mod:`cairn.tools.web_address`), and never through a
  proxy: the proxy would connect in the check's place, to any address it can reach.

Imported with the MCP SDK (httpx is loaded by then), never on the start-up path.
"""

from __future__ import annotations

import ssl

import httpx

from cairn.llm import ConnectionPool, ProviderError, proxy_routes
from cairn.mcp.config import ProxySettings

__all__ = ["HTTP_READ_TIMEOUT_SECONDS", "HTTP_TIMEOUT_SECONDS", "ProxySettings", "http_client"]

HTTP_TIMEOUT_SECONDS = 30.0  # connect and send; an SSE stream's read may wait 300 s
HTTP_READ_TIMEOUT_SECONDS = 300.0  # SSE streams stay open between events
MAX_CONNECTIONS = 100  # open connections to one server (httpx's default bound)
MAX_KEEPALIVE_CONNECTIONS = 20  # idle ones kept (httpx's default)


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
        )
        transport = _NamedProxyErrors(pool)
    # trust_env=False: the proxy and CAs are the ones above, never httpx's own reading of them
    return httpx.AsyncClient(
        headers=headers, timeout=timeout, auth=auth, trust_env=False, transport=transport
    )
