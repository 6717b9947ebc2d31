"""Forwarding a request to the replica that holds its session's lease (``--database``).

The request goes as it came (method, path, query, body, the client's headers but ``Host``,
``Origin`` and hop-by-hop ones), marked with ``X-Cairn-Forwarded-By`` so the owner never
forwards it again (if it lost the lease meanwhile, it waits for it or answers 503). The
owner's answer comes back as is. A replica that cannot be reached is reported to the caller
(:class:`OwnerUnreachable`), which then waits for the dead owner's lease to expire; one that
stopped answering after it got the request is a ``502 replica_unreachable`` (it may have acted:
the client retries what may run twice, as the SDK does).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import httpx
from starlette.responses import Response

from cairn.daemon.errors import ApiError

if TYPE_CHECKING:
    from starlette.requests import Request

__all__ = ["Forwarder", "OwnerUnreachable"]

FORWARD_TIMEOUT_SECONDS = 120.0  # a forwarded recap waits on the model (the recap bound is 60)
CONNECT_TIMEOUT_SECONDS = 2.0  # an owner that does not accept within this counts as gone
_DROPPED = frozenset(
    {"host", "origin", "content-length", "connection", "keep-alive", "transfer-encoding", "te",
     "upgrade", "proxy-authorization", "proxy-connection", "trailer"}
)  # fmt: skip
_DROPPED_BACK = frozenset({"content-length", "connection", "transfer-encoding", "keep-alive"})


class OwnerUnreachable(Exception):
    """The owner's address does not answer."""


class Forwarder:
    def __init__(self, replica_id: str, header: str) -> None:
        self._replica_id = replica_id
        self._header = header
        self._http = httpx.AsyncClient(
            trust_env=False,
            timeout=httpx.Timeout(FORWARD_TIMEOUT_SECONDS, connect=CONNECT_TIMEOUT_SECONDS),
            limits=httpx.Limits(max_connections=None),
        )

    async def forward(self, request: Request, base_url: str, body: bytes | None = None) -> Response:
        """Send ``request`` (``body``: what a route read of it already) to ``base_url``."""
        if body is None:
            body = await request.body()
        headers = [(k, v) for k, v in request.headers.items() if k.lower() not in _DROPPED]
        headers.append((self._header, self._replica_id))
        url = base_url.rstrip("/") + request.url.path
        if request.url.query:
            url += "?" + request.url.query
        try:
            answer = await self._http.request(request.method, url, content=body, headers=headers)
        except (httpx.ConnectError, httpx.ConnectTimeout) as error:
            raise OwnerUnreachable(str(error)) from error
        except httpx.TransportError as error:  # it may have acted: only the client may retry
            raise ApiError(
                502,
                f"The replica running this session stopped answering ({error!r}); retry the "
                "request if it may run twice (a prompt with its Idempotency-Key).",
                "replica_unreachable",
            ) from None
        back: list[tuple[str, str]] = [
            (k, v) for k, v in answer.headers.items() if k.lower() not in _DROPPED_BACK
        ]
        response = Response(answer.content, answer.status_code)
        response.raw_headers = [(k.encode("latin-1"), v.encode("latin-1")) for k, v in back] + [
            (b"content-length", str(len(answer.content)).encode())
        ]
        return response

    async def aclose(self) -> Any:
        await self._http.aclose()
