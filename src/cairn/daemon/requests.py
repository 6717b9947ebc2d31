"""How the daemon's routes read a request and answer it: errors as JSON envelopes (:func:`api`),
the JSON body within its limit, the client id, ``Last-Event-ID`` and ``maxQueued``, the answer
to a prompt retried with its ``Idempotency-Key``, and an ASGI app (the event stream) as a
route's response."""

from __future__ import annotations

import json
import re
from collections.abc import Awaitable, Callable
from functools import wraps
from typing import TYPE_CHECKING, Any

from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, Response

from cairn.daemon.bodies import prompt_digest
from cairn.daemon.config import CLIENT_ID_HEADER
from cairn.daemon.errors import ApiError, error_body
from cairn.debug_log import get_logger
from cairn.session.boundary import clean_json

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = [
    "BODY_SCOPE_KEY",
    "Forwarded",
    "Handler",
    "RawResponse",
    "api",
    "client_id",
    "cursor_of",
    "http_error_handler",
    "is_uuid",
    "max_queued_of",
    "read_json",
    "replayed_admission",
    "wait_for_disconnect",
]

BODY_SCOPE_KEY = "cairn.body"  # the raw body, once read (a forwarded request sends it on)
_CLIENT_ID = re.compile(r"^[A-Za-z0-9._:-]{1,128}$")
MIN_MAX_QUEUED, MAX_MAX_QUEUED = 16, 2048  # bounds of the events route's ?maxQueued=
_log = get_logger("DAEMON")

Handler = Callable[[Request], Awaitable[Response]]


async def http_error_handler(request: Request, exc: Exception) -> Response:
    """Starlette's own 404 and 405 answers, in the daemon's error envelope."""
    assert isinstance(exc, HTTPException)
    if exc.status_code == 404:
        body = error_body(f"No route for {request.method} {request.url.path}", "not_found")
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
        body = error_body(message, "method_not_allowed")
    else:
        body = error_body(str(exc.detail))
    return JSONResponse(body, exc.status_code, headers=exc.headers)


def api(handler: Callable[..., Awaitable[Response]]) -> Handler:
    """Answer :class:`ApiError` with its envelope and any other failure with a 500 envelope."""

    @wraps(handler)
    async def run(request: Request) -> Response:
        try:
            client_id(request)
            return await handler(request)
        except ApiError as exc:
            return JSONResponse(exc.body(), exc.status, headers=exc.headers)
        except Forwarded as forwarded:
            return forwarded.response
        except ClientDisconnect:
            return Response(status_code=400)
        except Exception as exc:
            _log.error(f"{request.method} {request.url.path} failed: {exc!r}")
            return JSONResponse({"error": "Internal error", "code": "internal_error"}, 500)

    return run


async def read_json(request: Request, limit: int) -> Any:
    """The parsed JSON body (``None`` when empty), made safe (:func:`clean_json`: lone surrogates
    replaced); 413 past ``limit`` bytes, 400 if malformed or nested absurdly deep."""
    chunks: list[bytes] = []
    size = 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise ApiError(
                413,
                f"Request body too large (the limit is {limit} bytes)",
                "payload_too_large",
                limit=limit,
            )
        chunks.append(chunk)
    raw = b"".join(chunks)
    request.scope[BODY_SCOPE_KEY] = raw
    if not raw.strip():
        return None
    try:
        return clean_json(json.loads(raw))
    except RecursionError:  # the parser's own depth limit
        problem = "nested too deeply"
    except (ValueError, UnicodeDecodeError) as exc:  # TooDeep included
        problem = str(exc)
    raise ApiError(400, f"Invalid JSON in request body: {problem}", "invalid_json")


def client_id(request: Request) -> str | None:
    value = request.headers.get(CLIENT_ID_HEADER)
    if value is not None and not _CLIENT_ID.match(value):
        raise ApiError(
            400,
            "X-Cairn-Client-Id must be 1-128 characters of A-Z a-z 0-9 . _ : -",
            "invalid_client_id",
        )
    return value


async def wait_for_disconnect(request: Request) -> None:
    """Return once the client has gone (the request body must have been read already)."""
    while True:
        message = await request.receive()
        if message["type"] == "http.disconnect":
            return


def replayed_admission(
    prompt_id: str,
    last_event_id: int,
    digest: str | None,
    raw: Any,
    state: str | None = None,
) -> Response:
    """The answer to a prompt retried with its ``Idempotency-Key``: the admission it got the
    first time (the prompt is not run again); 422 if the key was used for another prompt."""
    if digest is not None and digest != prompt_digest(raw):
        raise ApiError(
            422,
            "This Idempotency-Key was used for a different prompt; use a new key.",
            "idempotency_key_reused",
            promptId=prompt_id,
        )
    body: dict[str, Any] = {"promptId": prompt_id, "lastEventId": last_event_id, "replayed": True}
    if state is not None:
        body["state"] = state
    return JSONResponse(body, 202, headers={"Idempotent-Replayed": "true"})


class Forwarded(Exception):
    """The owner replica answered the request: send its answer back as it is."""

    def __init__(self, response: Response) -> None:
        super().__init__("forwarded")
        self.response = response


def is_uuid(value: str) -> bool:
    import uuid

    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36


class RawResponse(Response):
    """Lets a route return a plain ASGI app (the event stream) where Starlette wants a Response."""

    def __init__(self, app: Any) -> None:
        super().__init__()
        self._app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await self._app(scope, receive, send)


def cursor_of(value: str | None) -> int | None:
    """A ``Last-Event-ID``; malformed → ``None`` (live events only)."""
    if value is None:
        return None
    try:
        cursor = int(value.strip())
    except ValueError:
        return None
    return cursor if cursor >= 0 else None


def max_queued_of(value: str | None) -> int | None:
    if value is None:
        return None
    try:
        size = int(value)
    except ValueError:
        size = -1
    if not MIN_MAX_QUEUED <= size <= MAX_MAX_QUEUED:
        raise ApiError(
            400,
            f"maxQueued must be an integer from {MIN_MAX_QUEUED} to {MAX_MAX_QUEUED}.",
            "invalid_max_queued",
        )
    return size
