"""A session a replica of ``cairn serve --database`` holds the lease on
(:mod:`cairn.daemon.replicas`): its prompts and events go through the lease's writer, the
prompt's state is kept in the database before its turn starts, and a writer that fails
(the database gone, the lease taken) stops the turn here.
"""

from __future__ import annotations

import asyncio
import contextlib
import time
import uuid
from typing import TYPE_CHECKING, Any

from cairn.daemon.config import DaemonConfig
from cairn.daemon.errors import ApiError
from cairn.daemon.event_log import LogBus
from cairn.daemon.frontend import DaemonFrontend
from cairn.daemon.sessions import LiveSession, QueuedPrompt
from cairn.database.connection import DatabaseUnavailable
from cairn.debug_log import get_logger
from cairn.recording.store.postgres import (
    LeaseLost,
    PostgresSessionStore,
    SessionWriter,
    StoredPrompt,
)

if TYPE_CHECKING:
    from cairn.daemon.replicas import ReplicaRegistry
    from cairn.session.session import Session

__all__ = ["ReplicaSession"]

_log = get_logger("DAEMON")


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
        self.admitting = 0  # admissions being written now
        self.kept_running: set[str] = set()  # prompts admitted as running (the session was idle)
        self.lock = asyncio.Lock()  # one lease taking at a time
        self._renewing: asyncio.Task[None] | None = None
        self._row: dict[str, Any] = {}  # the row's columns as this writer last queued them

    @property
    def leased(self) -> bool:
        writer = self.writer
        return writer is not None and writer.failed is None and not writer.released

    def attach(self, writer: SessionWriter) -> None:
        self.writer = writer
        writer.on_failed = lambda error: self._writer_failed(writer, error)
        self.bus.attach(writer)
        self._row = {}
        self.keep_row()

    def keep_row(self) -> None:
        """Queue the approval mode, model and turn count for the session's row (what every
        replica's status and a replica resuming the session read) if they changed."""
        if self.writer is None:
            return
        row = {
            "approval_mode": self.session.approval_mode,
            "model": self.session.model,
            "turns": self.session.turn_count,
        }
        changed = {k: v for k, v in row.items() if k not in self._row or self._row[k] != v}
        if changed:
            self.writer.change(**changed)
            self._row.update(changed)

    async def keep_lease(self) -> bool:
        """Renew the lease if half of it is gone (an idle session kept for its task checkpoint,
        whose side query is bounded); False when it cannot be (the writer's failure stopped the
        session here)."""
        writer = self.writer
        if writer is None:
            return False
        if writer.valid_until - time.monotonic() < self._config.lease_seconds / 2:
            try:
                await writer.renew()
            except DatabaseUnavailable:
                return False
        return True

    def lease_lost(self, error: LeaseLost) -> None:
        """The lease turned out to be another replica's (this one paused past its expiry):
        this copy stops (a turn running here is stopped as a failed write stops it)."""
        writer = self.writer
        if writer is None:
            return
        if not self.idle:
            self._writer_failed(writer, error)
            return
        self.bus.detach()
        self.writer = None
        writer.abandon()
        self.registry.forget(self)

    # ----- prompts (LiveSession's hooks) -----

    async def keep_admission(
        self, raw: Any, *, key: str | None, digest: str, client_id: str | None, draining: bool
    ) -> tuple[StoredPrompt, bool]:
        """Keep a new prompt's admission in the database, before the client hears of it: the
        prompt as stored and True, or the one admitted earlier with ``key`` and False. An idle
        session's prompt runs next, so its admission keeps it as running (no other write
        before its turn); it then runs here, a drain included. :class:`LeaseLost` or
        :class:`DatabaseUnavailable` when it cannot be kept."""
        writer = self.writer
        if writer is None:
            raise DatabaseUnavailable(f"session {self.id} is not held here")
        prompt_id = uuid.uuid4().hex
        running = self.idle and not self.admitting and not draining
        self.admitting += 1
        try:
            if key is not None or running:  # the row as this replica last set it, first
                await writer.drain()
            stored = await self.store.admit(
                self.id,
                writer.lease,
                prompt_id=prompt_id,
                key=key,
                body=raw,
                digest=digest,
                client_id=client_id,
                last_event_id=self.bus.last_id,
                running=running,
            )
        finally:
            self.admitting -= 1
        new = stored.prompt_id == prompt_id
        if new and running:
            self.kept_running.add(prompt_id)
        return stored, new

    async def started(self, item: QueuedPrompt) -> bool:
        """The prompt is kept as running before its turn starts (by its admission when the
        session was idle), so a replica resuming the session reports it interrupted and never
        runs it again; if that cannot be written, the turn does not start (the writer's failure
        reported it)."""
        writer = self.writer
        if writer is None:
            return False
        if item.prompt_id in self.kept_running:  # its admission kept it as running
            self.kept_running.discard(item.prompt_id)
        else:
            writer.set_prompt_state(item.prompt_id, "running", running=True)
            try:
                await writer.drain()
            except DatabaseUnavailable:
                return False
        if self._renewing is None or self._renewing.done():
            self._renewing = asyncio.ensure_future(self._renew())
        return True

    def ended(self, item: QueuedPrompt, state: str) -> None:
        """Kept with the turn's last event (one write): every replica's status counts it."""
        if self.writer is not None and self.writer.failed is None:
            self.writer.set_prompt_state(item.prompt_id, state, running=False)
            self.keep_row()

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

    def release_queue(self) -> list[QueuedPrompt]:
        """The waiting prompts another replica runs (a drain); a prompt its admission kept as
        running stays: it runs here (elsewhere it would be reported interrupted)."""
        kept = [item for item in self._queue if item.prompt_id in self.kept_running]
        dropped = [item for item in self._queue if item.prompt_id not in self.kept_running]
        self._queue.clear()
        self._queue.extend(kept)
        return dropped

    async def close(self, reason: str) -> None:
        """A prompt kept as running that had not started yet is dropped with the others (never
        reported interrupted when the session is loaded again)."""
        if not self.closing and self.writer is not None:
            for item in self._queue:
                if item.prompt_id in self.kept_running:
                    self.writer.set_prompt_state(item.prompt_id, "dropped", running=False)
        await super().close(reason)

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

    # ----- taking over a dead owner's work -----

    def report_interrupted(self, prompt_id: str) -> None:
        """The prompt a replica that died was running: reported interrupted, never run again."""
        writer = self.writer
        assert writer is not None
        writer.set_prompt_state(prompt_id, "interrupted", running=False)
        writer.change(pending=[])
        self.bus.publish(
            "turn_error",
            {
                "sessionId": self.id,
                "promptId": prompt_id,
                "message": (
                    "The replica running this turn stopped before it ended; the turn was "
                    "interrupted and is not run again (send the prompt again to retry it)."
                ),
                "code": "interrupted",
            },
        )

    async def take_queue(self) -> None:
        """Prompts admitted by a replica that is gone (or that handed them over) run here."""
        from cairn.daemon.bodies import PromptBody, parse_body, to_prompt_request

        known = {p["promptId"] for p in self.pending_prompts()}
        for stored in await self.store.queued_prompts(self.id):
            if stored.prompt_id in known:
                continue
            try:
                request = await to_prompt_request(parse_body(PromptBody, stored.body), self.session)
            except ApiError as error:
                assert self.writer is not None
                self.writer.set_prompt_state(stored.prompt_id, "dropped")
                _log.warning(f"session {self.id}: queued prompt dropped: {error.message}")
                continue
            self.requeue(stored.prompt_id, request, stored.client_id, stored.last_event_id)

    # ----- status -----

    def status(self) -> dict[str, Any]:
        status = super().status()
        status["replicaId"] = self.registry.replica.id
        return status
