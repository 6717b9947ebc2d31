"""Live sessions: each wraps one runtime :class:`Session` with its bus, prompt queue and votes.

Prompts of a session run one at a time in arrival order (FIFO). Admission answers at once with a
prompt id; the turn's events go to the session's bus, and its end is published as
``turn_complete`` (or ``turn_error`` when the model failed) carrying that prompt id.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections import OrderedDict, deque
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from cairn.daemon.bus import EventBus
from cairn.daemon.config import RETRY_AFTER_SECONDS, DaemonConfig
from cairn.daemon.errors import STRICT_REASON, ApiError, token_required
from cairn.daemon.frontend import DaemonFrontend
from cairn.debug_log import get_logger
from cairn.session.gate import PermissionGate, WideningRefused
from cairn.session.runtime import SessionNotFound, SessionUnreadable
from cairn.session.updates import UpdateMapper, commands_update, session_config_options
from cairn.vocabulary.events import SessionEvent, StreamReset, TurnResult, TurnStarted

if TYPE_CHECKING:
    from cairn.mcp.config import ServerConfig
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest, Session

__all__ = ["SESSION_UPDATE", "LiveSession", "QueuedPrompt", "SessionRegistry"]

SESSION_UPDATE = "session_update"  # the envelope type of every ACP-shaped payload
IDEMPOTENCY_KEYS_KEPT = 256  # Idempotency-Keys a session remembers (its newest prompts')

_log = get_logger("DAEMON")


@dataclass
class QueuedPrompt:
    prompt_id: str
    request: PromptRequest
    client_id: str | None
    queued_at: float
    last_event_id: int = 0  # the stream's position when it was admitted
    body_hash: str | None = None  # with an Idempotency-Key: what the key was used for

    def describe(self, state: str) -> dict[str, Any]:
        return {
            "promptId": self.prompt_id,
            "text": self.request.text,
            "state": state,
            "queuedAt": int(self.queued_at * 1000),
            "originatorClientId": self.client_id,
        }


class LiveSession:
    def __init__(
        self, session: Session, bus: EventBus, frontend: DaemonFrontend, config: DaemonConfig
    ) -> None:
        self.session = session
        self.bus = bus
        self.frontend = frontend
        self._config = config
        self._queue: deque[QueuedPrompt] = deque()
        self._running: QueuedPrompt | None = None
        self._worker: asyncio.Task[None] | None = None
        self._keys: OrderedDict[str, QueuedPrompt] = OrderedDict()  # Idempotency-Key -> prompt
        self.closing = False
        self.created_at = time.time()
        self._updates = UpdateMapper(
            session.registry, config=lambda: session_config_options(session)
        )
        self._unlisten = session.listen(self.sink)  # what happens outside a prompt

    @property
    def id(self) -> str:
        return self.session.id

    @property
    def has_active_prompt(self) -> bool:
        return self._running is not None

    # ----- prompts -----

    @property
    def idle(self) -> bool:
        """No prompt runs or waits."""
        return self._running is None and not self._queue

    def check_admission(self) -> None:
        """409 while closing, 429 when the session already holds its limit of prompts."""
        if self.closing:
            raise ApiError(409, "The session is closing.", "session_closing", sessionId=self.id)
        held = len(self._queue) + (1 if self._running is not None else 0)
        limit = self._config.max_pending_prompts
        if held >= limit:
            raise ApiError(
                429,
                f"This session already has {held} prompts running or queued (limit {limit}).",
                "prompt_queue_full",
                sessionId=self.id,
                limit=limit,
            )

    def admitted(self, key: str) -> QueuedPrompt | None:
        """The prompt admitted earlier with this ``Idempotency-Key``, if this session has it."""
        return self._keys.get(key)

    def admit(
        self,
        request: PromptRequest,
        client_id: str | None,
        *,
        prompt_id: str | None = None,
        key: str | None = None,
        body_hash: str | None = None,
    ) -> QueuedPrompt:
        """Queue a prompt (FIFO); 429 when the session already holds its limit."""
        self.check_admission()
        item = self.requeue(
            prompt_id or uuid.uuid4().hex,
            request,
            client_id,
            self.bus.last_id,
            body_hash=body_hash,
        )
        if key is not None:
            self._keys[key] = item
            while len(self._keys) > IDEMPOTENCY_KEYS_KEPT:
                self._keys.popitem(last=False)
        return item

    def requeue(
        self,
        prompt_id: str,
        request: PromptRequest,
        client_id: str | None,
        last_event_id: int,
        *,
        body_hash: str | None = None,
    ) -> QueuedPrompt:
        """Queue an admitted prompt (no limit: it was admitted already, maybe elsewhere)."""
        item = QueuedPrompt(
            prompt_id, request, client_id, time.time(), last_event_id, body_hash=body_hash
        )
        self._queue.append(item)
        if self._worker is None or self._worker.done():
            self._worker = asyncio.ensure_future(self._work())
        return item

    def release_queue(self) -> list[QueuedPrompt]:
        """Take the waiting prompts out of this session's queue (another runs them)."""
        dropped = list(self._queue)
        self._queue.clear()
        return dropped

    async def wait_idle(self) -> None:
        """Until the running prompt (if any) ended and the worker stopped."""
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)

    def pending_prompts(self) -> list[dict[str, Any]]:
        running = [self._running.describe("running")] if self._running else []
        return running + [p.describe("queued") for p in self._queue]

    async def _work(self) -> None:
        while self._queue and not self.closing:
            item = self._queue.popleft()
            self._running = item
            try:
                await self._run(item)
            finally:
                self._running = None
        await self.drained()

    # What a session over a database does around its prompts (ReplicaSession); nothing here.

    async def started(self, item: QueuedPrompt) -> bool:
        """``item``'s turn is about to start; False when it must not (its start cannot be
        kept: it would run unrecorded, and run again wherever the session resumes)."""
        return True

    def ended(self, item: QueuedPrompt, state: str) -> None:
        """``item``'s turn ended (``done``, ``failed`` or ``interrupted``)."""

    async def settled(self, item: QueuedPrompt) -> bool:
        """Everything ``item``'s turn published is kept; False when it cannot be."""
        return True

    async def drained(self) -> None:
        """No prompt runs or waits any more."""

    def publish_event(
        self,
        event: SessionEvent,
        extra: Mapping[str, Any] | None = None,
        prompt_id: str | None = None,
    ) -> None:
        """Publish a session event: ACP-shaped ``session_update`` payloads, plus the daemon's
        own ``turn_started`` and ``stream_reset`` envelopes."""
        if isinstance(event, TurnStarted):
            data = {"turnId": event.prompt_id, "fresh": event.fresh, "sessionId": self.id}
            self.bus.publish("turn_started", {**data, "promptId": prompt_id}, extra)
        elif isinstance(event, StreamReset):
            reset = {
                "reason": event.reason,
                "delay": event.delay,
                "attempt": event.attempt,
                "maxAttempts": event.max_attempts,
                "message": event.describe(),
            }
            self.bus.publish("stream_reset", reset, extra)
        for payload in self._updates.event(event):
            self.bus.publish(SESSION_UPDATE, payload, extra)

    async def sink(self, event: SessionEvent) -> None:
        """The session's listener: changes made outside a prompt (the approval-mode route,
        commands an MCP server adds ...)."""
        self.publish_event(event)

    def announce(self) -> None:
        """What a client reading from ``Last-Event-ID: 0`` sees first, as an editor does: a
        loaded session's conversation, then the commands; a question the session was asking
        when it stopped is asked again (its answer continues that turn)."""
        if self.session.loaded is not None:
            for payload in self._updates.replay(self.session.loaded.items):
                self.bus.publish(SESSION_UPDATE, payload)
            self.publish_event(self.session.client.context_used())  # how full, as live
        self.bus.publish(SESSION_UPDATE, commands_update(self.session.command_infos()))
        resume = self.session.resume_request()
        if resume is not None:
            self.admit(resume, None)

    async def _run(self, item: QueuedPrompt) -> None:
        extra = {"originatorClientId": item.client_id} if item.client_id else None

        async def sink(event: SessionEvent) -> None:
            self.publish_event(event, extra, item.prompt_id)

        if not await self.started(item):
            return
        try:
            result = await self.session.prompt(item.request, sink)
        except asyncio.CancelledError:
            self._publish_end(
                item,
                "turn_error",
                {"message": "The daemon is shutting down.", "code": "cancelled"},
                extra,
            )
            self.ended(item, "interrupted")
            raise
        except Exception as exc:
            _log.error(f"session {self.id}: prompt {item.prompt_id} failed: {exc!r}")
            self._publish_end(
                item, "turn_error", {"message": str(exc), "code": "internal_error"}, extra
            )
            self.ended(item, "failed")
        else:
            self._publish_result(item, result, extra)
            self.ended(item, "failed" if result.stop_reason == "error" else "done")
        await self.settled(item)

    def _publish_result(
        self, item: QueuedPrompt, result: TurnResult, extra: Mapping[str, Any] | None
    ) -> None:
        if result.stop_reason == "error":
            data: dict[str, Any] = {
                "message": result.error or "The model request failed.",
                "code": "model_error",
            }
            if result.error_status is not None:
                data["status"] = result.error_status
            self._publish_end(item, "turn_error", data, extra)
            return
        data = {
            "stopReason": result.stop_reason,
            "text": result.text,
            "usage": result.usage.to_dict(),
            "handledLocally": result.handled_locally,
        }
        if result.limit is not None:
            data["limit"] = result.limit
        if result.finish_reason is not None:  # "length": cut at the output bound, "filter" ...
            data["finishReason"] = result.finish_reason
        if result.loop_type is not None:
            data["loopType"] = result.loop_type
        self._publish_end(item, "turn_complete", data, extra)

    def _publish_end(
        self, item: QueuedPrompt, kind: str, data: dict[str, Any], extra: Mapping[str, Any] | None
    ) -> None:
        self.bus.publish(kind, {"sessionId": self.id, "promptId": item.prompt_id, **data}, extra)

    # ----- cancel, close -----

    def cancel(self) -> bool:
        """Cancel the running prompt (queued ones still run); False when none was running."""
        cancelled = self.session.cancel()
        self.frontend.cancel_all("agent_cancelled")  # requests not inside the cancelled turn
        return cancelled

    async def close(self, reason: str) -> None:
        if self.closing:
            return
        self.closing = True
        dropped = list(self._queue)
        self._queue.clear()
        for item in dropped:
            self._publish_end(
                item,
                "turn_error",
                {"message": "The session was closed.", "code": "session_closed"},
                None,
            )
        # The turn is cancelled first: a question it was asking stays open in the recording
        # and is asked again when the session is loaded (answered "cancelled", it would not).
        self.frontend.closing_reason = "session_closed"
        self.session.cancel("session_dispose")
        if self._worker is not None:
            await asyncio.gather(self._worker, return_exceptions=True)
        self.frontend.cancel_all("session_closed")
        self._unlisten()
        await self.session.close()
        self.bus.close("session_closed", {"sessionId": self.id, "reason": reason})

    def status(self) -> dict[str, Any]:
        return {
            "sessionId": self.id,
            "workspaceCwd": str(self.session.cwd),
            "createdAt": int(self.created_at * 1000),
            "hasActivePrompt": self.has_active_prompt,
            "pendingPrompts": self.pending_prompts(),
            "isWaitingForPermission": bool(self.frontend.pending),
            "pendingPermissions": self.frontend.pending,
            "approvalMode": self.session.approval_mode,
            "model": self.session.model,
            "lastEventId": self.bus.last_id,
            "subscribers": self.bus.subscriber_count,
            "turns": self.session.turn_count,
        }


