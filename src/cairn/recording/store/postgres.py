"""Sessions in PostgreSQL (``cairn serve --database``): any replica lists, loads and runs any
session of its tenant.

The tables are :mod:`cairn.recording.store.schema`'s. What a replica does with them:

- **Leases.** A replica runs a session's turns (or changes it) only while it holds the
  session's lease: ``owner`` is its replica id and ``lease_until`` is in the future, by the
  database's clock. :meth:`PostgresSessionStore.acquire` takes a lease that is free, expired or
  already its own, and raises the ``epoch`` (the fencing token); a lease held by a live replica
  is :class:`OwnedElsewhere`. A dead replica's lease blocks nobody past ``lease_until``.
- **Writes.** Everything the owner writes goes through the session's :class:`SessionWriter`:
  records, events, prompt states and metadata queue up and are flushed in order, one
  transaction per batch (sent as one pipeline). Each flush first renews the lease *only if* the
  row still names this owner and epoch: a replica that lost its lease (paused past its expiry
  while another took over) writes nothing, and learns it (:class:`LeaseLost`). Events are
  handed to this process's subscribers after their commit only, so every event a client ever
  sees is in the log, and ``Last-Event-ID`` resumes on any replica without loss or duplicates.
- **Reads** (loading, listing, replaying events) need no lease.

The sync methods of :class:`~cairn.recording.store.base.SessionStore` (``load``, ``exists``,
``list``, ``recorder``) serve worker threads (a rewind); on the event loop use the ``a``-methods.
"""

from __future__ import annotations

import asyncio
import builtins
import datetime as _dt
import json
import threading
import time
from collections.abc import Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.config.paths import project_key
from cairn.database.connection import NO_TENANT, Database, DatabaseUnavailable
from cairn.debug_log import get_logger
from cairn.recording.records import ASSISTANT, TITLE_SUBTYPE, USER, payload_of, recap_texts
from cairn.recording.store.schema import CHANNEL

if TYPE_CHECKING:
    import psycopg

    from cairn.recording.listing import SessionInfo
    from cairn.recording.reader import LoadedSession
    from cairn.recording.recorder import ChatRecorder

__all__ = [
    "DEFAULT_LEASE_SECONDS",
    "Lease",
    "LeaseLost",
    "OwnedElsewhere",
    "PostgresSessionStore",
    "PostgresSessions",
    "SessionWriter",
    "StoredEvent",
    "StoredPrompt",
]

DEFAULT_LEASE_SECONDS = 6.0  # a lease lasts this long unless renewed (a turn renews it)
BLOCKING_CALL_TIMEOUT_SECONDS = 60.0  # a worker thread's wait for the event loop's query
_log = get_logger("SESSION_STORE")
_T = TypeVar("_T")


class LeaseLost(DatabaseUnavailable):
    """This replica's lease on a session is gone (expired and taken, or the database lost):
    nothing more of the session may be written from here."""


class OwnedElsewhere(Exception):
    """Another replica holds the session's lease (``live``: not expired yet)."""

    def __init__(self, owner: str, url: str | None, live: bool) -> None:
        super().__init__(f"session leased by replica {owner}")
        self.owner = owner
        self.url = url
        self.live = live


@dataclass(frozen=True)
class Lease:
    """A lease this replica took (:meth:`PostgresSessionStore.acquire`)."""

    session_id: str
    owner: str
    epoch: int
    record_count: int  # records kept: a copy of the session built at this count is current
    event_seq: int  # the last event's id
    state: str  # "open" or "closed"
    interrupted: str | None  # the prompt a dead owner was running (it never finished)
    cwd: str
    model: str | None = None  # the model the session was switched to, if any


@dataclass(frozen=True)
class StoredEvent:
    seq: int
    type: str
    envelope: str  # the SSE ``data:`` line (the envelope's JSON)

    @property
    def frame(self) -> bytes:
        return f"id: {self.seq}\nevent: {self.type}\ndata: {self.envelope}\n\n".encode()


