"""Reading a ``text/event-stream`` body into :class:`DaemonEvent` objects."""

from __future__ import annotations

import json
from collections.abc import AsyncGenerator, AsyncIterator
from typing import Any

from cairn.sdk.types import DaemonEvent

__all__ = ["parse_events"]


async def parse_events(lines: AsyncIterator[str]) -> AsyncGenerator[DaemonEvent, None]:
    """Envelopes from SSE lines; comments (heartbeats) are skipped, bad frames dropped."""
    data: list[str] = []
    event_type: str | None = None
    event_id: str | None = None
    async for line in lines:
        if line == "":
            if data:
                event = _event("\n".join(data), event_type, event_id)
                if event is not None:
                    yield event
            data, event_type, event_id = [], None, None
            continue
        if line.startswith(":"):
            continue
        name, _, value = line.partition(":")
        value = value.removeprefix(" ")
        if name == "data":
            data.append(value)
        elif name == "event":
            event_type = value
        elif name == "id":
            event_id = value


def _event(raw: str, event_type: str | None, event_id: str | None) -> DaemonEvent | None:
    try:
        envelope: Any = json.loads(raw)
    except ValueError:
        return None
    if not isinstance(envelope, dict):
        return None
    kind = envelope.get("type") or event_type
    if not isinstance(kind, str):
        return None
    identifier = envelope.get("id")
    if identifier is None and event_id is not None and event_id.isdigit():
        identifier = int(event_id)
    data = envelope.get("data")
    return DaemonEvent(
        id=identifier if isinstance(identifier, int) else None,
        type=kind,
        data=data if isinstance(data, dict) else {},
        raw=envelope,
    )
