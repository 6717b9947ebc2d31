"""The writes of a session this replica leased (:class:`SessionWriter`): records, events,
prompt states and metadata, queued and flushed in order, one statement per batch, fenced by the
lease's owner and epoch (see :mod:`cairn.recording.store.postgres`); the statements of the
sessions flushing at once share a transaction (:mod:`cairn.recording.store.commits`)."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.database.connection import DatabaseUnavailable
from cairn.debug_log import get_logger
from cairn.recording.records import ASSISTANT, TITLE_SUBTYPE, USER, payload_of, recap_texts
from cairn.recording.store.commits import Statement
from cairn.recording.store.rows import Lease, LeaseLost, StoredEvent, jsonb
from cairn.recording.store.schema import CHANNEL

if TYPE_CHECKING:
    from cairn.recording.store.postgres import PostgresSessionStore

__all__ = ["SessionWriter", "WriterSink"]

_log = get_logger("SESSION_STORE")
LEASE_MARGIN_SECONDS = 0.5  # a lease counts as ours until this long before it expires
# A write waits this long for the ones after it (a turn's events and records go together);
# whoever waits for it (drain, renew, release) has it written at once.
FLUSH_DELAY_SECONDS = 0.025


@dataclass
class _Batch:
    records: list[tuple[int, str]] = field(default_factory=list)
    events: list[StoredEvent] = field(default_factory=list)
    prompts: list[tuple[str, str]] = field(default_factory=list)  # (prompt id, new state)
    meta: dict[str, Any] = field(default_factory=dict)
    messages: int = 0
    release: bool = False
    record_count: int = 0  # the session's counts once this batch is written
    event_seq: int = 0

    @property
    def empty(self) -> bool:
        return not (self.records or self.events or self.prompts or self.meta or self.release)


class SessionWriter:
    """The ordered, batched writes of one leased session (see the module docstring)."""

    def __init__(self, store: PostgresSessionStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease
        self.session_id = lease.session_id
        self.event_seq = lease.event_seq
        self.committed_seq = lease.event_seq  # the last event id committed
        self.record_count = lease.record_count
        self.failed: Exception | None = None
        self.released = False
        # Ours until then by this process's clock: a lease is renewed by the database's now()
        # while a write runs, so the time is taken before the write, never after it.
        taken = lease.taken_at or time.monotonic()
        self.valid_until = taken + store.sessions.lease_seconds - LEASE_MARGIN_SECONDS
        self.flushes = 0  # transactions written (the benchmark reports them)
        self._batch = _Batch()
        self._lock = threading.Lock()  # a worker thread's record (a rewind) joins the batch
        self._queued = 0  # items added so far (records, events, prompt states, changes)
        self._written = 0  # items committed so far
        self._flushing: asyncio.Task[None] | None = None
        self._delayed: asyncio.TimerHandle | None = None
        self._progress = asyncio.Condition()
        self._loop = asyncio.get_running_loop()
        self.on_failed: Callable[[Exception], None] | None = None

    @property
    def holds_lease(self) -> bool:
        """Whether this writer's lease is valid now: nobody else can write the session (a
        replica takes a lease over only after it expired)."""
        return self.failed is None and not self.released and time.monotonic() < self.valid_until

    # ----- what is queued -----

    def add_record(self, record: Mapping[str, Any], line: bytes) -> bool:
        if self.failed is not None or self.released:
            return False
        with self._lock:
            self.record_count += 1
            batch = self._batch
            batch.records.append((self.record_count, line.decode("utf-8").rstrip("\n")))
            _summarize(record, batch)
            self._queued += 1
        self._schedule()
        return True

    def add_event(self, event_type: str, envelope: Callable[[int], str]) -> StoredEvent | None:
        """Queue the next event; ``envelope(id)`` is its JSON. None once this writer failed."""
        if self.failed is not None or self.released:
            return None
        with self._lock:
            self.event_seq += 1
            event = StoredEvent(self.event_seq, event_type, envelope(self.event_seq))
            self._batch.events.append(event)
            self._queued += 1
        self._schedule()
        return event

    def set_prompt_state(self, prompt_id: str, state: str, *, running: bool | None = None) -> None:
        """A prompt's new state; ``running`` True/False also sets or clears the session's
        running prompt."""
        with self._lock:
            self._batch.prompts.append((prompt_id, state))
            if running is not None:
                self._batch.meta["running_prompt"] = prompt_id if running else None
            self._queued += 1
        self._schedule()

    def change(self, **columns: Any) -> None:
        """Set columns of the session's row (``state``, ``pending``, ``commands``, ``cwd``)."""
        with self._lock:
            self._batch.meta.update(columns)
            self._queued += 1
        self._schedule()

    # ----- flushing -----

    def _schedule(self) -> None:
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is self._loop:
            self._start_soon()
        else:
            self._loop.call_soon_threadsafe(self._start_soon)

    def _start_soon(self) -> None:
        """Flush after :data:`FLUSH_DELAY_SECONDS` (a flush under way takes the batch next)."""
        if self._delayed is None and (self._flushing is None or self._flushing.done()):
            self._delayed = self._loop.call_later(FLUSH_DELAY_SECONDS, self._start)

    def _start(self) -> None:
        if self._delayed is not None:
            self._delayed.cancel()
            self._delayed = None
        if self._flushing is None or self._flushing.done():
            self._flushing = self._loop.create_task(self._flush_all())

    async def drain(self) -> None:
        """Until everything queued so far is committed; :class:`LeaseLost` (or
        :class:`DatabaseUnavailable`) if it cannot be."""
        target = self._queued
        if self._written < target:
            self._start()
        async with self._progress:
            await self._progress.wait_for(lambda: self._written >= target or bool(self.failed))
        if self._written < target and self.failed is not None:
            raise self.failed

    async def renew(self) -> None:
        """Renew the lease now (a flush of nothing but the lease)."""
        with self._lock:
            self._batch.meta.setdefault("renew", True)
            self._queued += 1
        self._start()
        await self.drain()

    async def release(self) -> None:
        """Write what is queued and give the lease up (the last write of this writer)."""
        if self.released:
            return
        with self._lock:
            self._batch.release = True
            self._queued += 1
        self._start()
        try:
            await self.drain()
        finally:
            self.released = True
            self.store.forget_writer(self)

    def abandon(self) -> None:
        """Stop writing (the lease is lost, or the process is going): queued items are dropped."""
        self.released = True
        self.store.forget_writer(self)

    async def _flush_all(self) -> None:
        while self.failed is None:
            with self._lock:
                batch, self._batch = self._batch, _Batch()
                batch.record_count, batch.event_seq = self.record_count, self.event_seq
                mark = self._queued
            if batch.empty:
                return
            sent = time.monotonic()
            try:
                await self._write(batch)
            except Exception as error:
                self._fail(error)
                return
            self.flushes += 1
            self.committed_seq = batch.event_seq
            if not batch.release:
                self.valid_until = sent + self.store.sessions.lease_seconds - LEASE_MARGIN_SECONDS
            async with self._progress:
                self._written = mark
                self._progress.notify_all()
            if batch.events and self.store.sessions.on_events is not None:
                self.store.sessions.on_events(self.store, self.session_id, batch.events)

    def _fail(self, error: Exception) -> None:
        if not isinstance(error, DatabaseUnavailable):
            error = DatabaseUnavailable(f"writing session {self.session_id} failed: {error}")
        self.failed = error
        self.store.forget_writer(self)
        _log.error(f"session {self.session_id}: {error}")

        async def wake() -> None:
            async with self._progress:
                self._progress.notify_all()

        self._loop.create_task(wake())
        if self.on_failed is not None:
            self.on_failed(error)

    async def _write(self, batch: _Batch) -> None:
        store = self.store
        statement = _statement(batch, store._key(self.session_id), self.lease, store)
        # With the other sessions' writes waiting now, in one statement (GroupCommit).
        try:
            fenced = await store.sessions.commits(store.tenant).write(statement)
        except DatabaseUnavailable as error:
            raise DatabaseUnavailable(f"writing session {self.session_id}: {error}") from None
        if fenced != 1:  # nothing was written (every part checks the lease)
            raise LeaseLost(f"the lease on session {self.session_id} was taken by another replica")