@dataclass(frozen=True)
class StoredPrompt:
    prompt_id: str
    state: str
    body: Any
    client_id: str | None
    queued_at: _dt.datetime
    last_event_id: int
    body_hash: str
    idempotency_key: str | None = None


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


class PostgresSessions:
    """The session store of one process over one database (the daemon has one): a
    :class:`PostgresSessionStore` per project and tenant, on the daemon's event loop."""

    def __init__(self, database: Database, *, lease_seconds: float = DEFAULT_LEASE_SECONDS):
        self.database = database
        self.lease_seconds = lease_seconds
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stores: dict[tuple[str, str], PostgresSessionStore] = {}
        # Called with each committed batch of events (the replica's subscribers get them).
        self.on_events: Callable[[PostgresSessionStore, str, list[StoredEvent]], None] | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def __call__(self, project_root: Path, tenant: str | None) -> PostgresSessionStore:
        """:data:`~cairn.recording.store.base.SessionStores`: the store of a runtime."""
        return self.store(project_key(project_root), tenant)

    def store(self, project: str, tenant: str | None) -> PostgresSessionStore:
        key = (project, tenant or NO_TENANT)
        store = self._stores.get(key)
        if store is None:
            store = PostgresSessionStore(self, project=project, tenant=tenant)
            self._stores[key] = store
        return store


