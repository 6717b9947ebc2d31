"""``cairn serve --database``: this daemon as one of several stateless replicas; the sessions
of every replica as this one serves them (:class:`ReplicaRegistry`). This process's row and
readiness are :mod:`cairn.daemon.replica`, a session it holds :mod:`cairn.daemon.replica_session`.

Sessions live in PostgreSQL (:mod:`cairn.recording.store.postgres`), so any replica behind a
plain round-robin load balancer serves any session of its tenant:

- **Ownership.** A replica runs a session's turns, and changes it, only while it holds the
  session's lease (a row lease with expiry, renewed by every write and every
  ``lease_seconds / 3`` while a turn runs). :meth:`ReplicaRegistry.hold` takes it for a request
  (waiting for a request of its own process that holds it), or raises :class:`ServedElsewhere`
  when another live replica holds it: the route then forwards the request to that replica
  (:mod:`cairn.daemon.proxy`). A lease is kept for ``linger_seconds`` (2) once the session is
  idle (no prompt running or queued, no request using it), never closer than
  ``lease_seconds / 2`` to its expiry, then given up, so the next request may land anywhere: a
  client's next prompt, usually sent at once, then skips taking the lease, reading the queue
  and giving the lease up again (a request reaching another replica meanwhile is forwarded).
  A task checkpoint due after the turn (the session went quiet) is recorded before the lease
  is given up (renewed meanwhile): another replica could not record it.
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
import time
import uuid
from collections import OrderedDict
from collections.abc import AsyncIterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.daemon.config import DaemonConfig
from cairn.daemon.errors import STRICT_REASON, ApiError, token_required
from cairn.daemon.event_log import EventHub, LogBus
from cairn.daemon.frontend import DaemonFrontend
from cairn.daemon.replica import (
    LeaseMoved,
    Replica,
    ServedElsewhere,
    draining,
    hand_over,
    not_found,
    replica_schema,
    tenant_name,
    tenant_of,
    unavailable,
)
from cairn.daemon.replica_session import ReplicaSession
from cairn.daemon.replica_views import listed_commands, listing_row, status_view
from cairn.daemon.sessions import LiveSession, QueuedPrompt
from cairn.database.connection import Database, DatabaseUnavailable
from cairn.debug_log import get_logger
from cairn.recording.store.postgres import (
    Lease,
    LeaseLost,
    OwnedElsewhere,
    PostgresSessions,
    PostgresSessionStore,
)
from cairn.session.gate import PermissionGate, WideningRefused
from cairn.session.updates import commands_update

if TYPE_CHECKING:
    from cairn.daemon.bus import Subscription
    from cairn.mcp.config import ServerConfig
    from cairn.session.runtime import Runtime

__all__ = [
    "FORWARDED_HEADER",
    "LeaseMoved",
    "Replica",
    "ReplicaRegistry",
    "ReplicaSession",
    "ServedElsewhere",
    "replica_schema",
]

FORWARDED_HEADER = "x-cairn-forwarded-by"  # a request one replica forwarded to another
WAIT_POLL_SECONDS = 0.2  # how often a request waiting for a lease asks again
CACHED_SESSIONS = 64  # sessions kept built after their lease is given up (reused if current)
CHECKPOINT_POLL_SECONDS = 0.2  # how often a lease kept for a task checkpoint looks again
_log = get_logger("DAEMON")


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
            handed_over=self._handed_over,
        )
        self.sessions.on_events = self.hub.committed
        self.gate = PermissionGate(open=config.token is not None, closed_because=STRICT_REASON)
        self._live: OrderedDict[tuple[str | None, str], ReplicaSession] = OrderedDict()
        self._locks: dict[tuple[str | None, str], asyncio.Lock] = {}
        self._unreachable: dict[str, float] = {}  # owner -> until when it counts as dead
        self._tasks: set[asyncio.Task[Any]] = set()
        self._lingering: dict[tuple[str | None, str], asyncio.TimerHandle] = {}

    # ----- lifecycle -----

    async def start(self, url: str) -> None:
        self.sessions.bind(asyncio.get_running_loop())
        self.replica = Replica(self.config, self.database, url=url)
        await self.replica.start()
        self.hub.start()

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
                self._stop_lingering(live)
                return live
            if self.replica.draining:
                raise draining()
            store = self.store_for(tenant)
            lease = await self._acquire(store, session_id, forwarded=forwarded)
            if lease.state == "closed":
                with contextlib.suppress(DatabaseUnavailable):
                    await store.writer(lease).release()
                raise not_found(session_id, closed=True)
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
                raise not_found(session_id)
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
                live.report_interrupted(lease.interrupted)
            await live.take_queue()
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
        """Nothing runs, waits or uses the session: keep its lease a little longer (the
        client's next prompt reuses it), then give it up (at once when draining)."""
        if live.writer is None or live.holds or not live.idle or not live.leased:
            return
        self._stop_lingering(live)
        live.keep_row()  # what a status elsewhere shows now, and a resuming replica reads
        kept = live.writer.valid_until - self.config.lease_seconds / 2 - time.monotonic()
        linger = min(self.config.linger_seconds, kept)
        if linger > 0 and not self.replica.draining:
            self._linger(live, linger)
            return
        await self._give_up(live)

    def _linger(self, live: ReplicaSession, seconds: float) -> None:
        timer = asyncio.get_running_loop().call_later(
            seconds, lambda: self._spawn(self._give_up(live))
        )
        self._lingering[(live.tenant, live.id)] = timer

    def _stop_lingering(self, live: ReplicaSession) -> None:
        timer = self._lingering.pop((live.tenant, live.id), None)
        if timer is not None:
            timer.cancel()

    async def _give_up(self, live: ReplicaSession) -> None:
        """Give the lease up if nothing runs, waits or uses the session, and no task
        checkpoint is on its way (that one is recorded first: nobody else could)."""
        self._stop_lingering(live)
        # Under the session's lock: a request taking the session meanwhile waits for the
        # release (taking our own lease again would fence the writer releasing it).
        async with self._locks.setdefault((live.tenant, live.id), asyncio.Lock()):
            if live.holds or not live.idle or not live.leased:
                return
            if live.session.task_state.pending and not self.replica.draining:
                if await live.keep_lease():  # the checkpoint is recorded first: look again soon
                    self._linger(live, CHECKPOINT_POLL_SECONDS)
                return
            released = await self._let_go(live)
        if released and self.replica.draining:  # prompts admitted meanwhile: another replica's
            await hand_over(self.database, [(live.store.tenant, live.store.project, live.id)])

    async def _let_go(self, live: ReplicaSession) -> bool:
        """Write what the session's row shows and give its lease up; False if that failed."""
        writer = live.writer
        if writer is None:
            return False
        live.keep_row()
        live.writer = None
        live.bus.detach()
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
                self._stop_lingering(live)
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
            raise not_found(session_id)
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

        try:
            live.check_admission()
            request = await to_prompt_request(parse_body(PromptBody, raw), live.session)
        except ApiError:  # a retry of an admitted prompt is answered as admitted, even so
            earlier = await self.earlier_admission(live.id, live.tenant, key) if key else None
            if earlier is None:
                raise
            return None, earlier
        if live.writer is None:
            raise unavailable()
        try:
            stored, new = await live.keep_admission(
                raw, key=key, digest=digest, client_id=client_id, draining=self.replica.draining
            )
        except LeaseLost as error:  # taken over while kept idle here: ask for it again
            live.lease_lost(error)
            raise LeaseMoved(live.id) from None
        except DatabaseUnavailable as error:
            raise unavailable() from error
        if not new:
            return None, stored  # the key's earlier admission
        prompt_id, last_event_id = stored.prompt_id, stored.last_event_id
        if stored.state == "queued" and self.replica.draining:  # the next owner runs it
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
            raise not_found(session_id, closed=summary is not None)
        return summary

    async def status(self, session_id: str, tenant: str | None) -> dict[str, Any]:
        """A session's status as the database has it (no replica of this process holds it)."""
        summary = await self.summary(session_id, tenant)
        return status_view(
            session_id,
            summary,
            subscribers=self.hub.subscriber_count(self.store_for(tenant), session_id),
            approval_mode=self.runtime.settings.tools.approval_mode,
            model=self.runtime.provider.model,
        )

    async def commands(self, session_id: str, tenant: str | None) -> list[Any]:
        """The session's slash commands as last announced."""
        return listed_commands(await self.summary(session_id, tenant))

    async def listing(self, tenant: str | None) -> list[dict[str, Any]]:
        try:
            rows = await self.store_for(tenant).alisting()
        except DatabaseUnavailable as error:
            raise unavailable() from error
        return [listing_row(row) for row in rows]

    async def subscribe(
        self, session_id: str, tenant: str | None, cursor: int | None, max_queued: int | None
    ) -> Subscription:
        if self.replica.draining:  # the load balancer sends the reconnect elsewhere
            raise draining()
        live = self.local(session_id, tenant)
        head = None
        if live is not None and live.writer is not None and not live.closing:
            head = live.writer.committed_seq  # held here: it exists, and its log is ours
        else:
            await self.summary(session_id, tenant)  # 404 for another tenant's or an unknown id
        try:
            return await self.hub.subscribe(
                self.store_for(tenant), session_id, cursor, max_queued, head=head
            )
        except DatabaseUnavailable as error:
            raise unavailable() from error

    # ----- failover -----

    async def _watch_orphan(self, store: PostgresSessionStore, session_id: str) -> None:
        """A session this replica's clients watch: take over a dead owner's work."""
        if self.replica.draining or self.local(session_id, tenant_of(store)) is not None:
            return
        summary = await store.summary(session_id)
        if summary is None or summary["leaseLive"] or summary["state"] == "closed":
            return
        if summary["runningPrompt"] is None and not summary["prompts"]:
            return
        await self.adopt(store, session_id)

    async def adopt(self, store: PostgresSessionStore, session_id: str) -> None:
        """Take the session over if nobody holds it (its queued prompts then run here)."""
        tenant = tenant_of(store)
        if self.store_for(tenant) is not store:
            return  # another workspace's session
        try:
            async with self.hold(session_id, tenant, forwarded=True):
                pass
        except (ApiError, ServedElsewhere, DatabaseUnavailable) as error:
            _log.debug(f"taking over session {session_id} skipped: {error}")

    def _handed_over(self, tenant: str, project: str, session_id: str) -> None:
        """Queued prompts a draining replica handed over: the first replica to see them takes
        them (the others find the lease taken)."""
        if not self.replica.draining:
            store = self.sessions.store(project, tenant_name(tenant))
            self._spawn(self.adopt(store, session_id))

    # ----- shutdown -----

    async def drain(self) -> None:
        """Stop taking sessions, let running turns end (``drain_seconds``), hand queued
        prompts over, give every lease up and end the event streams."""
        self.replica.draining = True
        for timer in self._lingering.values():
            timer.cancel()
        self._lingering.clear()
        held = [live for live in self._live.values() if live.leased]
        for live in held:
            live.release_queue()  # their prompts stay queued in the database
        deadline = time.monotonic() + self.config.drain_seconds
        # Prompts admitted as running (the admission began before the drain) run here too.
        while any(live.admitting or not live.idle for live in held):
            if time.monotonic() >= deadline:
                break
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
        await hand_over(self.database, handed)
        self.hub.end_streams()

    async def close_all(self, reason: str) -> None:
        """The daemon stops: drain, then close every copy kept here (nothing is closed in the
        database: the sessions go on elsewhere)."""
        await self.drain()
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