class SessionRegistry:
    """The live sessions of one daemon, on one shared runtime (one per tenant with
    ``--tenant-header``: a tenant sees only its own sessions, recordings and memory)."""

    replicated = False  # its sessions live in this process (ReplicaRegistry's in a database)

    def __init__(self, runtime: Runtime, config: DaemonConfig) -> None:
        self.runtime = runtime
        self.config = config
        self._live: dict[tuple[str | None, str], LiveSession] = {}  # (tenant, id) -> session
        # Without a token any local process may call: nothing may widen what sessions do.
        self.gate = PermissionGate(open=config.token is not None, closed_because=STRICT_REASON)

    def __len__(self) -> int:
        return len(self._live)

    def values(self, tenant: str | None = None, *, every_tenant: bool = False) -> list[LiveSession]:
        return [s for (t, _), s in self._live.items() if every_tenant or t == tenant]

    def runtime_for(self, tenant: str | None) -> Runtime:
        if tenant is None:
            return self.runtime
        return self.runtime.for_tenant(tenant, cwd=self.config.workspace_for(tenant))

    def get(self, session_id: str, tenant: str | None = None) -> LiveSession:
        live = self._live.get((tenant, session_id))
        if live is None:
            raise ApiError(
                404, f'No session with id "{session_id}"', "session_not_found", sessionId=session_id
            )
        return live

    def create(
        self,
        *,
        session_id: str | None,
        approval_mode: str | None,
        mcp_servers: Sequence[ServerConfig] = (),
        tenant: str | None = None,
    ) -> tuple[LiveSession, bool]:
        """A new session; an id that is live already attaches to it (``attached`` True)."""
        runtime = self.runtime_for(tenant)
        if session_id is not None:
            if not _is_uuid(session_id):
                raise ApiError(400, "sessionId must be a UUID.", "invalid_session_id")
            if (tenant, session_id) in self._live:
                return self._live[(tenant, session_id)], True
            if runtime.session_exists(session_id):
                raise ApiError(
                    409,
                    f"Session {session_id} is recorded: load it with POST /session/{{id}}/load.",
                    "session_exists",
                    sessionId=session_id,
                )
        self._check_limit()
        new_id = session_id or str(uuid.uuid4())
        bus, frontend = self._wiring(new_id)
        try:
            session = runtime.new_session(
                frontend=frontend,
                session_id=new_id,
                approval_mode=approval_mode,
                mcp_servers=mcp_servers,
                gate=self.gate,
            )
        except WideningRefused as refused:
            raise token_required(str(refused)) from None
        live = self._add(session, bus, frontend, tenant)
        live.announce()
        return live, False

    def load(
        self,
        session_id: str,
        *,
        approval_mode: str | None,
        mcp_servers: Sequence[ServerConfig] = (),
        tenant: str | None = None,
    ) -> tuple[LiveSession, bool]:
        """Resume a recorded session; its conversation is published for replay (Last-Event-ID 0)."""
        if (tenant, session_id) in self._live:
            return self._live[(tenant, session_id)], True
        self._check_limit()
        bus, frontend = self._wiring(session_id)
        try:
            session = self.runtime_for(tenant).load_session(
                session_id,
                frontend=frontend,
                approval_mode=approval_mode,
                mcp_servers=mcp_servers,
                gate=self.gate,
            )
        except SessionUnreadable as exc:
            raise ApiError(409, str(exc), "session_unreadable", sessionId=session_id) from None
        except WideningRefused as refused:
            raise token_required(str(refused)) from None
        except SessionNotFound:
            raise ApiError(
                404, f'No session with id "{session_id}"', "session_not_found", sessionId=session_id
            ) from None
        live = self._add(session, bus, frontend, tenant)
        live.announce()
        return live, False

    async def close(
        self, session_id: str, reason: str = "client_close", tenant: str | None = None
    ) -> None:
        live = self.get(session_id, tenant)
        del self._live[(tenant, session_id)]
        await live.close(reason)

    async def close_all(self, reason: str) -> None:
        live, self._live = list(self._live.values()), {}
        await asyncio.gather(*(s.close(reason) for s in live), return_exceptions=True)

    def _check_limit(self) -> None:
        limit = self.config.max_sessions
        if len(self._live) >= limit:
            raise ApiError(
                503,
                f"Session limit reached ({limit})",
                "session_limit_exceeded",
                headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
                limit=limit,
            )

    def _wiring(self, session_id: str) -> tuple[EventBus, DaemonFrontend]:
        bus = EventBus(self.config.event_ring_size, self.config.max_queued_events)
        frontend = DaemonFrontend(
            session_id, bus.publish, timeout=self.config.permission_timeout_seconds
        )
        return bus, frontend

    def _add(
        self, session: Session, bus: EventBus, frontend: DaemonFrontend, tenant: str | None
    ) -> LiveSession:
        live = LiveSession(session, bus, frontend, self.config)
        self._live[(tenant, session.id)] = live
        return live


def _is_uuid(value: str) -> bool:
    try:
        uuid.UUID(value)
    except ValueError:
        return False
    return len(value) == 36
