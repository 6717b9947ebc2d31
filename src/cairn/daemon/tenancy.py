"""Who a request speaks for, and what a client may bring: the daemon's tenant checks in one
place (#15, #24), for the routes of one daemon and for replicas serving the same tenants.

- A request names its tenant in the ``--tenant-header`` header, read once from the raw headers
  (:func:`request_tenant`); a request naming it twice, or repeating ``Host``, ``Authorization``
  or ``Origin``, is refused before anything reads them (:func:`repeated_header`), so no check
  can read one copy while a route acts on another.
- A session belongs to the tenant that created or loaded it: every session route looks it up
  by ``(tenant, id)``; another tenant's id is a 404, as an unknown one is.
- A stdio MCP server a client passes is a program the daemon would start outside the sandbox
  with the daemon's rights: it needs the token, and a tenant may never pass one; a tenant's
  HTTP and SSE servers are reached only at public addresses, checked as each connection is
  made (as web_fetch's; ``--allow-private-mcp`` lifts it), or a tenant could have the daemon
  call this machine's and its network's services (:func:`client_servers`).

What keeps a tenant's shell commands away from the others' files is in
:mod:`cairn.session.tenancy`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import replace
from typing import TYPE_CHECKING

from cairn.daemon.errors import ApiError, token_required
from cairn.memory.store.backend import TENANT_RULE, tenant_problem

if TYPE_CHECKING:
    from cairn.daemon.config import DaemonConfig
    from cairn.mcp.config import ServerConfig

__all__ = [
    "SINGLE_HEADERS",
    "TENANT_SCOPE_KEY",
    "client_servers",
    "repeated_header",
    "request_tenant",
]

# Headers a security decision reads: each may appear once (the tenant header too).
SINGLE_HEADERS = ("host", "authorization", "origin")
TENANT_SCOPE_KEY = "cairn.tenant"  # where a route finds its request's tenant in the ASGI scope

RawHeaders = Iterable[tuple[bytes, bytes]]


def repeated_header(raw: RawHeaders, tenant_header: str | None) -> str | None:
    """The first of :data:`SINGLE_HEADERS` (and the tenant header) that ``raw`` holds more
    than once, or ``None``."""
    watched = {*SINGLE_HEADERS, *([tenant_header.lower()] if tenant_header else [])}
    seen: set[str] = set()
    for key, _ in raw:
        name = key.decode("latin-1").lower()
        if name in watched:
            if name in seen:
                return name
            seen.add(name)
    return None


def request_tenant(raw: RawHeaders, config: DaemonConfig) -> str | None:
    """The tenant a request speaks for: ``None`` on a daemon without tenants; else the value
    of the tenant header (400 ``tenant_required`` or ``invalid_tenant`` otherwise)."""
    header = config.tenant_header
    if header is None:
        return None
    wanted = header.lower().encode("latin-1")
    values = [v.decode("latin-1") for k, v in raw if k.lower() == wanted]
    if not values:
        raise ApiError(400, f"This daemon needs the {header} header.", "tenant_required")
    if len(values) > 1:  # the security middleware refuses these first
        raise ApiError(400, f"The {header} header appears more than once.", "duplicate_header")
    problem = tenant_problem(values[0])
    if problem is not None:
        raise ApiError(400, f"{header}: {problem}; it must be {TENANT_RULE}.", "invalid_tenant")
    return values[0]


def client_servers(
    servers: Sequence[ServerConfig], config: DaemonConfig, route: str
) -> list[ServerConfig]:
    """The MCP servers a client passed, as the daemon will run them: a tenant's HTTP and SSE
    servers reach only public addresses (unless ``--allow-private-mcp``).

    Refuses the stdio servers of a client that may not start programs: any client of a daemon
    without a token (401 ``token_required``), and every tenant (403)."""
    _refuse_programs(servers, config, route)
    if config.tenant_header is None or config.allow_private_mcp:
        return list(servers)
    return [replace(server, public_only=True) for server in servers]


def _refuse_programs(servers: Sequence[ServerConfig], config: DaemonConfig, route: str) -> None:
    programs = [s.name for s in servers if s.transport == "stdio"]
    if not programs:
        return
    names = ", ".join(programs)
    if config.tenant_header is not None:
        raise ApiError(
            403,
            f"POST {route}: mcpServers {names} would start programs outside the sandbox, with "
            "access to every tenant's files; a daemon serving tenants runs only the MCP servers "
            "its settings configure (HTTP servers may be passed).",
            "stdio_servers_refused",
        )
    if config.token is None:
        raise token_required(
            f"POST {route}: mcpServers {names} would start programs on this machine, which "
            "needs a daemon started with a token (--token or CAIRN_SERVER_TOKEN); HTTP servers "
            "may be passed without one."
        )