class PostgresSessionStore:
    name = "postgres"

    def __init__(self, sessions: PostgresSessions, *, project: str, tenant: str | None) -> None:
        self.sessions = sessions
        self.database = sessions.database
        self.project = project
        self.tenant = tenant or NO_TENANT
        self.writers: dict[str, SessionWriter] = {}  # the sessions this replica holds

    # ----- the blocking interface (worker threads) -----

    def recorder(
        self, session_id: str, *, cwd: Path, version: str, parent_uuid: str | None
    ) -> ChatRecorder:
        from cairn.recording.recorder import ChatRecorder

        return ChatRecorder(
            _WriterSink(self, session_id),
            session_id=session_id,
            cwd=cwd,
            version=version,
            parent_uuid=parent_uuid,
        )

    def load(self, session_id: str) -> LoadedSession:
        return self._blocking(self.aload(session_id))

    def exists(self, session_id: str) -> bool:
        return self._blocking(self.aexists(session_id))

    def list(self, *, limit: int = 50, cwd: Path | None = None) -> list[SessionInfo]:
        return self._blocking(self.alist(limit=limit, cwd=cwd))

    def _blocking(self, work: Awaitable[_T]) -> _T:
        loop = self.sessions.loop
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if loop is None or running is loop:
            if asyncio.iscoroutine(work):
                work.close()
            raise RuntimeError("the PostgreSQL session store is blocking only in worker threads")
        future = asyncio.run_coroutine_threadsafe(_awaited(work), loop)
        return future.result(BLOCKING_CALL_TIMEOUT_SECONDS)

    # ----- reads -----

    def _key(self, session_id: str) -> tuple[str, str, str]:
        return (self.tenant, self.project, session_id)

    async def aload(self, session_id: str) -> LoadedSession:
        from cairn.recording.reader import SessionLoadError, loaded_from_records

        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "SELECT record FROM cairn_session_records WHERE tenant = %s AND project = %s "
                "AND session_id = %s ORDER BY seq",
                self._key(session_id),
            )
            rows = await cursor.fetchall()
            if not rows and not await self._row_exists(connection, session_id):
                raise SessionLoadError(f'no session with id "{session_id}" in the database')
        records: list[dict[str, Any]] = []
        warnings: list[str] = []
        for number, (text,) in enumerate(rows, start=1):
            try:
                record = json.loads(text)
            except ValueError:
                record = None
            if isinstance(record, dict) and isinstance(record.get("uuid"), str):
                records.append(record)
            else:
                warnings.append(f"record {number}: not a valid record; skipped")
        return loaded_from_records(session_id, records, warnings, source=f"session {session_id}")

    async def _row_exists(self, connection: psycopg.AsyncConnection[Any], session_id: str) -> bool:
        cursor = await connection.execute(
            "SELECT 1 FROM cairn_sessions WHERE tenant = %s AND project = %s AND session_id = %s",
            self._key(session_id),
        )
        return await cursor.fetchone() is not None

    async def aexists(self, session_id: str) -> bool:
        async with self.database.transaction(self.tenant) as connection:
            return await self._row_exists(connection, session_id)

    async def alist(
        self, *, limit: int = 50, cwd: Path | None = None
    ) -> builtins.list[SessionInfo]:
        from cairn.recording.listing import SessionInfo

        where = "tenant = %s AND project = %s" + (" AND cwd = %s" if cwd is not None else "")
        params: list[Any] = [self.tenant, self.project]
        if cwd is not None:
            params.append(str(cwd))
        async with self.database.transaction(self.tenant) as connection:
            query = (
                "SELECT session_id, created_at, updated_at, first_prompt, last_recap, "  # noqa: S608
                f"message_count, title, cwd FROM cairn_sessions WHERE {where} "
                "ORDER BY updated_at DESC LIMIT %s"
            )
            cursor = await connection.execute(query, (*params, limit))
            rows = await cursor.fetchall()
        return [
            SessionInfo(
                session_id=row[0],
                path=None,
                start_time=row[1],
                mtime=row[2],
                first_prompt=row[3],
                last_recap=row[4],
                message_count=row[5],
                title=row[6],
                cwd=Path(row[7]),
            )
            for row in rows
        ]

    async def alisting(self, *, limit: int = 50) -> builtins.list[dict[str, Any]]:
        """The sessions as the daemon lists them, newest first (closed ones too)."""
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "SELECT session_id, created_at, updated_at, first_prompt, last_recap, "
                "message_count, title, cwd, state, owner, lease_until > now(), running_prompt "
                "FROM cairn_sessions WHERE tenant = %s AND project = %s "
                "ORDER BY updated_at DESC LIMIT %s",
                (self.tenant, self.project, limit),
            )
            rows = await cursor.fetchall()
        keys = (
            "sessionId",
            "createdAt",
            "updatedAt",
            "firstPrompt",
            "lastRecap",
            "messageCount",
            "title",
            "cwd",
            "state",
            "owner",
            "leaseLive",
            "runningPrompt",
        )
        return [dict(zip(keys, row, strict=True)) for row in rows]

    async def summary(self, session_id: str) -> dict[str, Any] | None:
        """The session's row as the daemon's status and listing read it (None: unknown)."""
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "SELECT s.state, s.created_at, s.updated_at, s.event_seq, s.owner, "
                "s.lease_until > now(), s.running_prompt, s.pending, s.commands, s.cwd, r.url, "
                "s.approval_mode, s.model, s.turns "
                "FROM cairn_sessions s LEFT JOIN cairn_replicas r ON r.replica_id = s.owner "
                "WHERE s.tenant = %s AND s.project = %s AND s.session_id = %s",
                self._key(session_id),
            )
            row = await cursor.fetchone()
            if row is None:
                return None
            cursor = await connection.execute(
                "SELECT prompt_id, state, body, client_id, queued_at FROM cairn_session_prompts "
                "WHERE tenant = %s AND project = %s AND session_id = %s "
                "AND state IN ('queued', 'running') ORDER BY position",
                self._key(session_id),
            )
            prompts = await cursor.fetchall()
        return {
            "state": row[0],
            "createdAt": row[1],
            "updatedAt": row[2],
            "eventSeq": row[3],
            "owner": row[4],
            "leaseLive": bool(row[5]),
            "runningPrompt": row[6],
            "pending": row[7],
            "commands": row[8],
            "cwd": row[9],
            "ownerUrl": row[10],
            "approvalMode": row[11],
            "model": row[12],
            "turns": row[13],
            "prompts": [
                {
                    "promptId": p[0],
                    "state": p[1],
                    "body": p[2],
                    "clientId": p[3],
                    "queuedAt": p[4],
                }
                for p in prompts
            ],
        }

    async def events_after(
        self, session_id: str, after: int, *, limit: int, until: int | None = None
    ) -> tuple[builtins.list[StoredEvent], int, int]:
        """Events with ids above ``after`` (up to ``until``), oldest first, at most ``limit``;
        with the session's last event id and the earliest id still kept."""
        bound = " AND seq <= %s" if until is not None else ""
        params: tuple[Any, ...] = (*self._key(session_id), after)
        async with self.database.transaction(self.tenant) as connection:
            query = (
                "SELECT seq, type, envelope FROM cairn_session_events WHERE tenant = %s "  # noqa: S608
                f"AND project = %s AND session_id = %s AND seq > %s{bound} "
                "ORDER BY seq LIMIT %s"
            )
            cursor = await connection.execute(
                query, (*params, *((until,) if until is not None else ()), limit)
            )
            rows = await cursor.fetchall()
            cursor = await connection.execute(
                "SELECT s.event_seq, (SELECT min(seq) FROM cairn_session_events e WHERE "
                "e.tenant = s.tenant AND e.project = s.project AND e.session_id = s.session_id) "
                "FROM cairn_sessions s WHERE s.tenant = %s AND s.project = %s "
                "AND s.session_id = %s",
                self._key(session_id),
            )
            head = await cursor.fetchone()
        last = int(head[0]) if head else 0
        earliest = int(head[1]) if head and head[1] is not None else last + 1
        return [StoredEvent(int(r[0]), r[1], r[2]) for r in rows], last, earliest

    async def prompt_by_key(self, session_id: str, key: str) -> StoredPrompt | None:
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "SELECT prompt_id, state, body, client_id, queued_at, last_event_id, body_hash, "
                "idempotency_key FROM cairn_session_prompts WHERE tenant = %s AND project = %s "
                "AND session_id = %s AND idempotency_key = %s",
                (*self._key(session_id), key),
            )
            row = await cursor.fetchone()
        return _prompt(row) if row else None

    async def queued_prompts(self, session_id: str) -> builtins.list[StoredPrompt]:
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "SELECT prompt_id, state, body, client_id, queued_at, last_event_id, body_hash, "
                "idempotency_key FROM cairn_session_prompts WHERE tenant = %s AND project = %s "
                "AND session_id = %s AND state = 'queued' ORDER BY position",
                self._key(session_id),
            )
            rows = await cursor.fetchall()
        return [_prompt(row) for row in rows]

    # ----- leases -----

    async def create(self, session_id: str, *, owner: str, cwd: Path) -> Lease | None:
        """A new session's row, leased to ``owner``; None when the id is taken already."""
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "INSERT INTO cairn_sessions (tenant, project, session_id, cwd, owner, epoch, "
                "lease_until) VALUES (%s, %s, %s, %s, %s, 1, now() + %s * interval '1 second') "
                "ON CONFLICT DO NOTHING RETURNING epoch",
                (*self._key(session_id), str(cwd), owner, self.sessions.lease_seconds),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        return Lease(session_id, owner, int(row[0]), 0, 0, "open", None, str(cwd))

    async def acquire(self, session_id: str, *, owner: str) -> Lease | None:
        """Take the session's lease (free, expired, or ours already); None when there is no
        such session; :class:`OwnedElsewhere` when another replica holds it."""
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "UPDATE cairn_sessions SET owner = %s, epoch = epoch + 1, "
                "lease_until = now() + %s * interval '1 second' "
                "WHERE tenant = %s AND project = %s AND session_id = %s "
                "AND (owner IS NULL OR owner = %s OR lease_until < now()) "
                "RETURNING epoch, record_count, event_seq, state, running_prompt, cwd, model",
                (owner, self.sessions.lease_seconds, *self._key(session_id), owner),
            )
            row = await cursor.fetchone()
            if row is not None:
                return Lease(session_id, owner, int(row[0]), int(row[1]), int(row[2]), row[3],
                             row[4], row[5], row[6])  # fmt: skip
            cursor = await connection.execute(
                "SELECT s.owner, r.url, s.lease_until > now() FROM cairn_sessions s "
                "LEFT JOIN cairn_replicas r ON r.replica_id = s.owner "
                "WHERE s.tenant = %s AND s.project = %s AND s.session_id = %s",
                self._key(session_id),
            )
            held = await cursor.fetchone()
        if held is None:
            return None
        raise OwnedElsewhere(held[0], held[1], bool(held[2]))

    async def admit(
        self,
        session_id: str,
        lease: Lease,
        *,
        prompt_id: str,
        key: str | None,
        body: Any,
        digest: str,
        client_id: str | None,
        last_event_id: int,
    ) -> StoredPrompt:
        """Record an admitted prompt (committed before the client hears of it); the prompt
        already admitted under ``key``, if any, instead."""
        async with self.database.transaction(self.tenant) as connection:
            cursor = await connection.execute(
                "INSERT INTO cairn_session_prompts (tenant, project, session_id, prompt_id, "
                "idempotency_key, body_hash, body, client_id, state, last_event_id) "
                "SELECT %s, %s, %s, %s, %s, %s, %s, %s, 'queued', %s WHERE EXISTS (SELECT 1 "
                "FROM cairn_sessions WHERE tenant = %s AND project = %s AND session_id = %s "
                "AND owner = %s AND epoch = %s) ON CONFLICT DO NOTHING "
                "RETURNING prompt_id, state, body, client_id, queued_at, last_event_id, "
                "body_hash, idempotency_key",
                (*self._key(session_id), prompt_id, key, digest, _jsonb(body), client_id,
                 last_event_id, *self._key(session_id), lease.owner, lease.epoch),
            )  # fmt: skip
            row = await cursor.fetchone()
            if row is None and key is not None:
                cursor = await connection.execute(
                    "SELECT prompt_id, state, body, client_id, queued_at, last_event_id, "
                    "body_hash, idempotency_key FROM cairn_session_prompts WHERE tenant = %s "
                    "AND project = %s AND session_id = %s AND idempotency_key = %s",
                    (*self._key(session_id), key),
                )
                row = await cursor.fetchone()
        if row is None:
            raise LeaseLost(f"the lease on session {session_id} was lost")
        return _prompt(row)

    def writer(self, lease: Lease) -> SessionWriter:
        """The writer of a session this replica leased (replacing an earlier one)."""
        writer = SessionWriter(self, lease)
        self.writers[lease.session_id] = writer
        return writer

    def forget_writer(self, writer: SessionWriter) -> None:
        if self.writers.get(writer.session_id) is writer:
            del self.writers[writer.session_id]