def _statement(
    batch: _Batch, key: tuple[str, str, str], lease: Lease, store: PostgresSessionStore
) -> Statement:
    """A flush as the parts of one statement: the session's row updated only if the lease is
    still the writer's (owner and epoch), and the batch's records, events and prompt states
    written, and its ``NOTIFY`` sent, only if that update was (each part reads the update's
    row); its result is 1 if it was, else 0."""
    meta = dict(batch.meta)
    meta.pop("renew", None)
    sets = ["updated_at = now()", "record_count = %s", "event_seq = %s"]
    values: list[Any] = [batch.record_count, batch.event_seq]
    if batch.release:  # the lease is given up with the batch's last write
        sets.append("owner = NULL, lease_until = NULL")
    else:
        sets.append("lease_until = now() + %s * interval '1 second'")
        values.append(store.sessions.lease_seconds)
    if batch.messages:
        sets.append("message_count = message_count + %s")
        values.append(batch.messages)
    for column, value in meta.items():
        if column == "first_prompt":
            sets.append("first_prompt = COALESCE(NULLIF(first_prompt, ''), %s)")
        elif column in ("pending", "commands"):
            sets.append(f"{column} = %s")
            value = jsonb(value)
        else:
            sets.append(f"{column} = %s")
        values.append(value)
    parts = [
        f"{{p}}fence AS (UPDATE cairn_sessions SET {', '.join(sets)} WHERE tenant = %s "  # noqa: S608
        "AND project = %s AND session_id = %s AND owner = %s AND epoch = %s RETURNING 1)"
    ]
    values += [*key, lease.owner, lease.epoch]
    if batch.records:
        parts.append(_RECORDS)
        values += [*key, [n for n, _ in batch.records], [text for _, text in batch.records]]
    if batch.events:
        parts.append(_EVENTS)
        events = batch.events
        values += [*key, [e.seq for e in events], [e.type for e in events]]
        values.append([e.envelope for e in events])
    if batch.prompts:
        states = dict(batch.prompts)  # a prompt's last state in the batch is the one kept
        parts.append(_PROMPTS)
        values += [list(states), list(states.values()), *key]
    result = "(SELECT count(*) FROM {p}fence)"
    if batch.events:  # a CTE with a volatile call is run once, whole, when it is read
        parts.append("{p}notified AS (SELECT pg_notify(%s, %s) FROM {p}fence)")
        values += [CHANNEL, "\t".join((*key, str(batch.events[-1].seq)))]
        result = "(SELECT count(*) FROM {p}notified)"
    # Absolute values only, the lease kept: the same again after it committed (GroupCommit).
    idempotent = not (batch.records or batch.events or batch.release or batch.messages)
    return Statement(", ".join(parts), result, values, idempotent)


