"""Events across replicas: a session's event stream read from the database's event log.

With ``--database`` a session's events are rows of ``cairn_session_events`` (ids from 1, one
sequence per session, kept across replicas). The replica holding the session's lease writes
them (:class:`LogBus`, through the session's writer, which hands them to this process's
subscribers once committed). Any replica serves ``GET /session/{id}/events``: the
:class:`EventHub` replays the log after ``Last-Event-ID``, then follows it: one ``LISTEN``
connection per replica hears every commit's ``NOTIFY`` and fetches what is new for the sessions
its clients watch, and a poll every :data:`POLL_SECONDS` catches a lost notification (and
notices a session whose owner died mid-turn, so the stream reports the interrupted turn even
when no other request comes). The same connection hears a draining replica's handovers (every
``NOTIFY`` wakes each listening connection of the database once: one per replica, not two). A
session this replica holds the lease on is neither fetched
after a ``NOTIFY`` of its own commit nor polled: every new event of it is this replica's, handed
over when committed.

Events reach a subscriber in id order, each once: a feed delivers only ids above the last it
delivered, whether they come from this replica's commits, a notification or a poll.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable, Mapping
from typing import TYPE_CHECKING, Any

from cairn.daemon.bus import Envelope, Subscription, envelope_json, sse_frame
from cairn.debug_log import get_logger
from cairn.recording.store.schema import CHANNEL, HANDOVER_CHANNEL

if TYPE_CHECKING:
    import psycopg

    from cairn.database.connection import Database
    from cairn.recording.store.postgres import (
        PostgresSessionStore,
        SessionWriter,
        StoredEvent,
    )

__all__ = ["POLL_SECONDS", "EventHub", "LogBus"]

POLL_SECONDS = 2.0  # a watched session's log is read at least this often (a lost NOTIFY)
LISTEN_RETRY_SECONDS = 1.0  # wait before listening again after the connection dropped
CLOSING_TYPES = ("session_closed",)  # after these a session's streams end
_log = get_logger("DAEMON")

FeedKey = tuple[str, str, str]  # (tenant, project, session id)
Orphaned = Callable[["PostgresSessionStore", str], Awaitable[None]]
HandedOver = Callable[[str, str, str], None]  # (tenant, project, session id)


class LogBus:
    """A session's events as the daemon's routes publish them, written to the log by the
    session's writer (only the lease holder publishes)."""

    def __init__(self, hub: EventHub, store: PostgresSessionStore, session_id: str) -> None:
        self.hub = hub
        self.store = store
        self.session_id = session_id
        self.writer: SessionWriter | None = None  # while this replica holds the lease
        self._last_id = 0
        self._closed = False

    @property
    def last_id(self) -> int:
        return self.writer.event_seq if self.writer is not None else self._last_id

    @property
    def subscriber_count(self) -> int:
        return self.hub.subscriber_count(self.store, self.session_id)

    def attach(self, writer: SessionWriter) -> None:
        self.writer = writer
        self._closed = False

    def detach(self) -> None:
        if self.writer is not None:
            self._last_id = self.writer.event_seq
        self.writer = None

    def publish(
        self, event_type: str, data: Mapping[str, Any], extra: Mapping[str, Any] | None = None
    ) -> Envelope | None:
        writer = self.writer
        if writer is None or self._closed:
            _log.warning(f"session {self.session_id}: {event_type} not published (no lease)")
            return None
        body = dict(data)

        def envelope(event_id: int) -> str:
            return envelope_json(event_id, event_type, body, extra).decode("utf-8")

        stored = writer.add_event(event_type, envelope)
        if stored is None:
            return None
        if body.get("sessionUpdate") == "available_commands_update":  # any replica lists them
            writer.change(commands=body)
        return Envelope(stored.seq, event_type, body, stored.frame)

    def publish_local(self, event_type: str, data: Mapping[str, Any]) -> None:
        """An event that cannot be kept (the database is gone): to this replica's subscribers
        only, without an id (a reconnect never asks for it)."""
        self.hub.broadcast(self.store, self.session_id, sse_frame(None, event_type, data))

    def close(self, event_type: str | None = None, data: Mapping[str, Any] | None = None) -> None:
        """Publish a last event (``session_closed``): every replica's streams of it end."""
        if event_type is not None:
            self.publish(event_type, data or {})
        self._closed = True


