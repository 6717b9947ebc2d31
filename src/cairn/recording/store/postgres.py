"""Sessions in PostgreSQL (``cairn serve --database``): any replica lists, loads and runs any
session of its tenant.

The tables are :mod:`cairn.recording.store.schema`'s. What a replica does with them:

- **Leases.** A replica runs a session's turns (or changes it) only while it holds the
  session's lease: ``owner`` is its replica id and ``lease_until`` is in the future, by the
  database's clock. :meth:`PostgresSessionStore.acquire` takes a lease that is free, expired or
  already its own, and raises the ``epoch`` (the fencing token); a lease held by a live replica
  is :class:`OwnedElsewhere`. A dead replica's lease blocks nobody past ``lease_until``.
- **Writes.** Everything the owner writes goes through the session's :class:`SessionWriter`
  (:mod:`cairn.recording.store.writer`):
  records, events, prompt states and metadata queue up (a write waits up to
  ``FLUSH_DELAY_SECONDS`` for the next ones) and are flushed in order, one write per batch; the
  writes of every session flushing at once go in one statement, one transaction, one round
  trip (:class:`~cairn.recording.store.commits.GroupCommit`). A write renews the lease *only
  if* the row still names this owner and epoch, and writes the batch's records, events and
  prompt states (one multi-row insert or update each) and sends its ``NOTIFY`` only if that
  renewal did: a replica that lost its lease (paused past its expiry while another took over)
  writes nothing, and learns it (:class:`LeaseLost`). Events are
  handed to this process's subscribers after their commit only, so every event a client ever
  sees is in the log, and ``Last-Event-ID`` resumes on any replica without loss or duplicates.
- **Reads** (loading, listing, replaying events) need no lease.
- **A connection lost under a statement** (:class:`~cairn.database.connection.ConnectionLost`):
  the reads, taking a lease and admitting a prompt run once more on another connection
  (:meth:`~cairn.database.connection.Database.rerun_if_lost`), each written so that a second
  run after a first that committed unseen answers as the first would have; creating a session
  does not (its first run, committed unseen, would make the second read as an id taken), nor
  do the writer's writes but as :mod:`~cairn.recording.store.commits` says.

The sync methods of :class:`~cairn.recording.store.base.SessionStore` (``load``, ``exists``,
``list``, ``recorder``) serve worker threads (a rewind); on the event loop use the ``a``-methods.
"""

from __future__ import annotations

import asyncio
import builtins
import json
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.config.paths import project_key
from cairn.database.connection import NO_TENANT, Database
from cairn.debug_log import get_logger
from cairn.recording.store.commits import GroupCommit
from cairn.recording.store.rows import (
    Lease,
    LeaseLost,
    OwnedElsewhere,
    StoredEvent,
    StoredPrompt,
    jsonb,
    stored_prompt,
)
from cairn.recording.store.writer import SessionWriter, WriterSink

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