# The parts of a flush after its fence (see _statement): each writes only if the fence did.
# Arrays go in binary (%b): a text array's elements (JSON) need no escaping then.
_RECORDS = (
    "{p}records AS (INSERT INTO cairn_session_records (tenant, project, session_id, seq, record) "
    "SELECT %s, %s, %s, r.seq, r.record FROM unnest(%b::bigint[], %b::text[]) AS r(seq, record) "
    "WHERE EXISTS (SELECT 1 FROM {p}fence))"
)
_EVENTS = (
    "{p}events AS (INSERT INTO cairn_session_events (tenant, project, session_id, seq, type, "
    "envelope) SELECT %s, %s, %s, e.seq, e.type, e.envelope FROM unnest(%b::bigint[], "
    "%b::text[], %b::text[]) AS e(seq, type, envelope) WHERE EXISTS (SELECT 1 FROM {p}fence))"
)
_PROMPTS = (
    "{p}prompts AS (UPDATE cairn_session_prompts p SET state = s.state FROM unnest(%b::text[], "
    "%b::text[]) AS s(prompt_id, state) WHERE p.tenant = %s AND p.project = %s "
    "AND p.session_id = %s AND p.prompt_id = s.prompt_id AND EXISTS (SELECT 1 FROM {p}fence))"
)


class WriterSink:
    """A recorder's sink: the session's writer while this replica holds its lease."""

    def __init__(self, store: PostgresSessionStore, session_id: str) -> None:
        self._store = store
        self._session_id = session_id
        self.path: Path | None = None

    def write(self, record: Mapping[str, Any], line: bytes) -> bool:
        writer = self._store.writers.get(self._session_id)
        if writer is None:
            _log.warning(f"session {self._session_id} is not leased here; record dropped")
            return False
        return writer.add_record(record, line)

    def close(self) -> None:
        return None


def _summarize(record: Mapping[str, Any], batch: _Batch) -> None:
    """What a listing shows, kept up to date as records arrive."""
    from cairn.recording.listing import first_prompt

    kind = record.get("type")
    if kind in (USER, ASSISTANT):
        batch.messages += 1
    if kind == USER and "first_prompt" not in batch.meta:
        text = first_prompt(dict(record))
        if text:
            batch.meta["first_prompt"] = text
    recaps = recap_texts(record)
    if recaps:
        batch.meta["last_recap"] = recaps[-1]
    if record.get("subtype") == TITLE_SUBTYPE:
        title = payload_of(record).get("title")
        if isinstance(title, str):
            batch.meta["title"] = title
