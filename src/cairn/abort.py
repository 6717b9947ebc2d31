"""Cancellation with a reason, shared by turns, Recall and background memory work, and the
bounded wait for an event that gives up at a timeout.

asyncio cancellation stops the awaiting task; an :class:`AbortSignal` also says *why* (telemetry
records ``new_query`` apart from ``abort``) and lets several tasks watch one cancellation.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable

__all__ = ["AbortController", "AbortSignal", "Aborted", "wait_until_set"]


class Aborted(Exception):
    """Raised by :meth:`AbortSignal.raise_if_aborted`."""

    def __init__(self, reason: str | None):
        super().__init__(reason or "aborted")
        self.reason = reason


class AbortSignal:
    def __init__(self) -> None:
        self._reason: str | None = None
        self._aborted = False
        self._listeners: list[Callable[[str | None], None]] = []
        self._event: asyncio.Event | None = None

    @property
    def aborted(self) -> bool:
        return self._aborted

    @property
    def reason(self) -> str | None:
        return self._reason

    def add_listener(self, listener: Callable[[str | None], None]) -> Callable[[], None]:
        """Call ``listener(reason)`` on abort (at once if already aborted); returns a remover."""
        if self._aborted:
            listener(self._reason)
            return lambda: None
        self._listeners.append(listener)

        def remove() -> None:
            if listener in self._listeners:
                self._listeners.remove(listener)

        return remove

    def raise_if_aborted(self) -> None:
        if self._aborted:
            raise Aborted(self._reason)

    async def wait(self) -> str | None:
        if not self._aborted:
            if self._event is None:
                self._event = asyncio.Event()
            await self._event.wait()
        return self._reason

    def _fire(self, reason: str | None) -> None:
        if self._aborted:
            return
        self._aborted = True
        self._reason = reason
        if self._event is not None:
            self._event.set()
        listeners, self._listeners = self._listeners, []
        for listener in listeners:
            listener(reason)


class AbortController:
    def __init__(self) -> None:
        self.signal = AbortSignal()

    def abort(self, reason: str | None = None) -> None:
        self.signal._fire(reason)

    @classmethod
    def linked(cls, parent: AbortSignal, reason: str = "abort") -> AbortController:
        """A controller that aborts (with ``reason``) when ``parent`` does."""
        child = cls()
        parent.add_listener(lambda _r: child.abort(reason))
        return child


async def wait_until_set(event: asyncio.Event, timeout: float | None) -> bool:
    """Wait for ``event``; False if it is still not set after ``timeout`` seconds (``None``: no
    bound)."""
    if event.is_set():
        return True
    try:
        async with asyncio.timeout(timeout):
            await event.wait()
    except TimeoutError:
        return False
    return True
