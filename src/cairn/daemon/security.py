"""The daemon's front door: Origin (CORS), Host allowlist, bearer token, body size.

Checks run in this order on every request, before any route:

0. a request repeating ``Host``, ``Authorization``, ``Origin`` or the tenant header is a 400
   (``duplicate_header``): every check below and every route read the one copy;
1. a browser ``Origin`` is refused (403) unless it is the daemon itself or listed with
   ``--allow-origin``; allowed origins get CORS headers and preflight answers;
2. on a loopback bind, the ``Host`` header must name a loopback host with the bound port, so a
   page that rebinds its DNS name to 127.0.0.1 cannot reach the daemon;
3. with a token configured, ``Authorization: Bearer <token>`` is required (a plain
   ``/health`` on a loopback bind is exempt; ``/health?deep=1`` is not); the SHA-256 of both
   sides is compared in constant time and every failure is the same 401;
4. a declared ``Content-Length`` above the limit is a 413 (bodies without one are counted while
   they are read, see :func:`cairn.daemon.routes.read_json`).
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qs

from cairn.daemon.config import DaemonConfig
from cairn.daemon.errors import error_body, json_bytes
from cairn.daemon.tenancy import repeated_header

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["SecurityMiddleware", "bearer_matches"]

_LOOPBACK_HOSTS = ("localhost", "127.0.0.1", "[::1]")
_CORS_METHODS = b"GET, POST, DELETE, OPTIONS"
_CORS_HEADERS = b"Authorization, Content-Type, X-Cairn-Client-Id, Last-Event-ID"
_CORS_MAX_AGE = b"86400"  # seconds a browser may cache a preflight answer
_UNAUTHORIZED = (401, {"error": "Unauthorized"}, [(b"www-authenticate", b"Bearer")])

Headers = list[tuple[bytes, bytes]]


def _digest(value: str) -> bytes:
    return hashlib.sha256(value.encode("utf-8")).digest()


def bearer_matches(header: str | None, token_digest: bytes) -> bool:
    """``Authorization: Bearer <token>`` (scheme case-insensitive) naming the daemon's token."""
    if not header:
        return False
    scheme, _, value = header.strip().partition(" ")
    if scheme.lower() != "bearer" or not value.strip():
        return False
    return hmac.compare_digest(_digest(value.strip()), token_digest)


class SecurityMiddleware:
    def __init__(self, app: ASGIApp, config: DaemonConfig) -> None:
        self.app = app
        self.config = config
        self._token_digest = _digest(config.token) if config.token else None
        self._loopback = config.loopback  # parses the host: once, not on every request
        self._any_origin = "*" in config.allow_origins
        self._origins = {o.rstrip("/").lower() for o in config.allow_origins if o != "*"}

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        repeated = repeated_header(scope["headers"], self.config.tenant_header)
        if repeated is not None:
            body = error_body(f"The {repeated} header appears more than once", "duplicate_header")
            await _send_json(send, 400, body)
            return
        headers = _headers(scope["headers"])
        port = _bound_port(scope)
        origin = headers.get("origin")
        if origin is not None and self._same_origin(origin, port):
            origin = None
        if origin is not None and not self._origin_allowed(origin):
            await _send_json(
                send, 403, error_body("Request denied by CORS policy", "origin_not_allowed")
            )
            return
        if self._loopback and not self._host_allowed(headers.get("host"), port):
            await _send_json(send, 403, error_body("Host not allowed", "host_not_allowed"))
            return
        cors = _cors_headers(origin) if origin is not None else []
        if origin is not None and scope["method"] == "OPTIONS":
            await _send(send, 204, b"", cors)
            return
        if not self._authorized(scope, headers):
            status, body, extra = _UNAUTHORIZED
            await _send_json(send, status, body, [*extra, *cors])
            return
        problem = self._body_problem(headers.get("content-length"))
        if problem is not None:
            await _send_json(send, problem[0], problem[1], cors)
            return
        if cors:
            send = _with_headers(send, cors)
        await self.app(scope, receive, send)

    def _same_origin(self, origin: str, port: int) -> bool:
        return any(origin.lower() == f"http://{host}:{port}" for host in _LOOPBACK_HOSTS)

    def _origin_allowed(self, origin: str) -> bool:
        return self._any_origin or origin.rstrip("/").lower() in self._origins

    def _host_allowed(self, host: str | None, port: int) -> bool:
        if not host:
            return False
        name = host.strip().lower()
        bound = self.config.host.lower()
        bound = f"[{bound}]" if ":" in bound and not bound.startswith("[") else bound
        for allowed in {*_LOOPBACK_HOSTS, bound}:
            if name == f"{allowed}:{port}" or (port == 80 and name == allowed):
                return True
        return False

    def _authorized(self, scope: Scope, headers: dict[str, str]) -> bool:
        if self._token_digest is None:
            return True
        if self._loopback and scope["path"] in ("/health", "/ready") and not _asks_deep(scope):
            return True  # liveness and readiness only: the counts of ?deep=1 need the token
        return bearer_matches(headers.get("authorization"), self._token_digest)

    def _body_problem(self, length: str | None) -> tuple[int, dict[str, Any]] | None:
        if length is None:
            return None
        try:
            size = int(length)
        except ValueError:
            return 400, error_body("Invalid Content-Length header", "invalid_content_length")
        limit = self.config.max_body_bytes
        if size > limit:
            return 413, error_body(
                f"Request body too large ({size} bytes; the limit is {limit})",
                "payload_too_large",
                limit=limit,
            )
        return None


def _asks_deep(scope: Scope) -> bool:
    query = parse_qs(scope.get("query_string", b"").decode("latin-1"))
    return bool(query.get("deep"))


def _headers(raw: Iterable[tuple[bytes, bytes]]) -> dict[str, str]:
    return {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in raw}


def _bound_port(scope: Scope) -> int:
    server = scope.get("server")
    return int(server[1]) if server and server[1] is not None else 80


def _cors_headers(origin: str) -> Headers:
    return [
        (b"access-control-allow-origin", origin.encode("latin-1")),
        (b"vary", b"Origin"),
        (b"access-control-allow-methods", _CORS_METHODS),
        (b"access-control-allow-headers", _CORS_HEADERS),
        (b"access-control-max-age", _CORS_MAX_AGE),
        (b"access-control-expose-headers", b"Retry-After"),
    ]


def _with_headers(send: Send, extra: Headers) -> Send:
    async def wrapped(message: Message) -> None:
        if message["type"] == "http.response.start":
            message = {**message, "headers": [*message.get("headers", []), *extra]}
        await send(message)

    return wrapped


async def _send_json(
    send: Send, status: int, body: dict[str, Any], extra: Headers | None = None
) -> None:
    headers = [(b"content-type", b"application/json"), *(extra or [])]
    await _send(send, status, json_bytes(body), headers)


async def _send(send: Send, status: int, body: bytes, headers: Headers) -> None:
    all_headers = [*headers, (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": all_headers})
    await send({"type": "http.response.body", "body": body})
