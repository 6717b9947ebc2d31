"""The per-session event bus: monotonic ids, a replay ring, and bounded SSE subscribers.

Every event a session publishes gets the next id (from 1) and is serialised once into an SSE
frame. A subscriber that reconnects with ``Last-Event-ID: n`` is first sent the retained frames
with ids above ``n``; live frames then queue per subscriber. A subscriber whose queue reaches 75 %
of its bound gets one ``slow_client_warning`` (re-armed once the writer drains it); one that
overflows gets ``client_evicted`` and its stream ends, so it reconnects and replays from the ring.
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from cairn.abort import wait_until_set
from cairn.daemon.errors import json_bytes

__all__ = [
    "ENVELOPE_VERSION",
    "Envelope",
    "EventBus",
    "Subscription",
    "envelope_json",
    "sse_frame",
]

ENVELOPE_VERSION = 1
SLOW_CLIENT_RATIO = 0.75  # queue fill that triggers slow_client_warning
HEARTBEAT_FRAME = b": heartbeat\n\n"


@dataclass(frozen=True, slots=True)
class Envelope:
    id: int | None
    type: str
    data: Mapping[str, Any]
    frame: bytes


def envelope_json(
    event_id: int | None,
    event_type: str,
    data: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> bytes:
    """The envelope ``{id, v, type, data, ..., _meta}`` as one line of JSON."""
    envelope: dict[str, Any] = {}
    if event_id is not None:
        envelope["id"] = event_id
    envelope.update(v=ENVELOPE_VERSION, type=event_type, data=dict(data))
    if extra:
        envelope.update(extra)
    envelope["_meta"] = {"serverTimestamp": int(time.time() * 1000)}
    return json_bytes(envelope)


def sse_frame(
    event_id: int | None,
    event_type: str,
    data: Mapping[str, Any],
    extra: Mapping[str, Any] | None = None,
) -> Envelope:
    """Build an envelope ``{id, v, type, data, ...}`` and its ``id:``/``event:``/``data:`` frame."""
    head = f"id: {event_id}\n" if event_id is not None else ""
    line = envelope_json(event_id, event_type, data, extra)
    frame = f"{head}event: {event_type}\n".encode() + b"data: " + line + b"\n\n"
    return Envelope(event_id, event_type, data, frame)


class Unsubscribes(Protocol):
    """Where a subscription goes away from when it is evicted (a bus, a replica's hub)."""

    def unsubscribe(self, subscription: Subscription) -> None: ...


class Subscription:
    """One SSE reader: replayed frames, then live frames, bounded by ``max_queued``."""

    def __init__(
        self, bus: Unsubscribes, max_queued: int, replay: list[bytes], *, floor: int = 0
    ) -> None:
        """``floor``: events with ids up to it are not pushed (the reader had them)."""
        self._bus = bus
        self._floor = floor
        self.bus = bus
        self._max_queued = max_queued
        self._replay: deque[bytes] = deque(replay)
        self._live: deque[tuple[int | None, bytes]] = deque()
        self._wake = asyncio.Event()
        self._warned = False
        self._closing = False  # no more frames are accepted; the queue is still sent
        self.last_taken_id = 0
        self.evicted = False
        if replay:
            self._wake.set()

    @property
    def closed(self) -> bool:
        return self._closing

    @property
    def queued(self) -> int:
        return len(self._live)

    def push(self, envelope: Envelope) -> None:
        if self._closing or (envelope.id is not None and envelope.id <= self._floor):
            return
        if len(self._live) >= self._max_queued:
            self._evict()
            return
        self._live.append((envelope.id, envelope.frame))
        if not self._warned and len(self._live) >= self._max_queued * SLOW_CLIENT_RATIO:
            self._warned = True
            warning = {
                "queueSize": len(self._live),
                "maxQueued": self._max_queued,
                "lastEventId": self.last_taken_id,
            }
            self._live.append((None, sse_frame(None, "slow_client_warning", warning).frame))
        self._wake.set()

    def close(self, final: bytes | None = None) -> None:
        """Accept no more frames; ``final`` is sent after what is already queued."""
        if self._closing:
            return
        if final is not None:
            self._live.append((None, final))
        self._closing = True
        self._wake.set()

    def _evict(self) -> None:
        # Drop the queued events (a reconnect replays them) but keep the slow-client warning.
        self._live = deque(item for item in self._live if item[0] is None)
        self.evicted = True
        data = {"reason": "queue_overflow", "droppedAfter": self.last_taken_id}
        self._bus.unsubscribe(self)
        self.close(sse_frame(None, "client_evicted", data).frame)

    def take(self) -> list[bytes]:
        """Everything queued now (replay first); the queue is empty afterwards."""
        frames = list(self._replay)
        self._replay.clear()
        for event_id, frame in self._live:
            frames.append(frame)
            if event_id is not None:
                self.last_taken_id = event_id
        self._live.clear()
        self._warned = False  # the queue is empty now: the next episode may warn again
        self._wake.clear()
        return frames

    @property
    def drained(self) -> bool:
        return self._closing and not self._replay and not self._live

    async def wait(self, timeout: float) -> bool:
        """Wait until frames are queued or the subscription closes; False on timeout."""
        return await wait_until_set(self._wake, timeout)


class EventBus:
    def __init__(self, ring_size: int, max_queued: int) -> None:
        self._ring: deque[tuple[int, bytes]] = deque(maxlen=ring_size)  # (id, frame)
        self._ids = itertools.count(1)
        self._last_id = 0
        self._max_queued = max_queued
        self._subscribers: set[Subscription] = set()
        self._closed = False

    @property
    def last_id(self) -> int:
        return self._last_id

    @property
    def subscriber_count(self) -> int:
        return len(self._subscribers)

    def publish(
        self, event_type: str, data: Mapping[str, Any], extra: Mapping[str, Any] | None = None
    ) -> Envelope | None:
        if self._closed:
            return None
        event_id = next(self._ids)
        envelope = sse_frame(event_id, event_type, data, extra)
        self._last_id = event_id
        self._ring.append((event_id, envelope.frame))
        for subscriber in list(self._subscribers):
            subscriber.push(envelope)
        return envelope

    def subscribe(self, last_event_id: int | None, max_queued: int | None = None) -> Subscription:
        """A new reader; with ``last_event_id`` it first gets the retained events after it."""
        replay = self._replay_frames(last_event_id) if last_event_id is not None else []
        subscription = Subscription(self, max_queued or self._max_queued, replay)
        if self._closed:
            subscription.close()
        else:
            self._subscribers.add(subscription)
        return subscription

    def unsubscribe(self, subscription: Subscription) -> None:
        self._subscribers.discard(subscription)

    def close(self, event_type: str | None = None, data: Mapping[str, Any] | None = None) -> None:
        """Publish a last event (e.g. ``session_closed``) and end every subscriber's stream."""
        if event_type is not None:
            self.publish(event_type, data or {})
        self._closed = True
        for subscriber in list(self._subscribers):
            subscriber.close()
        self._subscribers.clear()

    def _replay_frames(self, last_event_id: int) -> list[bytes]:
        earliest = self._ring[0][0] if self._ring else self._last_id + 1
        frames: list[bytes] = []
        start = max(last_event_id + 1 - earliest, 0)
        if last_event_id > self._last_id:
            frames.append(self._resync("epoch_reset", last_event_id, earliest))
            start = 0
        elif last_event_id + 1 < earliest:
            frames.append(self._resync("ring_evicted", last_event_id, earliest))
        replayed = [frame for _, frame in itertools.islice(self._ring, start, None)]
        frames.extend(replayed)
        frames.append(sse_frame(None, "replay_complete", {"replayedCount": len(replayed)}).frame)
        return frames

    @staticmethod
    def _resync(reason: str, last_event_id: int, earliest: int) -> bytes:
        data = {
            "reason": reason,
            "lastDeliveredId": last_event_id,
            "earliestAvailableId": earliest,
        }
        return sse_frame(None, "state_resync_required", data).frame
