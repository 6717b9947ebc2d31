"""The daemon's HTTP routes. Each is a thin transport over the session runtime."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from functools import wraps
from pathlib import Path
from typing import TYPE_CHECKING, Any

from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from cairn.daemon.bodies import (
    ApprovalModeBody,
    CreateSessionBody,
    LoadSessionBody,
    ModelBody,
    PromptBody,
    check_approval_mode,
    check_idempotency_key,
    check_mcp_servers,
    parse_body,
    prompt_digest,
    to_prompt_request,
)
from cairn.daemon.capabilities import FEATURES, capabilities
from cairn.daemon.config import CLIENT_ID_HEADER, DaemonConfig
from cairn.daemon.errors import ApiError, token_required
from cairn.daemon.requests import (
    BODY_SCOPE_KEY,
    Forwarded,
    Handler,
    RawResponse,
    api,
    client_id,
    cursor_of,
    http_error_handler,
    is_uuid,
    max_queued_of,
    read_json,
    replayed_admission,
    wait_for_disconnect,
)
from cairn.daemon.sessions import LiveSession, SessionRegistry
from cairn.daemon.sse import EventStreamResponse
from cairn.daemon.tenancy import TENANT_SCOPE_KEY, client_servers, request_tenant
from cairn.debug_log import bind_session, get_logger
from cairn.recap.service import Recap
from cairn.session import context_report, usage_report
from cairn.session.gate import WideningRefused
from cairn.session.models import ModelSwitchError
from cairn.session.updates import commands_update, session_config_options

if TYPE_CHECKING:
    from cairn.daemon.proxy import Forwarder
    from cairn.daemon.replicas import ReplicaRegistry
    from cairn.mcp.config import ServerConfig
    from cairn.session.rewind_requests import RewindRequest
    from cairn.session.session import Session

__all__ = [
    "CLIENT_ID_HEADER",
    "FEATURES",
    "IDEMPOTENCY_KEY_HEADER",
    "DaemonRoutes",
    "http_error_handler",
    "read_json",
    "replayed_admission",
]

IDEMPOTENCY_KEY_HEADER = "idempotency-key"
FORWARDED_HEADER = "x-cairn-forwarded-by"  # a request one replica forwarded to the owner
LIVE_SCOPE_KEY = "cairn.live"  # the session a replica holds for the request
_log = get_logger("DAEMON")

class DaemonRoutes:
    def __init__(self, registry: SessionRegistry | ReplicaRegistry, config: DaemonConfig) -> None:
        self.registry = registry
        self.config = config
        self.workspace = config.workspace.resolve()
        self.active_recaps = 0
        # With --database: the sessions of every replica (None: this process's own).
        self.replicas: ReplicaRegistry | None = None
        self.local: SessionRegistry | None = None
        if isinstance(registry, SessionRegistry):
            self.local = registry
        else:
            self.replicas = registry
        self._forwarder: Forwarder | None = None

    def routes(self) -> list[Route]:
        """Every route but the operator's two (health, capabilities) is a tenant's: with
        ``--tenant-header`` its tenant is read before anything else (:meth:`_tenanted`)."""
        tenant = self._tenanted
        owned = self._owned
        return [
            Route("/health", api(self.health), methods=["GET"]),  # the operator's
            Route("/ready", api(self.ready), methods=["GET"]),  # the operator's
            Route("/capabilities", api(self.capabilities), methods=["GET"]),
            Route("/session", tenant(self.create_session), methods=["POST"]),
            Route("/workspace/sessions", tenant(self.list_sessions), methods=["GET"]),
            Route("/session/{id}", tenant(self.close_session), methods=["DELETE"]),
            Route("/session/{id}/load", tenant(self.load_session), methods=["POST"]),
            Route("/session/{id}/status", tenant(self.status), methods=["GET"]),
            Route("/session/{id}/commands", tenant(self.commands), methods=["GET"]),
            Route("/session/{id}/prompt", tenant(self.prompt), methods=["POST"]),
            Route("/session/{id}/events", tenant(self.events), methods=["GET"]),
            Route("/session/{id}/cancel", tenant(owned(self.cancel)), methods=["POST"]),
            Route(
                "/session/{id}/permission/{request_id}",
                tenant(owned(self.permission)),
                methods=["POST"],
            ),
            Route(
                "/session/{id}/approval-mode", tenant(owned(self.approval_mode)), methods=["POST"]
            ),
            Route("/session/{id}/model", tenant(owned(self.models)), methods=["GET"]),
            Route("/session/{id}/model", tenant(owned(self.set_model)), methods=["POST"]),
            Route("/session/{id}/recap", tenant(owned(self.recap)), methods=["POST"]),
            Route("/session/{id}/context", tenant(owned(self.context)), methods=["GET"]),
            Route("/session/{id}/rewind", tenant(owned(self.rewind_list)), methods=["GET"]),
            Route("/session/{id}/rewind", tenant(owned(self.rewind)), methods=["POST"]),
        ]

    def _tenanted(self, handler: Callable[[Request], Awaitable[Response]]) -> Handler:
        @wraps(handler)
        async def run(request: Request) -> Response:
            request.scope[TENANT_SCOPE_KEY] = request_tenant(request.scope["headers"], self.config)
            return await handler(request)

        return api(run)

    def _owned(self, handler: Callable[[Request], Awaitable[Response]]) -> Handler:
        """A route that changes its session: with ``--database`` it runs where the session's
        lease is (taken here, or the request is forwarded to the replica holding it)."""

        @wraps(handler)
        async def run(request: Request) -> Response:
            if self.replicas is None:
                return await handler(request)
            return await self._with_owner(request, lambda live: handler(request))

        return run

    async def _with_owner(
        self, request: Request, action: Callable[[LiveSession], Awaitable[Response]]
    ) -> Response:
        """Run ``action`` on the session while this replica holds its lease, or forward the
        request to the live replica holding it (waiting out a dead one's lease)."""
        from cairn.daemon.proxy import OwnerUnreachable
        from cairn.daemon.replicas import LeaseMoved, ServedElsewhere

        replicas = self.replicas
        assert replicas is not None
        session_id, tenant = request.path_params["id"], self._tenant(request)
        forwarded = FORWARDED_HEADER in request.headers
        while True:
            try:
                async with replicas.hold(session_id, tenant, forwarded=forwarded) as live:
                    request.scope[LIVE_SCOPE_KEY] = live
                    return await action(live)
            except LeaseMoved:
                continue  # the lease kept here was taken over: take it, or forward
            except ServedElsewhere as elsewhere:
                try:
                    return await self._forward(request, elsewhere.url)
                except OwnerUnreachable:
                    replicas.unreachable(elsewhere.owner)  # wait for its lease to expire

    async def _forward(self, request: Request, url: str) -> Response:
        from cairn.daemon.proxy import Forwarder

        if self._forwarder is None:
            assert self.replicas is not None
            self._forwarder = Forwarder(self.replicas.replica.id, FORWARDED_HEADER)
        return await self._forwarder.forward(request, url, request.scope.get(BODY_SCOPE_KEY))

    async def aclose(self) -> None:
        if self._forwarder is not None:
            await self._forwarder.aclose()

    # ----- helpers -----

    async def _body(self, request: Request) -> Any:
        return await read_json(request, self.config.max_body_bytes)

    def _tenant(self, request: Request) -> str | None:
        """The request's tenant (``--tenant-header``), read before the route ran: None on a
        daemon without tenants."""
        tenant: str | None = request.scope[TENANT_SCOPE_KEY]
        return tenant

    def _live(self, request: Request) -> LiveSession:
        """The session the path names, if it is the request's tenant's (404 otherwise)."""
        held: LiveSession | None = request.scope.get(LIVE_SCOPE_KEY)
        if held is not None:
            return held
        return self.registry.get(request.path_params["id"], self._tenant(request))

    def _strict(self) -> None:
        """Routes that rewrite the workspace need a token even on a loopback bind (widening
        permissions is refused by the session's gate, :mod:`cairn.session.gate`)."""
        if self.config.token is None:
            raise token_required(
                "This route needs a daemon started with a token (--token or CAIRN_SERVER_TOKEN)."
            )

    def _client_servers(self, entries: list[Any], route: str) -> list[ServerConfig]:
        return client_servers(check_mcp_servers(entries, route), self.config, route)

    def _workspace(self, tenant: str | None) -> Path:
        """Where the tenant's sessions work (``--workspace-root``: its own folder)."""
        return self.config.workspace_for(tenant).resolve()

    def _check_cwd(self, cwd: str | None, tenant: str | None = None) -> None:
        if cwd is None:
            return
        try:
            requested = Path(cwd).resolve()
        except (OSError, RuntimeError, ValueError):
            requested = Path(cwd)
        workspace = self._workspace(tenant)
        if requested != workspace:
            raise ApiError(
                400,
                f"Workspace mismatch: this daemon serves {workspace}",
                "workspace_mismatch",
                boundWorkspace=str(workspace),
                requestedWorkspace=cwd,
            )

    def _session_info(self, live: LiveSession, attached: bool) -> dict[str, Any]:
        return {
            "sessionId": live.id,
            "workspaceCwd": str(live.session.cwd),
            "attached": attached,
            "createdAt": int(live.created_at * 1000),
            "approvalMode": live.session.approval_mode,
            "model": live.session.model,
            "lastEventId": live.bus.last_id,
        }

    async def _opened(self, live: LiveSession, attached: bool) -> dict[str, Any]:
        """The answer to a create or load: the session, and its menus as ACP configOptions."""
        await self.registry.runtime.models.load()  # ``model.available: "auto"``: read once
        return {
            **self._session_info(live, attached),
            "configOptions": session_config_options(live.session),
        }

    # ----- discovery -----

    async def health(self, request: Request) -> Response:
        body: dict[str, Any] = {"status": "ok"}
        if request.query_params.get("deep") in ("1", "true"):
            sessions = self.registry.values(every_tenant=True)
            body.update(
                sessions=len(sessions),
                activePrompts=sum(1 for s in sessions if s.has_active_prompt),
                pendingPermissions=sum(len(s.frontend.pending) for s in sessions),
                activeRecaps=self.active_recaps,
            )
        return JSONResponse(body)

    async def ready(self, request: Request) -> Response:
        """Whether this daemon should get traffic: with ``--database``, the database answers,
        its tables are current and the replica is not shutting down (503 and why, if not)."""
        if self.replicas is None:
            return JSONResponse({"status": "ready"})
        problem = await self.replicas.replica.check()
        body: dict[str, Any] = {"replicaId": self.replicas.replica.id}
        if problem is not None:
            return JSONResponse({"status": "not_ready", "reason": problem, **body}, 503)
        return JSONResponse({"status": "ready", **body})

    async def capabilities(self, request: Request) -> Response:
        body = capabilities(self.config)
        if self.replicas is not None:
            body["replicaId"] = self.replicas.replica.id
        return JSONResponse(body)

    # ----- sessions -----

    async def create_session(self, request: Request) -> Response:
        tenant = self._tenant(request)
        body = parse_body(CreateSessionBody, await self._body(request))
        self._check_cwd(body.cwd, tenant)
        options: dict[str, Any] = {
            "session_id": body.session_id,
            "approval_mode": check_approval_mode(body.approval_mode),
            "mcp_servers": self._client_servers(body.mcp_servers, "/session"),
            "tenant": tenant,
        }
        if body.session_id is not None and not is_uuid(body.session_id):
            raise ApiError(400, "sessionId must be a UUID.", "invalid_session_id")
        if self.replicas is not None:
            live, attached = await self._replicated(
                request,
                lambda: self.replicas.create(**options),  # type: ignore[union-attr]
            )
        else:
            assert self.local is not None
            live, attached = self.local.create(**options)
        return JSONResponse(await self._opened(live, attached))

    async def load_session(self, request: Request) -> Response:
        tenant = self._tenant(request)
        body = parse_body(LoadSessionBody, await self._body(request))
        self._check_cwd(body.cwd, tenant)
        session_id = request.path_params["id"]
        options: dict[str, Any] = {
            "approval_mode": check_approval_mode(body.approval_mode),
            "mcp_servers": self._client_servers(body.mcp_servers, "/session/{id}/load"),
            "tenant": tenant,
        }
        if self.replicas is not None:
            replicas = self.replicas
            forwarded = FORWARDED_HEADER in request.headers
            live, attached = await self._replicated(
                request, lambda: replicas.load(session_id, forwarded=forwarded, **options)
            )
        else:
            assert self.local is not None
            live, attached = self.local.load(session_id, **options)
        return JSONResponse(await self._opened(live, attached))

    async def _replicated(
        self, request: Request, open_: Callable[[], Awaitable[tuple[LiveSession, bool]]]
    ) -> tuple[LiveSession, bool]:
        """A create or load on replicas; a session held by a live replica is answered there."""
        from cairn.daemon.proxy import OwnerUnreachable
        from cairn.daemon.replicas import ServedElsewhere

        assert self.replicas is not None
        while True:
            try:
                return await open_()
            except ServedElsewhere as elsewhere:
                try:
                    raise Forwarded(await self._forward(request, elsewhere.url)) from None
                except OwnerUnreachable:
                    self.replicas.unreachable(elsewhere.owner)

    async def list_sessions(self, request: Request) -> Response:
        tenant = self._tenant(request)
        if self.replicas is not None:
            listed = await self.replicas.listing(tenant)
            return JSONResponse({"sessions": listed})
        live = {s.id: s for s in self.registry.values(tenant)}
        sessions: list[dict[str, Any]] = []
        for s in live.values():
            sessions.append(
                {
                    **self._session_info(s, True),
                    "live": True,
                    "hasActivePrompt": s.has_active_prompt,
                }
            )
        recorded = await asyncio.to_thread(self.registry.runtime_for(tenant).list_sessions)
        for info in recorded:
            if info.session_id in live:
                continue
            sessions.append(
                {
                    "sessionId": info.session_id,
                    "workspaceCwd": str(self._workspace(tenant)),
                    "createdAt": int(info.start_time.timestamp() * 1000),
                    "updatedAt": int(info.mtime.timestamp() * 1000),
                    "displayName": info.first_prompt,
                    "lastRecap": info.last_recap,
                    "messageCount": info.message_count,
                    "live": False,
                    "hasActivePrompt": False,
                }
            )
        return JSONResponse({"sessions": sessions})

    async def status(self, request: Request) -> Response:
        if self.replicas is not None:
            session_id, tenant = request.path_params["id"], self._tenant(request)
            local = self.replicas.local(session_id, tenant)
            if local is None:
                return JSONResponse(await self.replicas.status(session_id, tenant))
            return JSONResponse(local.status())
        return JSONResponse(self._live(request).status())

    async def commands(self, request: Request) -> Response:
        if self.replicas is not None:
            session_id, tenant = request.path_params["id"], self._tenant(request)
            if self.replicas.local(session_id, tenant) is None:
                listed = await self.replicas.commands(session_id, tenant)
                return JSONResponse({"sessionId": session_id, "commands": listed})
        live = self._live(request)
        update = commands_update(live.session.command_infos())
        return JSONResponse({"sessionId": live.id, "commands": update["availableCommands"]})

    async def close_session(self, request: Request) -> Response:
        tenant = self._tenant(request)
        session_id = request.path_params["id"]
        if self.replicas is not None:
            replicas = self.replicas

            async def close() -> tuple[LiveSession, bool]:
                await replicas.close(session_id, "client_close", tenant)
                return None, False  # type: ignore[return-value]

            await self._replicated(request, close)
            return Response(status_code=204)
        await self.registry.close(session_id, "client_close", tenant)
        return Response(status_code=204)

    # ----- turns -----

    async def prompt(self, request: Request) -> Response:
        if self.replicas is not None:
            return await self._replicated_prompt(request)
        live = self._live(request)
        raw = await self._body(request)
        key = check_idempotency_key(request.headers.get(IDEMPOTENCY_KEY_HEADER))
        if key is not None and (earlier := live.admitted(key)) is not None:
            return replayed_admission(
                earlier.prompt_id, earlier.last_event_id, earlier.body_hash, raw
            )
        body = parse_body(PromptBody, raw)
        prompt_request = await to_prompt_request(body, live.session)
        item = live.admit(
            prompt_request, client_id(request), key=key, body_hash=prompt_digest(raw)
        )
        return JSONResponse({"promptId": item.prompt_id, "lastEventId": item.last_event_id}, 202)

    async def _replicated_prompt(self, request: Request) -> Response:
        """A prompt on replicas: a retried ``Idempotency-Key`` is answered from the database
        by any replica; a new prompt is admitted (kept in the database first) by the replica
        holding the session."""
        replicas = self.replicas
        assert replicas is not None
        raw = await self._body(request)
        key = check_idempotency_key(request.headers.get(IDEMPOTENCY_KEY_HEADER))
        session_id, tenant = request.path_params["id"], self._tenant(request)
        # Held here: the admission answers a retried key in its own transaction.
        if key is not None and replicas.local(session_id, tenant) is None:
            earlier = await replicas.earlier_admission(session_id, tenant, key)
            if earlier is not None:
                return replayed_admission(
                    earlier.prompt_id, earlier.last_event_id, earlier.body_hash, raw, earlier.state
                )

        async def admit(live: LiveSession) -> Response:
            item, earlier = await replicas.admit(
                live,  # type: ignore[arg-type]
                raw,
                key=key,
                digest=prompt_digest(raw),
                client_id=client_id(request),
            )
            if item is None:
                return replayed_admission(
                    earlier.prompt_id, earlier.last_event_id, earlier.body_hash, raw, earlier.state
                )
            admitted = {
                "promptId": item.prompt_id,
                "lastEventId": item.last_event_id,
                "replicaId": replicas.replica.id,  # the replica that runs it
            }
            return JSONResponse(admitted, 202)

        return await self._with_owner(request, admit)

    async def events(self, request: Request) -> Response:
        max_queued = max_queued_of(request.query_params.get("maxQueued"))
        cursor = request.headers.get("last-event-id") or request.query_params.get("lastEventId")
        if self.replicas is not None:
            session_id, tenant = request.path_params["id"], self._tenant(request)
            subscription = await self.replicas.subscribe(
                session_id, tenant, cursor_of(cursor), max_queued
            )
            return RawResponse(
                EventStreamResponse(subscription.bus, subscription, self.config.heartbeat_seconds)
            )
        live = self._live(request)
        subscription = live.bus.subscribe(cursor_of(cursor), max_queued)
        stream = EventStreamResponse(live.bus, subscription, self.config.heartbeat_seconds)
        return RawResponse(stream)

    async def cancel(self, request: Request) -> Response:
        live = self._live(request)
        await self._body(request)
        live.cancel()
        return Response(status_code=204)

    async def permission(self, request: Request) -> Response:
        live = self._live(request)
        body = await self._body(request)
        request_id = request.path_params["request_id"]
        if not live.frontend.vote(request_id, body):
            raise ApiError(
                404,
                f'No open permission request "{request_id}" (unknown or already resolved)',
                "permission_not_found",
                requestId=request_id,
            )
        return JSONResponse({})

    async def approval_mode(self, request: Request) -> Response:
        live = self._live(request)
        body = parse_body(ApprovalModeBody, await self._body(request))
        mode = check_approval_mode(body.mode)
        assert mode is not None
        previous = live.session.approval_mode
        try:  # announced to the stream by the session's listener
            await live.session.set_approval_mode(mode)
        except WideningRefused as refused:  # the session's gate: strict without a token
            raise token_required(str(refused)) from None
        return JSONResponse({"sessionId": live.id, "mode": mode, "previous": previous})

    async def rewind_list(self, request: Request) -> Response:
        """The turns a rewind can go back to (newest first)."""
        from cairn.session.rewind_requests import RewindRequest

        return await self._rewind(request, RewindRequest("list"))

    async def rewind(self, request: Request) -> Response:
        """Rewind code, conversation or both to before a turn, or undo the last rewind."""
        from cairn.session.rewind_requests import parse_rewind_request

        self._strict()  # it rewrites the workspace
        body = await self._body(request)
        try:
            parsed = parse_rewind_request(body if isinstance(body, dict) else {})
        except ValueError as exc:
            raise ApiError(400, str(exc), "invalid_rewind") from None
        return await self._rewind(request, parsed)

    async def _rewind(self, request: Request, parsed: RewindRequest) -> Response:
        from cairn.session.rewind import RewindError
        from cairn.session.rewind_requests import answer_rewind_request

        live = self._live(request)
        if live.has_active_prompt:
            raise ApiError(409, "Cannot rewind while a prompt runs; cancel it first.", "busy")
        try:
            with bind_session(live.id):
                answer = await answer_rewind_request(live.session, parsed)
        except RewindError as exc:
            raise ApiError(409, f"Cannot rewind: {exc}.", "rewind_failed") from None
        if parsed.action != "list":
            live.bus.publish("rewound", answer)
        return JSONResponse(answer)

    async def models(self, request: Request) -> Response:
        """``{sessionId, currentModelId, availableModels: [{modelId, name, description?}]}``."""
        live = self._live(request)
        await self.registry.runtime.models.load()
        return JSONResponse(
            {
                "sessionId": live.id,
                "currentModelId": live.session.model,
                "availableModels": [
                    {"modelId": o.id, "name": o.shown_name}
                    | ({"description": o.shown_description} if o.shown_description else {})
                    for o in live.session.model_options()
                ],
            }
        )

    async def set_model(self, request: Request) -> Response:
        """``{modelId}`` → ``{sessionId, modelId, previous}``; announced to the event stream
        as a ``config_option_update``."""
        live = self._live(request)
        body = parse_body(ModelBody, await self._body(request))
        await self.registry.runtime.models.load()
        previous = live.session.model
        try:
            await live.session.set_model(body.model_id)
        except ModelSwitchError as exc:
            raise ApiError(
                400, f"Cannot switch to {body.model_id!r}: {exc}.", "invalid_model"
            ) from None
        return JSONResponse(
            {"sessionId": live.id, "modelId": live.session.model, "previous": previous}
        )

    async def recap(self, request: Request) -> Response:
        """``{sessionId, recap}``, and ``reason`` when ``recap`` is null; bounded by the recap
        timeout, cancelled if the client leaves."""
        live = self._live(request)
        with contextlib.suppress(ApiError):
            await self._body(request)  # the body is ignored, whatever it holds
        recap = await self._recap_or_disconnect(request, live.session)
        body: dict[str, Any] = {"sessionId": live.id, "recap": recap.text}
        if recap.text is None and recap.reason:
            body["reason"] = recap.reason
        return JSONResponse(body)

    async def context(self, request: Request) -> Response:
        """``{sessionId, context, usage}``: what fills the context window, by part, and the
        tokens used by purpose (the session's; today's too, outside tenants)."""
        session = self._live(request).session
        report = context_report(session).to_dict()
        usage = usage_report(session)
        return JSONResponse({"sessionId": session.id, "context": report, "usage": usage})

    async def _recap_or_disconnect(self, request: Request, session: Session) -> Recap:
        async def generate() -> Recap:
            with bind_session(session.id):
                return await session.recap_outcome()

        task = asyncio.ensure_future(generate())
        gone = asyncio.ensure_future(wait_for_disconnect(request))
        self.active_recaps += 1
        try:
            done, _ = await asyncio.wait(
                {task, gone},
                timeout=self.config.recap_timeout_seconds,
                return_when=asyncio.FIRST_COMPLETED,
            )
        finally:
            self.active_recaps -= 1
            gone.cancel()
            if not task.done():
                task.cancel()
            await asyncio.gather(task, gone, return_exceptions=True)
        if task in done and not task.cancelled():
            return task.result()
        timeout = self.config.recap_timeout_seconds
        reason = "the client disconnected" if gone in done else f"it took over {timeout:g} s"
        _log.debug(f"recap for {session.id} cancelled: {reason}")
        return Recap(None, f"The model did not write a recap within {timeout:g} s.")
