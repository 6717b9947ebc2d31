"""``DaemonSessionClient``: one daemon session, with an event cursor that only moves forward."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncGenerator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cairn.sdk.types import DaemonEvent, ModelList, PromptAdmission

if TYPE_CHECKING:
    from cairn.sdk.client import DaemonClient, Prompt

__all__ = ["DaemonSessionClient"]


class DaemonSessionClient:
    """A session on a :class:`~cairn.sdk.DaemonClient`.

    :meth:`events` resumes after the last event it yielded, so iterating again (or after a
    disconnect) continues where the previous iteration stopped; an event is counted as seen
    once it is handed to the caller.
    """

    def __init__(self, client: DaemonClient, session_id: str, *, last_event_id: int = 0) -> None:
        self.client = client
        self.session_id = session_id
        self.last_event_id = last_event_id

    @classmethod
    async def create(
        cls,
        client: DaemonClient,
        *,
        session_id: str | None = None,
        approval_mode: str | None = None,
        mcp_servers: Sequence[Mapping[str, Any]] | None = None,
    ) -> DaemonSessionClient:
        info = await client.create_session(
            session_id=session_id, approval_mode=approval_mode, mcp_servers=mcp_servers
        )
        return cls(client, info.session_id, last_event_id=0)

    @classmethod
    async def load(
        cls, client: DaemonClient, session_id: str, *, approval_mode: str | None = None
    ) -> DaemonSessionClient:
        """Resume a recorded session; :meth:`events` starts with its replayed conversation."""
        info = await client.load_session(session_id, approval_mode=approval_mode)
        return cls(client, info.session_id, last_event_id=0)

    async def prompt(
        self, prompt: Prompt, *, idempotency_key: str | None = None
    ) -> PromptAdmission:
        return await self.client.prompt(self.session_id, prompt, idempotency_key=idempotency_key)

    async def prompt_and_wait(self, prompt: Prompt) -> str:
        """Run a prompt; the turn's final text (raises :class:`~cairn.sdk.TurnError`)."""
        admission = await self.client.prompt(self.session_id, prompt)
        event = await self.client.wait_for_turn(self.session_id, admission)
        if event.id is not None:
            self.last_event_id = max(self.last_event_id, event.id)
        return event.final_text

    async def events(self, *, reconnect: bool = True) -> AsyncGenerator[DaemonEvent, None]:
        stream = self.client.events(
            self.session_id, last_event_id=self.last_event_id, reconnect=reconnect
        )
        async with contextlib.aclosing(stream):
            async for event in stream:
                if event.id is not None:  # handed out counts as seen (a break ends the loop here)
                    self.last_event_id = max(self.last_event_id, event.id)
                yield event

    async def status(self) -> dict[str, Any]:
        return await self.client.session_status(self.session_id)

    async def cancel(self) -> None:
        await self.client.cancel(self.session_id)

    async def models(self) -> ModelList:
        return await self.client.list_models(self.session_id)

    async def set_model(self, model_id: str) -> dict[str, Any]:
        return await self.client.set_model(self.session_id, model_id)

    async def respond_permission(
        self, request_id: str, option_id: str | None = None, *, answers: Sequence[str] | None = None
    ) -> bool:
        return await self.client.respond_permission(
            self.session_id, request_id, option_id, answers=answers
        )

    async def recap(self, *, timeout: float | None = None) -> str | None:
        return await self.client.recap_session(self.session_id, timeout=timeout)

    async def context(self) -> dict[str, Any]:
        return await self.client.session_context(self.session_id)

    async def close(self) -> None:
        await self.client.close_session(self.session_id)
