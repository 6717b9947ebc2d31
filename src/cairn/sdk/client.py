"""``DaemonClient``: the async Python client of ``cairn serve``."""

from __future__ import annotations

import asyncio
import contextlib
import uuid
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import httpx

from cairn.sdk._sse import parse_events
from cairn.sdk.errors import (
    DaemonConnectionError,
    DaemonHTTPError,
    FeatureNotSupported,
    NotFoundError,
    TurnError,
    http_error,
)
from cairn.sdk.retries import RETRIES, resend_after_error, resend_after_status, retry_delay
from cairn.sdk.types import (
    Capabilities,
    DaemonEvent,
    ModelList,
    PromptAdmission,
    SessionInfo,
)

if TYPE_CHECKING:
    from cairn.sdk.session import DaemonSessionClient

__all__ = ["DEFAULT_TIMEOUT", "DaemonClient", "Prompt"]

DEFAULT_TIMEOUT = 30.0  # seconds for short calls; not applied to recaps or open event streams
RECONNECT_ATTEMPTS = 5  # consecutive failed reconnects before events() gives up
CLIENT_ID_HEADER = "X-Cairn-Client-Id"
IDEMPOTENCY_KEY_HEADER = "Idempotency-Key"
_END_OF_TURN = ("turn_complete", "turn_error")

Prompt = str | Sequence[Mapping[str, Any]]  # text, or ACP content blocks