class SessionWriter:
    """The ordered, batched writes of one leased session (see the module docstring)."""

    def __init__(self, store: PostgresSessionStore, lease: Lease) -> None:
        self.store = store
        self.lease = lease
        self.session_id = lease.session_id
        self.event_seq = lease.event_seq
        self.record_count = lease.record_count
        self.failed: Exception | None = None
        self.released = False
        self.valid_until = time.monotonic() + store.sessions.lease_seconds  # ours until then
        self.flushes = 0  # transactions written (the benchmark reports them)
        self._batch = _Batch()
        self._lock = threading.Lock()  # a worker thread's record (a rewind) joins the batch
        self._queued = 0  # items added so far (records, events, prompt states, changes)
        self._written = 0  # items committed so far
        self._flushing: asyncio.Task[None] | None = None
        self._progress = asyncio.Condition()
        self._loop = asyncio.get_running_loop()
        self.on_failed: Callable[[Exception], None] | None = None

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
            self._start()
        else:
            self._loop.call_soon_threadsafe(self._start)

    def _start(self) -> None:
        if self._flushing is None or self._flushing.done():
            self._flushing = self._loop.create_task(self._flush_all())

    async def drain(self) -> None:
        """Until everything queued so far is committed; :class:`LeaseLost` (or
        :class:`DatabaseUnavailable`) if it cannot be."""
        target = self._queued
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
            try:
                await self._write(batch)
            except Exception as error:
                self._fail(error)
                return
            self.flushes += 1
            self.valid_until = time.monotonic() + self.store.sessions.lease_seconds - 0.5
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
        store, lease = self.store, self.lease
        key = store._key(self.session_id)
        meta = dict(batch.meta)
        meta.pop("renew", None)
        sets = ["updated_at = now()", "record_count = %s", "event_seq = %s"]
        values: list[Any] = [batch.record_count, batch.event_seq]
        if batch.release:
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
                value = _jsonb(value)
            else:
                sets.append(f"{column} = %s")
            values.append(value)
        database = store.database
        psycopg = database._psycopg
        try:
            async with (
                database.connection() as connection,
                connection.pipeline() as pipeline,
                connection.transaction(),
            ):
                if True:
                    await connection.execute(
                        "SELECT set_config('cairn.tenant', %s, true)", (store.tenant,)
                    )
                    update = (
                        f"UPDATE cairn_sessions SET {', '.join(sets)} WHERE tenant = %s "  # noqa: S608
                        "AND project = %s AND session_id = %s AND owner = %s AND epoch = %s"
                    )
                    fence = await connection.execute(
                        update, (*values, *key, lease.owner, lease.epoch)
                    )
                    cursor = connection.cursor()
                    if batch.records:
                        await cursor.executemany(
                            "INSERT INTO cairn_session_records (tenant, project, session_id, "
                            "seq, record) VALUES (%s, %s, %s, %s, %s)",
                            [(*key, seq, text) for seq, text in batch.records],
                        )
                    if batch.events:
                        await cursor.executemany(
                            "INSERT INTO cairn_session_events (tenant, project, session_id, "
                            "seq, type, envelope) VALUES (%s, %s, %s, %s, %s, %s)",
                            [(*key, e.seq, e.type, e.envelope) for e in batch.events],
                        )
                    if batch.prompts:
                        await cursor.executemany(
                            "UPDATE cairn_session_prompts SET state = %s WHERE tenant = %s "
                            "AND project = %s AND session_id = %s AND prompt_id = %s",
                            [(state, *key, prompt) for prompt, state in batch.prompts],
                        )
                    if batch.events:
                        payload = "\t".join((*key, str(batch.events[-1].seq)))
                        await connection.execute("SELECT pg_notify(%s, %s)", (CHANNEL, payload))
                    await pipeline.sync()
                    if fence.rowcount != 1:
                        raise LeaseLost(
                            f"the lease on session {self.session_id} was taken by another replica"
                        )
        except psycopg.Error as error:
            raise DatabaseUnavailable(f"the database is unavailable: {error}") from None
        database.round_trips += 2


class _WriterSink:
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


def _prompt(row: Sequence[Any]) -> StoredPrompt:
    return StoredPrompt(
        prompt_id=row[0],
        state=row[1],
        body=row[2],
        client_id=row[3],
        queued_at=row[4],
        last_event_id=int(row[5]),
        body_hash=row[6],
        idempotency_key=row[7],
    )


def _jsonb(value: Any) -> Any:
    from psycopg.types.json import Jsonb

    return Jsonb(value)


async def _awaited(work: Awaitable[_T]) -> _T:
    return await work
