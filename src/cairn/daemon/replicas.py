"""``cairn serve --database``: this daemon as one of several stateless replicas.

Sessions live in PostgreSQL (:mod:`cairn.recording.store.postgres`), so any replica behind a
plain round-robin load balancer serves any session of its tenant:

- **Ownership.** A replica runs a session's turns, and changes it, only while it holds the
  session's lease (a row lease with expiry, renewed by every write and every
  ``lease_seconds / 3`` while a turn runs). :meth:`ReplicaRegistry.hold` takes it for a request
  (waiting for a request of its own process that holds it), or raises :class:`ServedElsewhere`
  when another live replica holds it: the route then forwards the request to that replica
  (:mod:`cairn.daemon.proxy`). A lease is given up as soon as the session is idle (no prompt
  running or queued), so the next request may land anywhere.
- **Failover.** A replica that dies keeps its leases until they expire; a request reaching
  another replica meanwhile finds the owner unreachable and waits for the expiry (at most
  ``lease_seconds``), then takes the lease over: the prompt the dead replica was running is
  reported as interrupted (``turn_error`` with code ``interrupted``, never run again), the
  prompts it had queued run here, in order. A replica watching a session's events notices an
  orphaned session itself, so its clients hear of the interruption without another request.
- **A lost database.** A write that fails stops the session here: its turn is cancelled, its
  clients get ``turn_error`` with code ``database_unavailable`` (not kept: there is nowhere to
  keep it), requests get a 503 with ``Retry-After``, and ``GET /ready`` fails until the
  database answers again; the lease expires, and the session resumes wherever it is asked for.
- **Draining** (SIGTERM): ``/ready`` fails at once (the load balancer stops sending), no lease
  is taken any more (503, retried by clients), running turns get ``drain_seconds`` to end,
  queued prompts are handed to the other replicas (``NOTIFY``), leases are given up and the
  event streams end (clients reconnect elsewhere with ``Last-Event-ID``).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.daemon.config import RETRY_AFTER_SECONDS, DaemonConfig
from cairn.daemon.errors import STRICT_REASON, ApiError, token_required
from cairn.daemon.event_log import EventHub, LogBus
from cairn.daemon.frontend import DaemonFrontend
from cairn.daemon.sessions import LiveSession, QueuedPrompt
from cairn.database.connection import Database, DatabaseUnavailable
from cairn.debug_log import get_logger
from cairn.recording.store.postgres import (
    Lease,
    LeaseLost,
    OwnedElsewhere,
    PostgresSessions,
    PostgresSessionStore,
    SessionWriter,
)
from cairn.recording.store.schema import CHANNEL
from cairn.session.gate import PermissionGate, WideningRefused
from cairn.session.updates import commands_update

if TYPE_CHECKING:
    from cairn.daemon.bus import Subscription
    from cairn.database.migrations import Component
    from cairn.mcp.config import ServerConfig
    from cairn.session.runtime import Runtime
    from cairn.session.session import Session

__all__ = [
    "FORWARDED_HEADER",
    "Replica",
    "ReplicaRegistry",
    "ReplicaSession",
    "ServedElsewhere",
    "replica_schema",
]

FORWARDED_HEADER = "x-cairn-forwarded-by"  # a request one replica forwarded to another
WAIT_POLL_SECONDS = 0.2  # how often a request waiting for a lease asks again
CACHED_SESSIONS = 64  # sessions kept built after their lease is given up (reused if current)
HANDOVER = "handover"  # NOTIFY payload kind: queued prompts wait for a replica
_log = get_logger("DAEMON")


def replica_schema() -> list[Component]:
    """The tables a replica needs, in migration order (``cairn db migrate`` adds memory's)."""
    from cairn.recording.store.schema import sessions_schema

    return [sessions_schema()]


def default_replica_id() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


class ServedElsewhere(Exception):
    """Another live replica holds the session: forward the request to ``url``."""

    def __init__(self, owner: str, url: str) -> None:
        super().__init__(f"session served by replica {owner} at {url}")
        self.owner = owner
        self.url = url


def unavailable(message: str = "The session database is unavailable; retry shortly.") -> ApiError:
    return ApiError(
        503,
        message,
        "database_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def draining() -> ApiError:
    return ApiError(
        503,
        "This replica is shutting down; retry (another replica takes the request).",
        "replica_draining",
        headers={"Retry-After": "1"},
    )


class Replica:
    """This process in the database: its id, where it listens, whether it is ready."""

    def __init__(self, config: DaemonConfig, database: Database, *, url: str) -> None:
        self.config = config
        self.database = database
        self.id = config.replica_id or default_replica_id()
        self.url = config.advertise_url or url
        self.draining = False
        self.schema_problem: str | None = "not checked yet"
        self.database_problem: str | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bring the tables up to date (or say why not), then register this replica."""
        await asyncio.to_thread(self._migrate)
        await self._register()
        self._heartbeat = asyncio.ensure_future(self._beat())

    def _migrate(self) -> None:
        from cairn.database.migrations import migrate, schema_status

        with self.database.connect() as connection:
            try:
                for step in migrate(connection, replica_schema()):
                    _log.info(f"migrated: {step}")
            except Exception as error:  # e.g. a role without CREATE: `cairn db migrate` does it
                _log.warning(f"migrating the session tables failed: {error}")
            self.schema_problem = _schema_problem(schema_status(connection, replica_schema()))

    async def _register(self) -> None:
        async with self.database.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "SELECT now() - seen_at < %s * interval '1 second' FROM cairn_replicas "
                "WHERE replica_id = %s",
                (self.config.lease_seconds * 2, self.id),
            )
            found = await cursor.fetchone()
            if found is not None and found[0]:
                raise DatabaseUnavailable(
                    f"another replica named {self.id!r} is running: each replica needs its own "
                    "--replica-id"
                )
            await connection.execute(
                "INSERT INTO cairn_replicas (replica_id, url) VALUES (%s, %s) "
                "ON CONFLICT (replica_id) DO UPDATE SET url = EXCLUDED.url, "
                "started_at = now(), seen_at = now()",
                (self.id, self.url),
            )

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                async with self.database.connection() as connection, connection.transaction():
                    await connection.execute(
                        "UPDATE cairn_replicas SET seen_at = now(), url = %s WHERE replica_id = %s",
                        (self.url, self.id),
                    )
                if self.schema_problem is not None:
                    await asyncio.to_thread(self._migrate)
            except Exception as error:
                self.database_problem = f"the database does not answer: {error}"
            else:
                self.database_problem = None

    def readiness(self) -> str | None:
        """Why this replica should not get traffic now, or None."""
        if self.draining:
            return "shutting down"
        return self.database_problem or self.schema_problem

    async def check(self) -> str | None:
        """:meth:`readiness`, asking the database now (``GET /ready``)."""
        if self.draining:
            return "shutting down"
        try:
            async with self.database.connection() as connection:
                await connection.execute("SELECT 1")
        except Exception as error:
            self.database_problem = f"the database does not answer: {error}"
        else:
            self.database_problem = None
        return self.readiness()

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        with contextlib.suppress(Exception):
            async with self.database.connection() as connection, connection.transaction():
                await connection.execute(
                    "DELETE FROM cairn_replicas WHERE replica_id = %s", (self.id,)
                )


def _schema_problem(statuses: Sequence[Any]) -> str | None:
    behind = [f"{s.name} {s.current} < {s.expected}" for s in statuses if not s.up_to_date]
    if not behind:
        return None
    return f"the database schema is behind ({', '.join(behind)}): run cairn db migrate"


class ReplicaSession(LiveSession):
    """A live session of this replica: its prompts and events go through its lease's writer."""

    bus: LogBus  # type: ignore[assignment]

    def __init__(
        self,
        session: Session,
        bus: LogBus,
        frontend: DaemonFrontend,
        config: DaemonConfig,
        registry: ReplicaRegistry,
        tenant: str | None,
    ) -> None:
        super().__init__(session, bus, frontend, config)  # type: ignore[arg-type]
        self.registry = registry
        self.tenant = tenant
        self.store: PostgresSessionStore = bus.store
        self.writer: SessionWriter | None = None
        self.record_count = 0  # the records this copy of the session was built from
        self.holds = 0  # requests using it now
        self.lock = asyncio.Lock()  # one lease taking at a time
        self._renewing: asyncio.Task[None] | None = None

    @property
    def leased(self) -> bool:
        writer = self.writer
        return writer is not None and writer.failed is None and not writer.released

    def attach(self, writer: SessionWriter) -> None:
        self.writer = writer
        writer.on_failed = lambda error: self._writer_failed(writer, error)
        self.bus.attach(writer)

    # ----- prompts (LiveSession's hooks) -----

    async def started(self, item: QueuedPrompt) -> bool:
        """The prompt is kept as running before its turn starts, so a replica resuming the
        session reports it interrupted and never runs it again; if that cannot be written,
        the turn does not start (the writer's failure reported it)."""
        writer = self.writer
        if writer is None:
            return False
        writer.set_prompt_state(item.prompt_id, "running", running=True)
        try:
            await writer.drain()
        except DatabaseUnavailable:
            return False
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())
        return True

    def ended(self, item: QueuedPrompt, state: str) -> None:
        if self.writer is not None and self.writer.failed is None:
            self.writer.set_prompt_state(item.prompt_id, state, running=False)

    async def settled(self, item: QueuedPrompt) -> bool:
        writer = self.writer
        if writer is None:
            return False
        try:
            await writer.drain()
        except DatabaseUnavailable:
            return False
        return True

    async def drained(self) -> None:
        await self.registry.idle(self)

    async def _renew(self) -> None:
        """Keep the lease while a turn runs (every write renews it too)."""
        interval = self._config.lease_seconds / 3
        while self.has_active_prompt and self.leased:
            await asyncio.sleep(interval)
            writer = self.writer
            if writer is None or not self.has_active_prompt:
                return
            with contextlib.suppress(DatabaseUnavailable):
                await writer.renew()

    def _writer_failed(self, writer: SessionWriter, error: Exception) -> None:
        """Nothing more can be kept: stop the turn here; the lease expires, the session resumes
        on whichever replica is asked next. (A writer this session no longer uses is ignored.)"""
        if writer is not self.writer:
            return
        code = "lease_lost" if isinstance(error, LeaseLost) else "database_unavailable"
        message = (
            "This replica lost its lease on the session; the turn stopped here."
            if code == "lease_lost"
            else "The session database is unavailable; the turn stopped. Retry shortly."
        )
        running = self._running
        self.bus.publish_local(
            "turn_error",
            {
                "sessionId": self.id,
                "promptId": running.prompt_id if running else None,
                "message": message,
                "code": code,
                "retryable": True,
            },
        )
        self.bus.detach()
        self.writer = None
        self._queue.clear()
        self.session.cancel("database_unavailable")
        self.frontend.cancel_all("database_unavailable")
        self.registry.forget(self)

    # ----- status -----

    def status(self) -> dict[str, Any]:
        status = super().status()
        status["replicaId"] = self.registry.replica.id
        return status


class ReplicaRegistry:
    """The sessions of every replica, as this replica serves them (see the module docstring)."""

    replicated = True

    def __init__(self, runtime: Runtime, config: DaemonConfig, database: Database) -> None:
        self.runtime = runtime
        self.config = config
        self.database = database
        self.sessions = PostgresSessions(database, lease_seconds=config.lease_seconds)
        self.replica: Replica = Replica(config, database, url="")
        self.hub = EventHub(
            database,
            ring_size=config.event_ring_size,
            max_queued=config.max_queued_events,
            orphaned=self._watch_orphan,
            orphan_seconds=config.lease_seconds / 2,
        )
        self.sessions.on_events = self.hub.committed
        self.gate = PermissionGate(open=config.token is not None, closed_because=STRICT_REASON)
        self._live: OrderedDict[tuple[str | None, str], ReplicaSession] = OrderedDict()
        self._locks: dict[tuple[str | None, str], asyncio.Lock] = {}
        self._unreachable: dict[str, float] = {}  # owner -> until when it counts as dead
        self._tasks: set[asyncio.Task[Any]] = set()
        self._handover: asyncio.Task[None] | None = None

    # ----- lifecycle -----

    async def start(self, url: str) -> None:
        self.sessions.bind(asyncio.get_running_loop())
        self.replica = Replica(self.config, self.database, url=url)
        await self.replica.start()
        self.hub.start()
        self._handover = asyncio.ensure_future(self._listen_for_handovers())

    def __len__(self) -> int:
        return sum(1 for live in self._live.values() if live.leased)

    def values(self, tenant: str | None = None, *, every_tenant: bool = False) -> list[LiveSession]:
        return [
            live
            for (t, _), live in self._live.items()
            if live.leased and (every_tenant or t == tenant)
        ]

    def runtime_for(self, tenant: str | None) -> Runtime:
        if tenant is None:
            return self.runtime
        return self.runtime.for_tenant(tenant, cwd=self.config.workspace_for(tenant))

    def store_for(self, tenant: str | None) -> PostgresSessionStore:
        store = self.runtime_for(tenant).sessions
        assert isinstance(store, PostgresSessionStore)
        return store

    # ----- holding a session -----

    def local(self, session_id: str, tenant: str | None) -> ReplicaSession | None:
        """The session if this replica holds its lease now."""
        live = self._live.get((tenant, session_id))
        return live if live is not None and live.leased else None

    @contextlib.asynccontextmanager
    async def hold(
        self, session_id: str, tenant: str | None, *, forwarded: bool = False
    ) -> AsyncIterator[ReplicaSession]:
        """The session, leased by this replica for the duration (and longer while prompts
        run); :class:`ServedElsewhere` to forward the request; 404 if there is none."""
        live = await self._take(session_id, tenant, forwarded=forwarded)
        live.holds += 1
        try:
            yield live
        finally:
            live.holds -= 1
            await self.idle(live)

    async def _take(
        self, session_id: str, tenant: str | None, *, forwarded: bool
    ) -> ReplicaSession:
        key = (tenant, session_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            live = self.local(session_id, tenant)
            if live is not None:
                return live
            if self.replica.draining:
                raise draining()
            store = self.store_for(tenant)
            lease = await self._acquire(store, session_id, forwarded=forwarded)
            if lease.state == "closed":
                with contextlib.suppress(DatabaseUnavailable):
                    await store.writer(lease).release()
                raise _not_found(session_id, closed=True)
            return await self._materialize(store, lease, tenant)

    async def _acquire(
        self, store: PostgresSessionStore, session_id: str, *, forwarded: bool
    ) -> Lease:
        deadline = time.monotonic() + self.config.lease_seconds + 2 * WAIT_POLL_SECONDS
        while True:
            try:
                lease = await store.acquire(session_id, owner=self.replica.id)
            except OwnedElsewhere as other:
                dead = self._unreachable.get(other.owner, 0.0) > time.monotonic()
                if other.live and other.url and not forwarded and not dead:
                    raise ServedElsewhere(other.owner, other.url) from None
                if time.monotonic() > deadline:
                    raise ApiError(
                        503,
                        "Another replica is running this session; retry shortly.",
                        "session_busy",
                        headers={"Retry-After": "1"},
                    ) from None
                await asyncio.sleep(WAIT_POLL_SECONDS)
                continue
            except DatabaseUnavailable as error:
                raise unavailable() from error
            if lease is None:
                raise _not_found(session_id)
            return lease

    def unreachable(self, owner: str) -> None:
        """Forwarding to ``owner`` failed: wait for its lease to expire instead."""
        self._unreachable[owner] = time.monotonic() + self.config.lease_seconds + 1

    async def _materialize(
        self, store: PostgresSessionStore, lease: Lease, tenant: str | None
    ) -> ReplicaSession:
        """The session built from the database (or the copy kept here, when still current),
        with the lease's writer attached; a dead owner's work is taken over."""
        key = (tenant, lease.session_id)
        writer = store.writer(lease)
        cached = self._live.get(key)
        try:
            if cached is not None and cached.record_count == lease.record_count:
                live = cached
                self._live.move_to_end(key)
            else:
                if cached is not None:
                    self._discard(cached)
                live = await self._build(store, lease, tenant)
            live.attach(writer)
            live.closing = False
            if lease.interrupted is not None:
                self._report_interrupted(live, lease.interrupted)
            await self._take_queue(live)
        except BaseException:
            with contextlib.suppress(Exception):
                await writer.release()
            raise
        self._trim_cache()
        return live

    async def _build(
        self, store: PostgresSessionStore, lease: Lease, tenant: str | None
    ) -> ReplicaSession:
        from cairn.recording.reader import SessionLoadError, recorded_approval_mode

        try:
            loaded = await store.aload(lease.session_id)
        except SessionLoadError as error:
            raise ApiError(
                409, str(error), "session_unreadable", sessionId=lease.session_id
            ) from None
        bus, frontend = self._wiring(store, lease.session_id)
        runtime = self.runtime_for(tenant)
        session = runtime.open_loaded(
            loaded,
            frontend=frontend,
            approval_mode=recorded_approval_mode(loaded),
            gate=self.gate,
            cwd=Path(lease.cwd),
        )
        if lease.model and lease.model != session.model:  # the model a client chose earlier
            try:
                _, provider = runtime.models.choose(lease.model)
            except Exception as error:
                _log.warning(f"session {lease.session_id}: model {lease.model} unusable: {error}")
            else:
                session.client.use_model(provider, lease.model)
        live = ReplicaSession(session, bus, frontend, self.config, self, tenant)
        live.record_count = lease.record_count
        self._live[(tenant, lease.session_id)] = live
        return live

    def _wiring(
        self, store: PostgresSessionStore, session_id: str
    ) -> tuple[LogBus, DaemonFrontend]:
        bus = LogBus(self.hub, store, session_id)
        frontend: DaemonFrontend

        def publish(kind: str, data: Any) -> object:
            envelope = bus.publish(kind, data)
            if bus.writer is not None:  # the open requests, for any replica's status route
                bus.writer.change(pending=frontend.pending)
            return envelope

        frontend = DaemonFrontend(
            session_id, publish, timeout=self.config.permission_timeout_seconds
        )
        return bus, frontend

    def _report_interrupted(self, live: ReplicaSession, prompt_id: str) -> None:
        writer = live.writer
        assert writer is not None
        writer.set_prompt_state(prompt_id, "interrupted", running=False)
        writer.change(pending=[])
        live.bus.publish(
            "turn_error",
            {
                "sessionId": live.id,
                "promptId": prompt_id,
                "message": (
                    "The replica running this turn stopped before it ended; the turn was "
                    "interrupted and is not run again (send the prompt again to retry it)."
                ),
                "code": "interrupted",
            },
        )

    async def _take_queue(self, live: ReplicaSession) -> None:
        """Prompts admitted by a replica that is gone (or that handed them over) run here."""
        from cairn.daemon.bodies import PromptBody, parse_body, to_prompt_request

        known = {p["promptId"] for p in live.pending_prompts()}
        for stored in await live.store.queued_prompts(live.id):
            if stored.prompt_id in known:
                continue
            try:
                request = await to_prompt_request(parse_body(PromptBody, stored.body), live.session)
            except ApiError as error:
                assert live.writer is not None
                live.writer.set_prompt_state(stored.prompt_id, "dropped")
                _log.warning(f"session {live.id}: queued prompt dropped: {error.message}")
                continue
            live.requeue(stored.prompt_id, request, stored.client_id, stored.last_event_id)

    def _trim_cache(self) -> None:
        while len(self._live) > max(CACHED_SESSIONS, self.config.max_sessions):
            key, oldest = next(iter(self._live.items()))
            if oldest.leased or oldest.holds:
                self._live.move_to_end(key)
                if all(s.leased or s.holds for s in self._live.values()):
                    return
                continue
            del self._live[key]
            self._discard(oldest)

    def _discard(self, live: ReplicaSession) -> None:
        """A copy no longer current (or evicted): close it in the background."""
        for key, value in list(self._live.items()):
            if value is live:
                del self._live[key]
        self._spawn(live.session.close())

    def forget(self, live: ReplicaSession) -> None:
        """``live``'s writer failed: this copy is not trusted any more."""
        self._discard(live)

    async def idle(self, live: ReplicaSession) -> None:
        """Give the lease up once nothing runs, waits or uses the session."""
        if live.writer is None or live.holds or not live.idle or not live.leased:
            return
        # Under the session's lock: a request taking the session meanwhile waits for the
        # release (taking our own lease again would fence the writer releasing it).
        async with self._locks.setdefault((live.tenant, live.id), asyncio.Lock()):
            if live.holds or not live.idle or not live.leased:
                return
            released = await self._let_go(live)
        if released and self.replica.draining:  # prompts admitted meanwhile: another replica's
            await self._hand_over([(live.store.tenant, live.store.project, live.id)])

    async def _let_go(self, live: ReplicaSession) -> bool:
        """Write what the session's row shows and give its lease up; False if that failed."""
        writer = live.writer
        if writer is None:
            return False
        live.writer = None
        live.bus.detach()
        writer.change(
            approval_mode=live.session.approval_mode,
            model=live.session.model,
            turns=live.session.turn_count,
        )
        try:
            await writer.release()
        except DatabaseUnavailable:
            self._discard(live)
            return False
        live.record_count = writer.record_count
        return True

    # ----- create, load, close -----

    async def create(
        self,
        *,
        session_id: str | None,
        approval_mode: str | None,
        mcp_servers: Sequence[ServerConfig] = (),
        tenant: str | None = None,
    ) -> tuple[LiveSession, bool]:
        if self.replica.draining:
            raise draining()
        store = self.store_for(tenant)
        new_id = session_id or str(uuid.uuid4())
        runtime = self.runtime_for(tenant)
        try:
            lease = await store.create(new_id, owner=self.replica.id, cwd=runtime.cwd)
        except DatabaseUnavailable as error:
            raise unavailable() from error
        if lease is None:  # the id is taken: attach when it is open, as one daemon does
            return await self._attach_existing(new_id, tenant)
        writer = store.writer(lease)
        bus, frontend = self._wiring(store, new_id)
        bus.attach(writer)
        try:
            session = runtime.new_session(
                frontend=frontend,
                session_id=new_id,
                approval_mode=approval_mode,
                mcp_servers=mcp_servers,
                gate=self.gate,
            )
        except WideningRefused as refused:
            await writer.release()
            raise token_required(str(refused)) from None
        live = ReplicaSession(session, bus, frontend, self.config, self, tenant)
        live.attach(writer)
        self._live[(tenant, new_id)] = live
        live.holds += 1
        try:
            self._announce(live)
            await self._settle(live)
        finally:
            live.holds -= 1
            await self.idle(live)
        return live, False

    async def _attach_existing(
        self, session_id: str, tenant: str | None
    ) -> tuple[LiveSession, bool]:
        try:
            async with self.hold(session_id, tenant) as live:
                return live, True
        except ApiError as error:
            if error.code == "session_not_found":
                raise ApiError(
                    409,
                    f"Session {session_id} is recorded: load it with POST /session/{{id}}/load.",
                    "session_exists",
                    sessionId=session_id,
                ) from None
            raise

    def _announce(self, live: ReplicaSession) -> None:
        """What a new (or reopened) session's stream starts with, as one daemon publishes it."""
        live.announce()
        self._keep_commands(live)

    def _keep_commands(self, live: ReplicaSession) -> None:
        if live.writer is not None:
            live.writer.change(commands=commands_update(live.session.command_infos()))

    async def _settle(self, live: ReplicaSession) -> None:
        if live.writer is None:
            raise unavailable()
        try:
            await live.writer.drain()
        except DatabaseUnavailable as error:
            raise unavailable() from error

    async def load(
        self,
        session_id: str,
        *,
        approval_mode: str | None,
        mcp_servers: Sequence[ServerConfig] = (),
        tenant: str | None = None,
        forwarded: bool = False,
    ) -> tuple[LiveSession, bool]:
        """An open session attaches; a closed one opens again here (its conversation replayed
        on its stream)."""
        key = (tenant, session_id)
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            live = self.local(session_id, tenant)
            if live is not None:
                return live, True
            if self.replica.draining:
                raise draining()
            store = self.store_for(tenant)
            lease = await self._acquire(store, session_id, forwarded=forwarded)
            live = await self._materialize(store, lease, tenant)
            live.holds += 1
        try:
            if lease.state == "closed":
                assert live.writer is not None
                live.writer.change(state="open")
                self._announce(live)
                await self._settle(live)
                return live, False
            return live, True
        finally:
            live.holds -= 1
            await self.idle(live)

    async def close(
        self, session_id: str, reason: str = "client_close", tenant: str | None = None
    ) -> None:
        async with self.hold(session_id, tenant) as live:
            writer = live.writer
            await live.close(reason)
            if writer is not None:
                writer.change(state="closed")
                with contextlib.suppress(DatabaseUnavailable):
                    await writer.drain()
            live.closing = True
        self._discard(live)

    def get(self, session_id: str, tenant: str | None = None) -> LiveSession:
        """A session this replica holds now (the routes' view inside :meth:`hold`)."""
        live = self.local(session_id, tenant)
        if live is None:
            raise _not_found(session_id)
        return live

    # ----- prompts -----

    async def admit(
        self,
        live: ReplicaSession,
        raw: Any,
        *,
        key: str | None,
        digest: str,
        client_id: str | None,
    ) -> tuple[QueuedPrompt | None, Any]:
        """Admit a prompt: kept in the database before the client hears of it. Returns the
        queued prompt, or (None, the earlier admission) when ``key`` was used already."""
        from cairn.daemon.bodies import PromptBody, parse_body, to_prompt_request

        live.check_admission()
        request = await to_prompt_request(parse_body(PromptBody, raw), live.session)
        writer = live.writer
        if writer is None:
            raise unavailable()
        prompt_id = uuid.uuid4().hex
        last_event_id = live.bus.last_id
        try:
            stored = await live.store.admit(
                live.id,
                writer.lease,
                prompt_id=prompt_id,
                key=key,
                body=raw,
                digest=digest,
                client_id=client_id,
                last_event_id=last_event_id,
            )
        except DatabaseUnavailable as error:
            raise unavailable() from error
        if stored.prompt_id != prompt_id:
            return None, stored
        if self.replica.draining:  # kept queued: the replica taking the session over runs it
            return QueuedPrompt(prompt_id, request, client_id, time.time(), last_event_id), None
        return live.requeue(prompt_id, request, client_id, last_event_id, body_hash=digest), None

    async def earlier_admission(self, session_id: str, tenant: str | None, key: str) -> Any:
        """The prompt admitted with ``key`` (by any replica), or None."""
        try:
            return await self.store_for(tenant).prompt_by_key(session_id, key)
        except DatabaseUnavailable as error:
            raise unavailable() from error

    # ----- reading without a lease -----

    async def summary(self, session_id: str, tenant: str | None) -> dict[str, Any]:
        try:
            summary = await self.store_for(tenant).summary(session_id)
        except DatabaseUnavailable as error:
            raise unavailable() from error
        if summary is None or summary["state"] == "closed":
            raise _not_found(session_id, closed=summary is not None)
        return summary

    async def status(self, session_id: str, tenant: str | None) -> dict[str, Any]:
        """A session's status as the database has it (no replica of this process holds it)."""
        summary = await self.summary(session_id, tenant)
        running = summary["runningPrompt"] if summary["leaseLive"] else None
        pending = [
            {
                "promptId": p["promptId"],
                "text": _prompt_text(p["body"]),
                "state": "running" if p["promptId"] == running else "queued",
                "queuedAt": int(p["queuedAt"].timestamp() * 1000),
                "originatorClientId": p["clientId"],
            }
            for p in summary["prompts"]
        ]
        return {
            "sessionId": session_id,
            "workspaceCwd": summary["cwd"],
            "createdAt": int(summary["createdAt"].timestamp() * 1000),
            "hasActivePrompt": running is not None,
            "pendingPrompts": pending,
            "isWaitingForPermission": bool(summary["pending"]) and summary["leaseLive"],
            "pendingPermissions": summary["pending"] if summary["leaseLive"] else [],
            "approvalMode": summary["approvalMode"] or self.runtime.settings.tools.approval_mode,
            "model": summary["model"] or self.runtime.provider.model,
            "lastEventId": summary["eventSeq"],
            "subscribers": self.hub.subscriber_count(self.store_for(tenant), session_id),
            "turns": summary["turns"],
            "replicaId": summary["owner"] if summary["leaseLive"] else None,
        }

    async def commands(self, session_id: str, tenant: str | None) -> list[Any]:
        """The session's slash commands as last announced."""
        summary = await self.summary(session_id, tenant)
        commands = summary["commands"] or {}
        listed = commands.get("availableCommands") if isinstance(commands, dict) else None
        return listed if isinstance(listed, list) else []

    async def listing(self, tenant: str | None) -> list[dict[str, Any]]:
        try:
            rows = await self.store_for(tenant).alisting()
        except DatabaseUnavailable as error:
            raise unavailable() from error
        return [
            {
                "sessionId": row["sessionId"],
                "workspaceCwd": row["cwd"],
                "createdAt": int(row["createdAt"].timestamp() * 1000),
                "updatedAt": int(row["updatedAt"].timestamp() * 1000),
                "displayName": row["title"] or row["firstPrompt"],
                "lastRecap": row["lastRecap"],
                "messageCount": row["messageCount"],
                "live": row["state"] == "open",
                "hasActivePrompt": bool(row["leaseLive"] and row["runningPrompt"]),
                "replicaId": row["owner"] if row["leaseLive"] else None,
            }
            for row in rows
        ]

    async def subscribe(
        self, session_id: str, tenant: str | None, cursor: int | None, max_queued: int | None
    ) -> Subscription:
        if self.replica.draining:  # the load balancer sends the reconnect elsewhere
            raise draining()
        await self.summary(session_id, tenant)  # 404 for another tenant's or an unknown id
        try:
            return await self.hub.subscribe(self.store_for(tenant), session_id, cursor, max_queued)
        except DatabaseUnavailable as error:
            raise unavailable() from error

    # ----- failover -----

    async def _watch_orphan(self, store: PostgresSessionStore, session_id: str) -> None:
        """A session this replica's clients watch: take over a dead owner's work."""
        if self.replica.draining or self.local(session_id, _tenant_of(store)) is not None:
            return
        summary = await store.summary(session_id)
        if summary is None or summary["leaseLive"] or summary["state"] == "closed":
            return
        if summary["runningPrompt"] is None and not summary["prompts"]:
            return
        await self.adopt(store, session_id)

    async def adopt(self, store: PostgresSessionStore, session_id: str) -> None:
        """Take the session over if nobody holds it (its queued prompts then run here)."""
        tenant = _tenant_of(store)
        if self.store_for(tenant) is not store:
            return  # another workspace's session
        try:
            async with self.hold(session_id, tenant, forwarded=True):
                pass
        except (ApiError, ServedElsewhere, DatabaseUnavailable) as error:
            _log.debug(f"taking over session {session_id} skipped: {error}")

    async def _listen_for_handovers(self) -> None:
        """Queued prompts a draining replica handed over: the first replica to see them takes
        them (the others find the lease taken)."""
        while True:
            try:
                async with await self.database.aconnect(autocommit=True) as connection:
                    await connection.execute(f"LISTEN {CHANNEL}_{HANDOVER}")
                    async for notice in connection.notifies():
                        parts = notice.payload.split("\t")
                        if len(parts) == 3 and not self.replica.draining:
                            store = self.sessions.store(parts[1], _tenant_name(parts[0]))
                            self._spawn(self.adopt(store, parts[2]))
            except asyncio.CancelledError:
                raise
            except Exception as error:
                _log.debug(f"handover listener: {error!r}")
            await asyncio.sleep(1.0)

    # ----- shutdown -----

    async def drain(self) -> None:
        """Stop taking sessions, let running turns end (``drain_seconds``), hand queued
        prompts over, give every lease up and end the event streams."""
        self.replica.draining = True
        held = [live for live in self._live.values() if live.leased]
        for live in held:
            live.release_queue()  # their prompts stay queued in the database
        deadline = time.monotonic() + self.config.drain_seconds
        while any(live.has_active_prompt for live in held) and time.monotonic() < deadline:
            await asyncio.sleep(0.05)
        for live in held:
            if live.has_active_prompt:
                live.cancel()
        await asyncio.gather(*(live.wait_idle() for live in held), return_exceptions=True)
        handed: list[tuple[str, str, str]] = []
        for live in held:
            async with self._locks.setdefault((live.tenant, live.id), asyncio.Lock()):
                if await self._let_go(live):
                    handed.append((live.store.tenant, live.store.project, live.id))
        await self._hand_over(handed)
        self.hub.end_streams()

    async def _hand_over(self, sessions: list[tuple[str, str, str]]) -> None:
        if not sessions:
            return
        with contextlib.suppress(Exception):
            async with self.database.connection() as connection, connection.transaction():
                for key in sessions:
                    await connection.execute(
                        "SELECT pg_notify(%s, %s)", (f"{CHANNEL}_{HANDOVER}", "\t".join(key))
                    )

    async def close_all(self, reason: str) -> None:
        """The daemon stops: drain, then close every copy kept here (nothing is closed in the
        database: the sessions go on elsewhere)."""
        await self.drain()
        if self._handover is not None:
            self._handover.cancel()
        await self.hub.aclose()
        live, self._live = list(self._live.values()), OrderedDict()
        await asyncio.gather(*(s.session.close() for s in live), return_exceptions=True)
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)
        await self.replica.aclose()
        await self.database.aclose()

    def _spawn(self, work: Any) -> None:
        task = asyncio.ensure_future(work)
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)


def _prompt_text(body: Any) -> str:
    prompt = body.get("prompt") if isinstance(body, dict) else None
    if isinstance(prompt, str):
        return prompt
    if isinstance(prompt, list):
        texts = [
            b.get("text", "") for b in prompt if isinstance(b, dict) and b.get("type") == "text"
        ]
        return "".join(t for t in texts if isinstance(t, str))
    return ""


def _not_found(session_id: str, *, closed: bool = False) -> ApiError:
    message = f'No session with id "{session_id}"'
    if closed:
        message += " open: it was closed (load it with POST /session/{id}/load)"
    return ApiError(404, message, "session_not_found", sessionId=session_id)


def _tenant_of(store: PostgresSessionStore) -> str | None:
    return _tenant_name(store.tenant)


def _tenant_name(value: str) -> str | None:
    from cairn.database.connection import NO_TENANT

    return None if value == NO_TENANT else value
