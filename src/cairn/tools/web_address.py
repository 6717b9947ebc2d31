"""Which addresses ``web_fetch`` may connect to, and connecting only to one it has checked.

A URL's host is resolved once per connection, by the connection itself
(:class:`CheckedNetworkBackend`, httpcore's seam for opening sockets): every address it
resolves to must be public (:func:`address_problem`), and the socket is opened to one of exactly
those addresses. Resolving for a check and again for the request would leave a window in which a
name could point elsewhere (DNS rebinding); there is no second resolution here to race with.

Public means a global unicast address: not loopback, private, link-local, shared, reserved,
multicast or unspecified, and for the IPv6 forms that carry an IPv4 address (IPv4-mapped and
-compatible, NAT64, 6to4, Teredo) the IPv4 address must be public too.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Awaitable, Callable, Iterable
from typing import Any

import httpcore

from cairn.tools.base import ToolError

__all__ = [
    "CheckedNetworkBackend",
    "Resolver",
    "address_problem",
    "checked_transport",
    "system_resolver",
]

Resolver = Callable[[str, int], Awaitable[list[str]]]  # host, port -> the addresses, in order
IPAddress = ipaddress.IPv4Address | ipaddress.IPv6Address

_IPV4_COMPATIBLE = ipaddress.ip_network("::/96")  # deprecated ::a.b.c.d (and :: and ::1)
_NAT64 = ipaddress.ip_network("64:ff9b::/96")  # the well-known prefix: 64:ff9b::a.b.c.d
_LOCAL_NAT64 = ipaddress.ip_network("64:ff9b:1::/48")  # a network's own translation prefix


async def system_resolver(host: str, port: int) -> list[str]:
    """The addresses ``getaddrinfo`` gives for ``host`` (in a thread: it blocks)."""
    try:
        found = await asyncio.to_thread(socket.getaddrinfo, host, port, type=socket.SOCK_STREAM)
    except OSError as exc:
        raise ToolError(f"{host} cannot be resolved: {exc}") from None
    return list(dict.fromkeys(str(info[4][0]) for info in found))


def address_problem(address: str) -> str | None:
    """Why ``address`` is not public ("a loopback address"), or ``None`` when it is."""
    try:
        ip: IPAddress = ipaddress.ip_address(address.split("%", 1)[0])  # fe80::1%eth0
    except ValueError:
        return "not an IP address"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip in _IPV4_COMPATIBLE or ip in _LOCAL_NAT64:
            return "a local or deprecated IPv6 form"
        for embedded in _embedded_ipv4(ip):
            problem = address_problem(str(embedded))
            if problem is not None:
                return f"an IPv6 form of {embedded}, {problem}"
    if ip.is_multicast:
        return "a multicast address"
    if ip.is_loopback:
        return "a loopback address"
    if not ip.is_global:
        return "a private, link-local or reserved address"
    return None


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> Iterable[ipaddress.IPv4Address]:
    if ip.ipv4_mapped is not None:
        yield ip.ipv4_mapped
    if ip in _NAT64:
        yield ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF)
    if ip.sixtofour is not None:
        yield ip.sixtofour
    if ip.teredo is not None:
        yield from ip.teredo  # the Teredo server and the (deobfuscated) client


class CheckedNetworkBackend(httpcore.AsyncNetworkBackend):
    """httpcore's sockets, opened only to addresses checked the moment they were resolved.

    ``allow_private`` skips the check (``tools.webFetch.allowPrivateAddresses``), not the single
    resolution. ``user`` names who connects and ``allowed_by`` what allows private addresses,
    for the messages (web_fetch's by default; a daemon tenant's MCP servers use it too).
    """

    def __init__(
        self,
        resolver: Resolver,
        *,
        allow_private: bool = False,
        user: str = "web_fetch",
        allowed_by: str = "tools.webFetch.allowPrivateAddresses",
    ) -> None:
        self._resolve = resolver
        self._allow_private = allow_private
        self._user = user
        self._allowed_by = allowed_by
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        addresses = await self._resolve(host, port)
        if not addresses:
            raise ToolError(f"{host} resolves to no address")
        if not self._allow_private:
            for address in addresses:
                problem = address_problem(address)
                if problem is not None:
                    raise ToolError(
                        f"{host} is refused: it is a private or local address ({address}): "
                        f"{problem}. {self._allowed_by} allows such addresses."
                    )
        failure: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except httpcore.ConnectError as exc:
                failure = exc
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self, path: str, timeout: float | None = None, socket_options: Iterable[Any] | None = None
    ) -> httpcore.AsyncNetworkStream:
        raise ToolError(f"{self._user} does not connect to Unix sockets")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


def checked_transport(backend: httpcore.AsyncNetworkBackend, tls: Any = None) -> Any:
    """httpx's transport (an ``httpx.AsyncHTTPTransport``) over a pool whose sockets
    ``backend`` opens: httpx takes no network backend itself, so its pool is replaced by one
    that does. No proxy from the environment: a proxy would connect in the checks' place.
    ``tls``: the verifying ``ssl.SSLContext`` (default: certifi's bundle alone)."""
    import httpx

    transport = httpx.AsyncHTTPTransport(trust_env=False)
    transport._pool = httpcore.AsyncConnectionPool(
        ssl_context=tls if tls is not None else httpx.create_ssl_context(trust_env=False),
        network_backend=backend,
    )
    return transport