class _Feed:
    """One watched session on this replica: its subscribers and the last id they got."""

    def __init__(self, store: PostgresSessionStore, session_id: str) -> None:
        self.store = store
        self.session_id = session_id
        self.subscribers: set[Subscription] = set()
        self.joining = 0  # subscribers being added (the feed stays while they are)
        self.last = -1  # -1: nothing read yet
        self.lock = asyncio.Lock()
        self.checked_orphan = 0.0

    def deliver(self, events: list[StoredEvent]) -> bool:
        """Hand events above :attr:`last` to every subscriber; False when one is missing (a
        gap: read the log)."""
        complete = True
        for event in events:
            if event.seq <= self.last:
                continue
            if self.last >= 0 and event.seq != self.last + 1:
                complete = False
                break
            self.last = event.seq
            envelope = Envelope(event.seq, event.type, {}, event.frame)
            for subscriber in list(self.subscribers):
                subscriber.push(envelope)
            if event.type in CLOSING_TYPES:
                for subscriber in list(self.subscribers):
                    subscriber.close()
                self.subscribers.clear()
        return complete


class EventHub:
    """The event streams this replica serves, fed by the log (see the module docstring)."""

    def __init__(
        self,
        database: Database,
        *,
        ring_size: int,
        max_queued: int,
        orphaned: Orphaned | None = None,
        orphan_seconds: float = 3.0,
        handed_over: HandedOver | None = None,
    ) -> None:
        self.database = database
        self.ring_size = ring_size
        self.max_queued = max_queued
        self.orphaned = orphaned  # a watched session whose owner died with work left
        self.orphan_seconds = orphan_seconds
        self.handed_over = handed_over  # a draining replica's queued prompts (HANDOVER_CHANNEL)
        self._feeds: dict[FeedKey, _Feed] = {}
        self._tasks: list[asyncio.Task[None]] = []
        self._pending: set[asyncio.Task[None]] = set()  # catch-ups under way
        self._listener: psycopg.AsyncConnection[Any] | None = None
        self._ended = 0  # how many times every stream was ended (end_streams)
        self.listening = asyncio.Event()

    # ----- lifecycle -----

    def start(self) -> None:
        self._tasks = [
            asyncio.ensure_future(self._listen()),
            asyncio.ensure_future(self._poll()),
        ]

    async def aclose(self) -> None:
        for task in [*self._tasks, *self._pending]:
            task.cancel()
        await asyncio.gather(*self._tasks, *self._pending, return_exceptions=True)
        self._tasks = []
        self.end_streams()

    def end_streams(self) -> None:
        """End every stream this replica serves (its clients reconnect, to another replica,
        with ``Last-Event-ID``: nothing is lost)."""
        self._ended += 1  # a stream joining now ends as soon as it joined
        for feed in self._feeds.values():
            for subscriber in list(feed.subscribers):
                subscriber.close()
            feed.subscribers.clear()
        self._feeds.clear()

    # ----- subscribers -----

    def subscriber_count(self, store: PostgresSessionStore, session_id: str) -> int:
        feed = self._feeds.get(_key(store, session_id))
        return len(feed.subscribers) if feed is not None else 0

    async def subscribe(
        self,
        store: PostgresSessionStore,
        session_id: str,
        last_event_id: int | None,
        max_queued: int | None = None,
        *,
        head: int | None = None,
    ) -> Subscription:
        """A reader of the session's events; with ``last_event_id`` the logged events after it
        come first (``replay_complete`` ends them, as on one daemon). ``head``: the session's
        last committed event id when this replica knows it (it holds the lease)."""
        key = _key(store, session_id)
        ended = self._ended
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = _Feed(store, session_id)
        feed.joining += 1  # until it is added, the last subscriber leaving keeps the feed
        try:
            async with feed.lock:
                if feed.last < 0:
                    if head is None:
                        _, head, _ = await store.events_after(session_id, 0, limit=0)
                    feed.last = head
                replay = (
                    await self._replay(store, session_id, last_event_id, feed.last)
                    if last_event_id is not None
                    else []
                )
                subscription = Subscription(
                    _Unsubscriber(self, key),
                    max_queued or self.max_queued,
                    replay,
                    floor=last_event_id or 0,  # this feed may be behind the client: no repeats
                )
                feed.subscribers.add(subscription)
        finally:
            feed.joining -= 1
            self._drop_if_unwatched(key, feed)
        if self._ended != ended:  # every stream was ended while this one joined
            subscription.close()
            self.unsubscribe(key, subscription)
        return subscription

    async def _replay(
        self, store: PostgresSessionStore, session_id: str, after: int, until: int
    ) -> list[bytes]:
        events, last, earliest = await store.events_after(
            session_id, after, limit=self.ring_size, until=until
        )
        frames: list[bytes] = []
        if after > last:
            frames.append(_resync("epoch_reset", after, earliest))
        elif after + 1 < earliest:
            frames.append(_resync("ring_evicted", after, earliest))
        frames += [event.frame for event in events]
        done = sse_frame(None, "replay_complete", {"replayedCount": len(events)})
        frames.append(done.frame)
        return frames

    def unsubscribe(self, key: FeedKey, subscription: Subscription) -> None:
        feed = self._feeds.get(key)
        if feed is None:
            return
        feed.subscribers.discard(subscription)
        self._drop_if_unwatched(key, feed)

    def _drop_if_unwatched(self, key: FeedKey, feed: _Feed) -> None:
        if not feed.subscribers and not feed.joining and self._feeds.get(key) is feed:
            del self._feeds[key]

    def broadcast(self, store: PostgresSessionStore, session_id: str, envelope: Envelope) -> None:
        feed = self._feeds.get(_key(store, session_id))
        if feed is not None:
            for subscriber in list(feed.subscribers):
                subscriber.push(envelope)

    # ----- what feeds them -----

    def committed(self, store: PostgresSessionStore, session_id: str, events: list[Any]) -> None:
        """Events this replica just committed (its subscribers get them without a query)."""
        feed = self._feeds.get(_key(store, session_id))
        if feed is None:
            return
        # A subscriber being added replays the log up to feed.last: deliver after it, in order.
        if feed.lock.locked() or not feed.deliver(events):
            self._spawn(self._catch_up(feed))

    async def _catch_up(self, feed: _Feed) -> None:
        async with feed.lock:
            while feed.subscribers:
                events, last, _ = await feed.store.events_after(
                    feed.session_id, feed.last, limit=self.ring_size
                )
                feed.deliver(events)
                if not events or feed.last >= last:
                    return

    async def _listen(self) -> None:
        while True:
            try:
                async with await self.database.aconnect(autocommit=True) as connection:
                    self._listener = connection
                    await connection.execute(f"LISTEN {CHANNEL}")
                    if self.handed_over is not None:  # one listener: each NOTIFY wakes it once
                        await connection.execute(f"LISTEN {HANDOVER_CHANNEL}")
                    self.listening.set()
                    for feed in list(self._feeds.values()):  # what committed before LISTEN
                        self._spawn(self._catch_up(feed))
                    async for notice in connection.notifies():
                        if notice.channel == CHANNEL:
                            self._notified(notice.payload)
                        else:
                            self._handed(notice.payload)
            except asyncio.CancelledError:
                raise
            except Exception as error:
                _log.debug(f"event log listener: {error!r}; listening again")
            finally:
                self.listening.clear()
                self._listener = None
            await asyncio.sleep(LISTEN_RETRY_SECONDS)

    def _notified(self, payload: str) -> None:
        parts = payload.split("\t")
        if len(parts) != 4 or not parts[3].isdigit():
            return
        feed = self._feeds.get((parts[0], parts[1], parts[2]))
        if feed is None or int(parts[3]) <= feed.last:
            return
        writer = feed.store.holder(feed.session_id)
        if writer is not None and writer.lease.event_seq < int(parts[3]) <= writer.event_seq:
            return  # this replica's own commit: committed() hands its events over
        self._spawn(self._catch_up(feed))

    def _handed(self, payload: str) -> None:
        parts = payload.split("\t")
        if len(parts) == 3 and self.handed_over is not None:
            self.handed_over(parts[0], parts[1], parts[2])

    async def _poll(self) -> None:
        while True:
            await asyncio.sleep(POLL_SECONDS)
            now = time.monotonic()
            for feed in list(self._feeds.values()):
                if _leased_here(feed):
                    continue  # its events come from committed(), not the log
                await self._safely(self._catch_up(feed))
                if self.orphaned is not None and now - feed.checked_orphan >= self.orphan_seconds:
                    feed.checked_orphan = now
                    await self._safely(self.orphaned(feed.store, feed.session_id))

    def _spawn(self, work: Awaitable[None]) -> None:
        task = asyncio.ensure_future(self._safely(work))
        self._pending.add(task)
        task.add_done_callback(self._pending.discard)

    @staticmethod
    async def _safely(work: Awaitable[None]) -> None:
        try:
            await work
        except asyncio.CancelledError:
            raise
        except Exception as error:  # the database is away: the next poll tries again
            _log.debug(f"event log: {error!r}")


class _Unsubscriber:
    """What a :class:`Subscription` calls ``unsubscribe`` on (the in-memory bus's role)."""

    def __init__(self, hub: EventHub, key: FeedKey) -> None:
        self._hub = hub
        self._key = key

    def unsubscribe(self, subscription: Subscription) -> None:
        self._hub.unsubscribe(self._key, subscription)


def _leased_here(feed: _Feed) -> bool:
    """This replica holds the session's lease and ``feed`` has every event written before
    it took the lease: the rest are this replica's commits (:meth:`EventHub.committed`)."""
    writer = feed.store.holder(feed.session_id)
    return writer is not None and feed.last >= writer.lease.event_seq


def _key(store: PostgresSessionStore, session_id: str) -> FeedKey:
    return (store.tenant, store.project, session_id)


def _resync(reason: str, last_event_id: int, earliest: int) -> bytes:
    data = {"reason": reason, "lastDeliveredId": last_event_id, "earliestAvailableId": earliest}
    return sse_frame(None, "state_resync_required", data).frame
