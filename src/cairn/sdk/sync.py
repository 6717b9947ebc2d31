"""Blocking versions of the SDK clients, for scripts that do not run an event loop.

Each :class:`SyncDaemonClient` runs the async client on its own event loop in a background
thread, so the two behave identically (errors, timeouts, reconnects).
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator, Coroutine, Iterator, Mapping, Sequence
from typing import Any, TypeVar

from cairn.sdk.client import DEFAULT_TIMEOUT, DaemonClient, Prompt
from cairn.sdk.retries import RETRIES
from cairn.sdk.session import DaemonSessionClient
from cairn.sdk.types import (
    Capabilities,
    DaemonEvent,
    ModelList,
    PromptAdmission,
    SessionInfo,
)

__all__ = ["SyncDaemonClient", "SyncDaemonSessionClient"]

_T = TypeVar("_T")


class _LoopThread:
    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(
            target=self.loop.run_forever, name="cairn-sdk-loop", daemon=True
        )
        self._thread.start()

    def run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result()

    def iterate(self, stream: AsyncIterator[_T]) -> Iterator[_T]:
        try:
            while True:
                try:
                    yield self.run(_next(stream))
                except StopAsyncIteration:
                    return
        finally:
            aclose = getattr(stream, "aclose", None)
            if aclose is not None:
                self.run(aclose())

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join()
        self.loop.close()


async def _next(stream: AsyncIterator[_T]) -> _T:
    return await stream.__anext__()


class SyncDaemonClient(contextlib.AbstractContextManager["SyncDaemonClient"]):
    """:class:`~cairn.sdk.DaemonClient` with blocking methods. Close it (or use ``with``)."""

    def __init__(
        self,
        base_url: str,
        token: str | None = None,
        timeout: float | None = DEFAULT_TIMEOUT,
        *,
        client_id: str | None = None,
        headers: Mapping[str, str] | None = None,
        retries: int = RETRIES,
    ) -> None:
        self._loop = _LoopThread()
        self._client = self._loop.run(
            _make_client(base_url, token, timeout, client_id, dict(headers or {}), retries)
        )

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        self._loop.run(self._client.aclose())
        self._loop.close()

    def session(self, session_id: str, *, last_event_id: int = 0) -> SyncDaemonSessionClient:
        return SyncDaemonSessionClient(
            self, DaemonSessionClient(self._client, session_id, last_event_id=last_event_id)
        )

    def health(self) -> dict[str, Any]:
        return self._loop.run(self._client.health())

    def capabilities(self, *, refresh: bool = False) -> Capabilities:
        return self._loop.run(self._client.capabilities(refresh=refresh))

    def create_session(
        self, *, session_id: str | None = None, approval_mode: str | None = None
    ) -> SessionInfo:
        return self._loop.run(
            self._client.create_session(session_id=session_id, approval_mode=approval_mode)
        )

    def load_session(self, session_id: str, *, approval_mode: str | None = None) -> SessionInfo:
        return self._loop.run(self._client.load_session(session_id, approval_mode=approval_mode))

    def list_sessions(self) -> list[dict[str, Any]]:
        return self._loop.run(self._client.list_sessions())

    def session_status(self, session_id: str) -> dict[str, Any]:
        return self._loop.run(self._client.session_status(session_id))

    def prompt(
        self, session_id: str, prompt: Prompt, *, idempotency_key: str | None = None
    ) -> PromptAdmission:
        return self._loop.run(
            self._client.prompt(session_id, prompt, idempotency_key=idempotency_key)
        )

    def prompt_and_wait(self, session_id: str, prompt: Prompt) -> str:
        return self._loop.run(self._client.prompt_and_wait(session_id, prompt))

    def events(
        self, session_id: str, *, last_event_id: int | None = None, reconnect: bool = True
    ) -> Iterator[DaemonEvent]:
        return self._loop.iterate(
            self._client.events(session_id, last_event_id=last_event_id, reconnect=reconnect)
        )

    def cancel(self, session_id: str) -> None:
        self._loop.run(self._client.cancel(session_id))

    def respond_permission(
        self,
        session_id: str,
        request_id: str,
        option_id: str | None = None,
        *,
        answers: Sequence[str] | None = None,
    ) -> bool:
        return self._loop.run(
            self._client.respond_permission(session_id, request_id, option_id, answers=answers)
        )

    def set_approval_mode(self, session_id: str, mode: str) -> dict[str, Any]:
        return self._loop.run(self._client.set_approval_mode(session_id, mode))

    def list_models(self, session_id: str) -> ModelList:
        return self._loop.run(self._client.list_models(session_id))

    def set_model(self, session_id: str, model_id: str) -> dict[str, Any]:
        return self._loop.run(self._client.set_model(session_id, model_id))

    def recap_session(self, session_id: str, *, timeout: float | None = None) -> str | None:
        return self._loop.run(self._client.recap_session(session_id, timeout=timeout))

    def session_context(self, session_id: str) -> dict[str, Any]:
        return self._loop.run(self._client.session_context(session_id))

    def close_session(self, session_id: str) -> None:
        self._loop.run(self._client.close_session(session_id))


class SyncDaemonSessionClient:
    """:class:`~cairn.sdk.DaemonSessionClient` with blocking methods."""

    def __init__(self, owner: SyncDaemonClient, session: DaemonSessionClient) -> None:
        self._owner = owner
        self._session = session

    @property
    def session_id(self) -> str:
        return self._session.session_id

    @property
    def last_event_id(self) -> int:
        return self._session.last_event_id

    @classmethod
    def create(
        cls, owner: SyncDaemonClient, *, approval_mode: str | None = None
    ) -> SyncDaemonSessionClient:
        info = owner.create_session(approval_mode=approval_mode)
        return owner.session(info.session_id)

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        return self._owner._loop.run(coro)

    def prompt(self, prompt: Prompt) -> PromptAdmission:
        return self._run(self._session.prompt(prompt))

    def prompt_and_wait(self, prompt: Prompt) -> str:
        return self._run(self._session.prompt_and_wait(prompt))

    def events(self, *, reconnect: bool = True) -> Iterator[DaemonEvent]:
        return self._owner._loop.iterate(self._session.events(reconnect=reconnect))

    def status(self) -> dict[str, Any]:
        return self._run(self._session.status())

    def cancel(self) -> None:
        self._run(self._session.cancel())

    def models(self) -> ModelList:
        return self._run(self._session.models())

    def set_model(self, model_id: str) -> dict[str, Any]:
        return self._run(self._session.set_model(model_id))

    def respond_permission(
        self, request_id: str, option_id: str | None = None, *, answers: Sequence[str] | None = None
    ) -> bool:
        return self._run(self._session.respond_permission(request_id, option_id, answers=answers))

    def recap(self, *, timeout: float | None = None) -> str | None:
        return self._run(self._session.recap(timeout=timeout))

    def context(self) -> dict[str, Any]:
        return self._run(self._session.context())

    def close(self) -> None:
        self._run(self._session.close())


async def _make_client(
    base_url: str,
    token: str | None,
    timeout: float | None,
    client_id: str | None,
    headers: dict[str, str],
    retries: int,
) -> DaemonClient:
    """Built on the loop thread, so the HTTP connection pool belongs to that loop."""
    return DaemonClient(
        base_url, token, timeout, client_id=client_id, headers=headers, retries=retries
    )
