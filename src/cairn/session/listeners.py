"""Who hears a session's events outside a turn: a mode a client set, commands an MCP server
added, a title, memory saved after the answer. A turn's own events go to the sink its prompt
gave; every front end that listens renders these too."""

from __future__ import annotations

from collections.abc import Callable

from cairn.debug_log import get_logger
from cairn.vocabulary.events import EventSink, SessionEvent

__all__ = ["Listeners"]

_log = get_logger("SESSION")


class Listeners:
    def __init__(self) -> None:
        self._sinks: list[EventSink] = []

    def __bool__(self) -> bool:
        return bool(self._sinks)

    def add(self, sink: EventSink, *, removed: Callable[[], None]) -> Callable[[], None]:
        """Let ``sink`` hear them; returns the function that stops it (``removed`` follows)."""
        self._sinks.append(sink)

        def remove() -> None:
            if sink in self._sinks:
                self._sinks.remove(sink)
            removed()

        return remove

    async def emit(self, event: SessionEvent) -> None:
        """Send ``event`` to every listener. Never raises."""
        for sink in list(self._sinks):
            try:
                await sink(event)
            except Exception as exc:  # one broken listener must not stop the others
                _log.warning(f"a session listener failed on {type(event).__name__}: {exc!r}")
