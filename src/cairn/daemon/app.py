"""The daemon's ASGI application: the security middleware in front of the routes.

The routes need the whole session runtime, which takes most of the daemon's start-up to
import. :class:`BootApp` lets the daemon listen before that: it answers ``GET /health`` and
``GET /capabilities`` (which need only the configuration) at once and holds every other request
until :meth:`BootApp.ready` hands it the routes (or :meth:`BootApp.failed` says they will not
come).
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING, Any

from cairn.daemon.capabilities import capabilities
from cairn.daemon.config import CLIENT_ID_HEADER, DaemonConfig
from cairn.daemon.errors import error_body, json_bytes
from cairn.daemon.security import SecurityMiddleware

if TYPE_CHECKING:
    from starlette.types import ASGIApp, Receive, Scope, Send

    from cairn.daemon.routes import DaemonRoutes
    from cairn.daemon.sessions import SessionRegistry

__all__ = ["BootApp", "create_app", "create_routes_app"]

_CLIENT_ID = CLIENT_ID_HEADER.encode()


class BootApp:
    def __init__(self, config: DaemonConfig | None = None) -> None:
        self._config = config  # with it, /capabilities answers before the routes are ready
        self._app: ASGIApp | None = None
        self._failure: str | None = None
        self._ready = asyncio.Event()

    @property
    def is_ready(self) -> bool:
        return self._app is not None

    def ready(self, app: ASGIApp) -> None:
        self._app = app
        self._ready.set()

    def failed(self, reason: str) -> None:
        self._failure = reason
        self._ready.set()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if self._app is None:
            if _is_plain(scope, "/health") and self._failure is None:
                await _answer(send, 200, {"status": "ok"})
                return
            if self._config is not None and self._early_capabilities(scope):
                await _answer(send, 200, capabilities(self._config))
                return
            if _is_plain(scope, "/ready"):  # not before the routes are: nothing to send it yet
                await _answer(send, 503, {"status": "not_ready", "reason": "starting"})
                return
            await self._ready.wait()
        if self._app is None:
            body = error_body(f"The daemon failed to start: {self._failure}", "startup_failed")
            await _answer(send, 503, body)
            return
        await self._app(scope, receive, send)

    def _early_capabilities(self, scope: Scope) -> bool:
        """A plain ``GET /capabilities`` naming no client (the routes check a client's id)."""
        return (
            _is_plain(scope, "/capabilities")
            and self._failure is None
            and not any(name == _CLIENT_ID for name, _ in scope["headers"])
        )


def create_routes_app(routes: DaemonRoutes) -> ASGIApp:
    """The Starlette application of the routes (no security checks: see :func:`create_app`)."""
    from starlette.applications import Starlette
    from starlette.exceptions import HTTPException

    from cairn.daemon.routes import http_error_handler

    return Starlette(routes=routes.routes(), exception_handlers={HTTPException: http_error_handler})


def create_app(registry: SessionRegistry, config: DaemonConfig) -> ASGIApp:
    """The complete ASGI app serving the sessions of ``registry``."""
    from cairn.daemon.routes import DaemonRoutes

    return SecurityMiddleware(create_routes_app(DaemonRoutes(registry, config)), config)


def _is_plain(scope: Scope, path: str) -> bool:
    return (
        scope["type"] == "http"
        and scope["method"] == "GET"
        and scope["path"] == path
        and not scope.get("query_string")
    )


async def _answer(send: Send, status: int, body: dict[str, Any]) -> None:
    payload = json_bytes(body)
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
    ]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
