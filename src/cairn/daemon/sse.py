"""The ``text/event-stream`` response of ``GET /session/{id}/events``.

A plain ASGI response rather than a framework helper: it writes whatever frames are queued in
one chunk, sends ``: heartbeat`` when the stream has been idle, and stops (unsubscribing) as soon
as the client disconnects or the subscription ends (session closed, client evicted).
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING

from cairn.daemon.bus import HEARTBEAT_FRAME, Subscription, Unsubscribes

if TYPE_CHECKING:
    from starlette.types import Receive, Scope, Send

__all__ = ["EventStreamResponse"]

_HEADERS = [
    (b"content-type", b"text/event-stream; charset=utf-8"),
    (b"cache-control", b"no-cache"),
    (b"x-accel-buffering", b"no"),  # tell reverse proxies not to buffer the stream
]


class EventStreamResponse:
    def __init__(self, bus: Unsubscribes, subscription: Subscription, heartbeat: float) -> None:
        self._bus = bus
        self._subscription = subscription
        self._heartbeat = heartbeat
        self._disconnected = False

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        watcher = asyncio.ensure_future(self._watch(receive))
        try:
            await send({"type": "http.response.start", "status": 200, "headers": _HEADERS})
            await self._pump(send)
        except OSError:
            pass  # the client went away mid-write
        finally:
            watcher.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await watcher
            self._bus.unsubscribe(self._subscription)

    async def _pump(self, send: Send) -> None:
        subscription = self._subscription
        while True:
            ready = await subscription.wait(self._heartbeat)
            if self._disconnected:
                return
            if not ready:
                await send(
                    {"type": "http.response.body", "body": HEARTBEAT_FRAME, "more_body": True}
                )
                continue
            frames = subscription.take()
            if frames:
                await send(
                    {"type": "http.response.body", "body": b"".join(frames), "more_body": True}
                )
            if subscription.drained:
                await send({"type": "http.response.body", "body": b"", "more_body": False})
                return

    async def _watch(self, receive: Receive) -> None:
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                self._disconnected = True
                self._subscription.close()
                return