class PostgresSessions:
    """The session store of one process over one database (the daemon has one): a
    :class:`PostgresSessionStore` per project and tenant, on the daemon's event loop."""

    def __init__(self, database: Database, *, lease_seconds: float = DEFAULT_LEASE_SECONDS):
        self.database = database
        self.lease_seconds = lease_seconds
        self.loop: asyncio.AbstractEventLoop | None = None
        self._stores: dict[tuple[str, str], PostgresSessionStore] = {}
        self._commits: dict[str, GroupCommit] = {}  # by tenant
        # Called with each committed batch of events (the replica's subscribers get them).
        self.on_events: Callable[[PostgresSessionStore, str, list[StoredEvent]], None] | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop

    def __call__(self, project_root: Path, tenant: str | None) -> PostgresSessionStore:
        """:data:`~cairn.recording.store.base.SessionStores`: the store of a runtime."""
        return self.store(project_key(project_root), tenant)

    def commits(self, tenant: str) -> GroupCommit:
        """The group commit of ``tenant``'s session writes (one transaction names one tenant)."""
        commits = self._commits.get(tenant)
        if commits is None:
            commits = self._commits[tenant] = GroupCommit(self.database, tenant)
        return commits

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
            WriterSink(self, session_id),
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

        async def read(connection: psycopg.AsyncConnection[Any]) -> builtins.list[Any]:
            cursor = await connection.execute(
                "SELECT record FROM cairn_session_records WHERE tenant = %s AND project = %s "
                "AND session_id = %s ORDER BY seq",
                self._key(session_id),
            )
            rows = await cursor.fetchall()
            if not rows and not await self._row_exists(connection, session_id):
                raise SessionLoadError(f'no session with id "{session_id}" in the database')
            return rows

        rows = await self.database.rerun_if_lost(self.tenant, read)
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
        return await self.database.rerun_if_lost(
            self.tenant, lambda connection: self._row_exists(connection, session_id)
        )

    async def alist(
        self, *, limit: int = 50, cwd: Path | None = None
    ) -> builtins.list[SessionInfo]:
        from cairn.recording.listing import SessionInfo

        where = "tenant = %s AND project = %s" + (" AND cwd = %s" if cwd is not None else "")
        params: list[Any] = [self.tenant, self.project]
        if cwd is not None:
            params.append(str(cwd))
        query = (
            "SELECT session_id, created_at, updated_at, first_prompt, last_recap, "  # noqa: S608
            f"message_count, title, cwd FROM cairn_sessions WHERE {where} "
            "ORDER BY updated_at DESC LIMIT %s"
        )
        rows = await self._rows(query, (*params, limit))
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
        rows = await self._rows(
            "SELECT session_id, created_at, updated_at, first_prompt, last_recap, "
            "message_count, title, cwd, state, owner, lease_until > now(), running_prompt "
            "FROM cairn_sessions WHERE tenant = %s AND project = %s "
            "ORDER BY updated_at DESC LIMIT %s",
            (self.tenant, self.project, limit),
        )
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
        async def read(connection: psycopg.AsyncConnection[Any]) -> tuple[Any, Any]:
            session = await connection.execute(
                "SELECT s.state, s.created_at, s.updated_at, s.event_seq, s.owner, "
                "s.lease_until > now(), s.running_prompt, s.pending, s.commands, s.cwd, r.url, "
                "s.approval_mode, s.model, s.turns "
                "FROM cairn_sessions s LEFT JOIN cairn_replicas r ON r.replica_id = s.owner "
                "WHERE s.tenant = %s AND s.project = %s AND s.session_id = %s",
                self._key(session_id),
            )
            cursor = await connection.execute(
                "SELECT prompt_id, state, body, client_id, queued_at FROM cairn_session_prompts "
                "WHERE tenant = %s AND project = %s AND session_id = %s "
                "AND state IN ('queued', 'running') ORDER BY position",
                self._key(session_id),
            )
            return await session.fetchone(), await cursor.fetchall()

        row, prompts = await self.database.rerun_if_lost(self.tenant, read)
        if row is None:
            return None
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
        query = (
            "SELECT seq, type, envelope FROM cairn_session_events WHERE tenant = %s "  # noqa: S608
            f"AND project = %s AND session_id = %s AND seq > %s{bound} "
            "ORDER BY seq LIMIT %s"
        )

        async def read(connection: psycopg.AsyncConnection[Any]) -> tuple[Any, Any]:
            events = await connection.execute(
                query, (*params, *((until,) if until is not None else ()), limit)
            )
            cursor = await connection.execute(
                "SELECT s.event_seq, (SELECT min(seq) FROM cairn_session_events e WHERE "
                "e.tenant = s.tenant AND e.project = s.project AND e.session_id = s.session_id) "
                "FROM cairn_sessions s WHERE s.tenant = %s AND s.project = %s "
                "AND s.session_id = %s",
                self._key(session_id),
            )
            return await events.fetchall(), await cursor.fetchone()

        rows, head = await self.database.rerun_if_lost(self.tenant, read)
        last = int(head[0]) if head else 0
        earliest = int(head[1]) if head and head[1] is not None else last + 1
        return [StoredEvent(int(r[0]), r[1], r[2]) for r in rows], last, earliest

    async def prompt_by_key(self, session_id: str, key: str) -> StoredPrompt | None:
        rows = await self._rows(
            "SELECT prompt_id, state, body, client_id, queued_at, last_event_id, body_hash, "
            "idempotency_key FROM cairn_session_prompts WHERE tenant = %s AND project = %s "
            "AND session_id = %s AND idempotency_key = %s",
            (*self._key(session_id), key),
        )
        return stored_prompt(rows[0]) if rows else None

    async def queued_prompts(self, session_id: str) -> builtins.list[StoredPrompt]:
        rows = await self._rows(
            "SELECT prompt_id, state, body, client_id, queued_at, last_event_id, body_hash, "
            "idempotency_key FROM cairn_session_prompts WHERE tenant = %s AND project = %s "
            "AND session_id = %s AND state = 'queued' ORDER BY position",
            self._key(session_id),
        )
        return [stored_prompt(row) for row in rows]

    async def _rows(self, query: str, values: Any) -> builtins.list[Any]:
        """The rows of one read (once more on another connection when the first is lost)."""

        async def read(connection: psycopg.AsyncConnection[Any]) -> builtins.list[Any]:
            cursor = await connection.execute(query.encode(), values)
            return await cursor.fetchall()

        return await self.database.rerun_if_lost(self.tenant, read)

    # ----- leases -----

    async def create(self, session_id: str, *, owner: str, cwd: Path) -> Lease | None:
        """A new session's row, leased to ``owner``; None when the id is taken already."""
        taken_at = time.monotonic()
        async with self.database.statements(self.tenant) as connection:
            cursor = await connection.execute(
                "INSERT INTO cairn_sessions (tenant, project, session_id, cwd, owner, epoch, "
                "lease_until) VALUES (%s, %s, %s, %s, %s, 1, now() + %s * interval '1 second') "
                "ON CONFLICT DO NOTHING RETURNING epoch",
                (*self._key(session_id), str(cwd), owner, self.sessions.lease_seconds),
            )
            row = await cursor.fetchone()
        if row is None:
            return None
        return Lease(
            session_id, owner, int(row[0]), 0, 0, "open", None, str(cwd), taken_at=taken_at
        )

    async def acquire(self, session_id: str, *, owner: str) -> Lease | None:
        """Take the session's lease (free, expired, or ours already); None when there is no
        such session; :class:`OwnedElsewhere` when another replica holds it.

        Taken once more when the connection is lost under it: if the first try committed
        unseen, the lease is ours already and the second takes it again (the next epoch; the
        one skipped was never used), else the second is a first."""
        taken_at = time.monotonic()  # the first try's: the lease may run from then

        async def take(connection: psycopg.AsyncConnection[Any]) -> tuple[Any, Any]:
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
                return row, None
            cursor = await connection.execute(
                "SELECT s.owner, r.url, s.lease_until > now() FROM cairn_sessions s "
                "LEFT JOIN cairn_replicas r ON r.replica_id = s.owner "
                "WHERE s.tenant = %s AND s.project = %s AND s.session_id = %s",
                self._key(session_id),
            )
            return None, await cursor.fetchone()

        row, held = await self.database.rerun_if_lost(self.tenant, take)
        if row is not None:
            return Lease(session_id, owner, int(row[0]), int(row[1]), int(row[2]), row[3],
                         row[4], row[5], row[6], taken_at)  # fmt: skip
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
        running: bool = False,
    ) -> StoredPrompt:
        """Record an admitted prompt (committed before the client hears of it); the prompt
        already admitted under ``key``, if any, instead. ``running``: the session is idle, so
        the prompt is kept as the one running (its turn starts without another write).

        Recorded once more when the connection is lost under it: if the first try committed
        unseen, the second inserts nothing and finds the prompt by its ``prompt_id``."""
        key_ = self._key(session_id)

        async def keep(connection: psycopg.AsyncConnection[Any]) -> Any:
            cursor = await connection.execute(
                "WITH admitted AS (INSERT INTO cairn_session_prompts (tenant, project, "
                "session_id, prompt_id, idempotency_key, body_hash, body, client_id, state, "
                "last_event_id) SELECT %s, %s, %s, %s, %s, %s, %s, %s, %s, %s WHERE EXISTS "
                "(SELECT 1 FROM cairn_sessions WHERE tenant = %s AND project = %s "
                "AND session_id = %s AND owner = %s AND epoch = %s) ON CONFLICT DO NOTHING "
                "RETURNING prompt_id, state, body, client_id, queued_at, last_event_id, "
                "body_hash, idempotency_key), "
                "kept AS (UPDATE cairn_sessions s SET running_prompt = a.prompt_id "
                "FROM admitted a WHERE s.tenant = %s AND s.project = %s AND s.session_id = %s "
                "AND s.owner = %s AND s.epoch = %s AND a.state = 'running') "
                "SELECT * FROM admitted",
                (*key_, prompt_id, key, digest, jsonb(body), client_id,
                 "running" if running else "queued", last_event_id, *key_, lease.owner,
                 lease.epoch, *key_, lease.owner, lease.epoch),
            )  # fmt: skip
            row = await cursor.fetchone()
            if row is None:  # the key's earlier admission, or this one's first try
                cursor = await connection.execute(
                    "SELECT prompt_id, state, body, client_id, queued_at, last_event_id, "
                    "body_hash, idempotency_key FROM cairn_session_prompts WHERE tenant = %s "
                    "AND project = %s AND session_id = %s "
                    "AND (prompt_id = %s OR idempotency_key = %s)",
                    (*key_, prompt_id, key),
                )
                row = await cursor.fetchone()
            return row

        row = await self.database.rerun_if_lost(self.tenant, keep)
        if row is None:
            raise LeaseLost(f"the lease on session {session_id} was lost")
        return stored_prompt(row)

    def writer(self, lease: Lease) -> SessionWriter:
        """The writer of a session this replica leased (replacing an earlier one)."""
        writer = SessionWriter(self, lease)
        self.writers[lease.session_id] = writer
        return writer

    def holder(self, session_id: str) -> SessionWriter | None:
        """The writer of the session if this replica's lease on it is valid now (then nobody
        else writes it: every event of it is this replica's commit)."""
        writer = self.writers.get(session_id)
        return writer if writer is not None and writer.holds_lease else None

    def forget_writer(self, writer: SessionWriter) -> None:
        if self.writers.get(writer.session_id) is writer:
            del self.writers[writer.session_id]


async def _awaited(work: Awaitable[_T]) -> _T:
    return await work