class DaemonClient(contextlib.AbstractAsyncContextManager["DaemonClient"]):
    """An async client of one daemon. Use it as ``async with DaemonClient(url) as client:``.

    ``timeout`` (seconds, ``None`` for none) bounds the short calls and the connect phase of
    event streams; :meth:`recap_session` is not bound by it (a recap waits on the model).
    ``retries``: how many times a request goes again when the daemon (or a replica behind a
    load balancer) is briefly unavailable, with backoff (:mod:`cairn.sdk.retries`); 0 for never.
    """

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        client_id: str | None = None,
        http_client: httpx.AsyncClient | None = None,
        headers: Mapping[str, str] | None = None,
        retries: int = RETRIES,
    ) -> None:
        """``headers`` go with every request (a tenant: ``{"X-Cairn-Tenant": "acme"}``)."""
        self.base_url = base_url.rstrip("/")
        self.timeout = timeout
        self.retries = max(0, retries)
        headers = dict(headers or {})
        if token:
            headers["Authorization"] = f"Bearer {token}"
        if client_id:
            headers[CLIENT_ID_HEADER] = client_id
        self._owns_http = http_client is None
        self._http = http_client or httpx.AsyncClient(
            trust_env=False,
            limits=httpx.Limits(max_connections=None),
            # Plain HTTP has nothing to verify, and loading the CA bundle costs ~50-100 ms.
            verify=not self.base_url.startswith("http://"),
        )
        self._headers = headers
        self._capabilities: Capabilities | None = None

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        if self._owns_http:
            await self._http.aclose()

    def session(self, session_id: str, *, last_event_id: int = 0) -> DaemonSessionClient:
        """A :class:`~cairn.sdk.DaemonSessionClient` bound to ``session_id``."""
        from cairn.sdk.session import DaemonSessionClient

        return DaemonSessionClient(self, session_id, last_event_id=last_event_id)

    # ----- discovery -----

    async def health(self) -> dict[str, Any]:
        return await self._json("GET", "/health")

    async def capabilities(self, *, refresh: bool = False) -> Capabilities:
        if self._capabilities is None or refresh:
            self._capabilities = Capabilities.from_json(await self._json("GET", "/capabilities"))
        return self._capabilities

    async def require(self, feature: str) -> None:
        """Raise :class:`FeatureNotSupported` unless the daemon advertises ``feature``."""
        if not (await self.capabilities()).supports(feature):
            raise FeatureNotSupported(feature)

    # ----- sessions -----

    async def create_session(
        self,
        *,
        session_id: str | None = None,
        approval_mode: str | None = None,
        cwd: str | None = None,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
    ) -> SessionInfo:
        """``mcp_servers``: the session's own MCP servers, in ACP's ``session/new`` shape.
        Without ``session_id`` the client chooses one, so a retried create makes one session."""
        body = _without_none(
            sessionId=session_id or str(uuid.uuid4()),
            approvalMode=approval_mode,
            cwd=cwd,
            mcpServers=list(mcp_servers) if mcp_servers is not None else None,
        )
        data = await self._json("POST", "/session", json=body, idempotent=True)
        return SessionInfo.from_json(data)

    async def load_session(
        self, session_id: str, *, approval_mode: str | None = None
    ) -> SessionInfo:
        body = _without_none(approvalMode=approval_mode)
        data = await self._json(
            "POST", f"/session/{session_id}/load", json=body, idempotent=True
        )
        return SessionInfo.from_json(data)

    async def list_sessions(self) -> list[dict[str, Any]]:
        data = await self._json("GET", "/workspace/sessions")
        sessions = data.get("sessions")
        return list(sessions) if isinstance(sessions, list) else []

    async def session_status(self, session_id: str) -> dict[str, Any]:
        return await self._json("GET", f"/session/{session_id}/status")

    async def close_session(self, session_id: str) -> None:
        """Close a live session (its recording stays); an unknown session is not an error."""
        with contextlib.suppress(NotFoundError):
            await self._request("DELETE", f"/session/{session_id}")

    async def set_approval_mode(self, session_id: str, mode: str) -> dict[str, Any]:
        """Needs a daemon started with a token (a strict route)."""
        return await self._json(
            "POST", f"/session/{session_id}/approval-mode", json={"mode": mode}, idempotent=True
        )

    async def list_models(self, session_id: str) -> ModelList:
        """The session's model and the models it may switch to (``model.available``)."""
        return ModelList.from_json(await self._json("GET", f"/session/{session_id}/model"))

    async def set_model(self, session_id: str, model_id: str) -> dict[str, Any]:
        """Send the session's next requests to ``model_id``: ``{sessionId, modelId, previous}``."""
        return await self._json(
            "POST", f"/session/{session_id}/model", json={"modelId": model_id}, idempotent=True
        )

    # ----- turns -----

    async def prompt(
        self, session_id: str, prompt: Prompt, *, idempotency_key: str | None = None
    ) -> PromptAdmission:
        """Queue a prompt; its events follow on :meth:`events` after ``last_event_id``.

        It goes with an ``Idempotency-Key`` (``idempotency_key``, or a new one), so a retry,
        here or yours with the same key, is answered with the first admission and never runs
        the prompt twice."""
        body = {"prompt": prompt if isinstance(prompt, str) else [dict(b) for b in prompt]}
        key = idempotency_key or uuid.uuid4().hex
        data = await self._json(
            "POST",
            f"/session/{session_id}/prompt",
            json=body,
            headers={IDEMPOTENCY_KEY_HEADER: key},
            idempotent=True,
        )
        return PromptAdmission.from_json(data)

    async def prompt_and_wait(self, session_id: str, prompt: Prompt) -> str:
        """Run a prompt and return the turn's final text; :class:`TurnError` if it failed."""
        admission = await self.prompt(session_id, prompt)
        return (await self.wait_for_turn(session_id, admission)).final_text

    async def wait_for_turn(self, session_id: str, admission: PromptAdmission) -> DaemonEvent:
        """The ``turn_complete`` event of an admitted prompt; raises :class:`TurnError`."""
        events = self.events(session_id, last_event_id=admission.last_event_id)
        async with contextlib.aclosing(events) as stream:
            async for event in stream:
                if event.type in _END_OF_TURN and event.prompt_id == admission.prompt_id:
                    if event.type == "turn_error":
                        message = str(event.data.get("message", "the turn failed"))
                        code = event.data.get("code")
                        raise TurnError(
                            message,
                            code=code if isinstance(code, str) else None,
                            prompt_id=admission.prompt_id,
                        )
                    return event
        raise TurnError(
            "the session closed before the turn ended",
            code="session_closed",
            prompt_id=admission.prompt_id,
        )

    async def events(
        self,
        session_id: str,
        *,
        last_event_id: int | None = None,
        reconnect: bool = True,
        max_queued: int | None = None,
    ) -> AsyncGenerator[DaemonEvent, None]:
        """The session's events. With ``last_event_id`` the retained events after it come first.

        A dropped connection (or an eviction for reading too slowly) reconnects with
        ``Last-Event-ID`` set to the last id seen, so nothing is lost while the daemon's replay
        ring still holds it. The stream ends after ``session_closed``. Close it early with
        ``contextlib.aclosing``.
        """
        cursor = last_event_id
        if cursor is None and reconnect:
            cursor = int((await self.session_status(session_id)).get("lastEventId", 0))
        failures = 0
        while True:
            received = False
            retry_after: str | None = None
            try:
                async for event in self._stream_once(session_id, cursor, max_queued):
                    received, failures = True, 0
                    if event.id is not None:
                        cursor = event.id
                    yield event
                    if event.type == "session_closed":
                        return
            except DaemonConnectionError:
                failures += 1
                if not reconnect or failures > RECONNECT_ATTEMPTS:
                    raise
            except DaemonHTTPError as error:  # a replica shutting down, a load balancer's 503
                failures += 1
                unavailable = resend_after_status(error.status, error.body, idempotent=True)
                if not (reconnect and unavailable) or failures > RECONNECT_ATTEMPTS:
                    raise
                retry_after = error.retry_after
            else:
                if not reconnect:
                    return
                if received:
                    continue  # e.g. evicted for reading too slowly: resume at once
                failures += 1
                if failures > RECONNECT_ATTEMPTS:
                    raise DaemonConnectionError(f"the event stream of {session_id} keeps ending")
            await asyncio.sleep(retry_delay(failures, retry_after))

    async def _stream_once(
        self, session_id: str, cursor: int | None, max_queued: int | None
    ) -> AsyncGenerator[DaemonEvent, None]:
        headers = dict(self._headers, Accept="text/event-stream")
        if cursor is not None:
            headers["Last-Event-ID"] = str(cursor)
        params = {"maxQueued": str(max_queued)} if max_queued is not None else None
        timeout = httpx.Timeout(self.timeout, read=None)
        url = f"{self.base_url}/session/{session_id}/events"
        try:
            async with self._http.stream(
                "GET", url, headers=headers, params=params, timeout=timeout
            ) as response:
                if response.status_code != 200:
                    await response.aread()
                    raise _error_of(response)
                async for event in parse_events(response.aiter_lines()):
                    yield event
        except httpx.TransportError as exc:
            raise DaemonConnectionError(f"the event stream of {session_id} broke: {exc}") from exc

    async def cancel(self, session_id: str) -> None:
        """Cancel the running prompt (queued prompts still run)."""
        await self._request("POST", f"/session/{session_id}/cancel", json={})

    async def respond_permission(
        self,
        session_id: str,
        request_id: str,
        option_id: str | None = None,
        *,
        answers: Sequence[str] | None = None,
    ) -> bool:
        """Vote on a ``permission_request``: ``allow_once``, ``allow_always`` or ``reject_once``;
        ``answers`` for a question; neither cancels. False when it was already resolved."""
        body: dict[str, Any]
        if answers is not None:
            body = {"answers": list(answers)}
        elif option_id is not None:
            body = {"outcome": {"outcome": "selected", "optionId": option_id}}
        else:
            body = {"outcome": {"outcome": "cancelled"}}
        try:
            await self._json("POST", f"/session/{session_id}/permission/{request_id}", json=body)
        except NotFoundError as exc:
            if exc.code == "session_not_found":
                raise
            return False
        return True

    async def recap_session(self, session_id: str, *, timeout: float | None = None) -> str | None:
        """A one- or two-sentence "where were we" summary, or ``None`` when there is too little
        conversation (or the model failed). Not bound by the client's default timeout."""
        await self.require("session_recap")
        data = await self._json(
            "POST", f"/session/{session_id}/recap", json={}, timeout=httpx.Timeout(timeout)
        )
        recap = data.get("recap")
        return recap if isinstance(recap, str) else None

    async def session_context(self, session_id: str) -> dict[str, Any]:
        """``{sessionId, context, usage}``: what fills the session's context window, by part,
        and the tokens (and cost, where priced) its requests used by purpose."""
        await self.require("session_context")
        return await self._json("GET", f"/session/{session_id}/context")

    # ----- HTTP -----

    async def _json(self, method: str, path: str, **kwargs: Any) -> dict[str, Any]:
        response = await self._request(method, path, **kwargs)
        data = _json_or_none(response)
        return data if isinstance(data, dict) else {}

    async def _request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        timeout: Any = None,
        headers: Mapping[str, str] | None = None,
        idempotent: bool | None = None,
    ) -> httpx.Response:
        """Send a request, again while the daemon is briefly unavailable (:mod:`.retries`);
        ``idempotent`` (default: GET and DELETE are) allows it after a broken connection too."""
        if idempotent is None:
            idempotent = method in ("GET", "DELETE")
        attempt = 0
        while True:
            try:
                response = await self._http.request(
                    method,
                    self.base_url + path,
                    json=json,
                    headers={**self._headers, **headers} if headers else self._headers,
                    timeout=timeout if timeout is not None else httpx.Timeout(self.timeout),
                )
            except httpx.TransportError as exc:
                if attempt >= self.retries or not resend_after_error(exc, idempotent=idempotent):
                    raise DaemonConnectionError(f"{method} {path}: {exc}") from exc
                retry_after = None
            else:
                if response.status_code < 400:
                    return response
                error = _error_of(response)
                if attempt >= self.retries or not resend_after_status(
                    error.status, error.body, idempotent=idempotent
                ):
                    raise error
                retry_after = error.retry_after
            attempt += 1
            await asyncio.sleep(retry_delay(attempt, retry_after))


def _error_of(response: httpx.Response) -> DaemonHTTPError:
    error = http_error(response.status_code, _json_or_none(response))
    error.retry_after = response.headers.get("retry-after")
    return error


def _json_or_none(response: httpx.Response) -> Any:
    try:
        return response.json()
    except ValueError:
        return None


def _without_none(**values: Any) -> dict[str, Any]:
    return {k: v for k, v in values.items() if v is not None}
