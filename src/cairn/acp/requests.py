"""Withdrawing requests cairn sent the client (``$/cancel_request``).

When a turn is cancelled or superseded while cairn waits for the client (a permission request,
a question, a terminal), the client must learn that nobody waits any more, or it keeps a dead
dialog on screen. The SDK forgets a request whose caller was cancelled but tells the client
nothing, so :class:`OutgoingRequests` wraps the connection's transport: it sees the id of each
request a task sends, and :meth:`OutgoingRequests.withdrawable` sends ``$/cancel_request`` for
the requests still unanswered when the awaiting task is cancelled.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable
from contextvars import ContextVar
from typing import Any, Protocol, TypeVar

from cairn.debug_log import get_logger

__all__ = ["CANCEL_REQUEST_METHOD", "OutgoingRequests", "withdrawable"]

CANCEL_REQUEST_METHOD = "$/cancel_request"
_T = TypeVar("_T")
_log = get_logger("ACP")
# The ids of the requests sent by the code a ``withdrawable`` call awaits (per task).
_SENT: ContextVar[list[str | int] | None] = ContextVar("cairn_acp_sent", default=None)


class _Transport(Protocol):
    async def send(self, message: dict[str, Any]) -> None: ...

    async def receive(self) -> dict[str, Any] | None: ...

    async def close(self) -> None: ...


class OutgoingRequests:
    """A transport that remembers which requests are unanswered (see the module docstring)."""

    def __init__(self, transport: _Transport) -> None:
        self._transport = transport
        self._unanswered: set[str | int] = set()

    async def send(self, message: dict[str, Any]) -> None:
        request_id = message.get("id")
        if "method" in message and isinstance(request_id, str | int):
            self._unanswered.add(request_id)
            sent = _SENT.get()
            if sent is not None:
                sent.append(request_id)
        await self._transport.send(message)

    async def receive(self) -> dict[str, Any] | None:
        message = await self._transport.receive()
        if message is not None and "method" not in message:  # a response to one of ours
            request_id = message.get("id")
            if isinstance(request_id, str | int):
                self._unanswered.discard(request_id)
        return message

    async def close(self) -> None:
        await self._transport.close()

    async def withdrawable(self, request: Awaitable[_T]) -> _T:
        """Await ``request``; when cancelled, withdraw what it left unanswered, then re-raise."""
        sent: list[str | int] = []
        token = _SENT.set(sent)
        try:
            return await request
        except asyncio.CancelledError:
            await asyncio.shield(self._withdraw(sent))
            raise
        finally:
            _SENT.reset(token)

    async def _withdraw(self, sent: list[str | int]) -> None:
        for request_id in sent:
            if request_id not in self._unanswered:
                continue
            self._unanswered.discard(request_id)
            notification = {
                "jsonrpc": "2.0",
                "method": CANCEL_REQUEST_METHOD,
                "params": {"requestId": request_id},
            }
            with contextlib.suppress(ConnectionError):
                await self._transport.send(notification)
            _log.info(f"withdrew request {request_id!r} (its turn ended)")


async def withdrawable(requests: OutgoingRequests | None, request: Awaitable[_T]) -> _T:
    """:meth:`OutgoingRequests.withdrawable`, or a plain await without a tracker."""
    if requests is None:
        return await request
    return await requests.withdrawable(request)
