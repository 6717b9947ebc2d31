"""One ACP session: a cairn :class:`Session`, its ``session/update`` stream and its prompt order.

A newer prompt supersedes the running one, as in the reference: the running turn is cancelled
(its ``session/prompt`` answers ``cancelled``), then the newer one runs. Prompts that were still
waiting for their turn when an even newer prompt or a ``session/cancel`` arrived end as
``cancelled`` without running. Turns never overlap: the session's history stays consistent.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from cairn.acp.updates import update_model
from cairn.debug_log import get_logger
from cairn.recording.reader import ASK_USER_TOOL
from cairn.session.updates import UpdateMapper, session_config_options
from cairn.vocabulary.events import SessionEvent, ToolCallStart, TurnResult

if TYPE_CHECKING:
    from acp.interfaces import Client

    from cairn.recording.replay import ReplayItem
    from cairn.session.runtime import Runtime
    from cairn.session.session import PromptRequest, Session

__all__ = ["SUPERSEDED_REASON", "SessionChannel"]

SUPERSEDED_REASON = "new_prompt"  # abort reason of a turn a newer prompt replaced
_log = get_logger("ACP")


class SessionChannel:
    def __init__(self, session: Session, runtime: Runtime, client: Client) -> None:
        self.session = session
        self.runtime = runtime
        self.id = session.id
        self._client = client
        self._gate = asyncio.Lock()  # one turn at a time, in arrival order
        self._generation = 0  # bumped by every prompt and cancel; a waiting prompt checks it
        self._background: set[asyncio.Task[object]] = set()
        self.question_call_id: str | None = None  # the ask_user_question call being answered
        self._send_failed = False
        self._updates = UpdateMapper(
            session.registry, config=lambda: session_config_options(session)
        )
        self._unlisten = session.listen(self.sink)  # what happens outside a turn, too

    # ----- turns -----

    async def run(self, request: PromptRequest) -> TurnResult | None:
        """Run one turn after superseding the running one; ``None`` if superseded first."""
        self._generation += 1
        generation = self._generation
        self.session.cancel(SUPERSEDED_REASON)
        async with self._gate:
            if generation != self._generation:
                return None
            return await self.session.prompt(request, self.sink)

    def cancel(self) -> None:
        """``session/cancel``: stop the running turn and every prompt waiting for its turn."""
        self._generation += 1
        self.session.cancel("user_cancel")

    def run_in_background(self, request: PromptRequest, *, name: str) -> None:
        """A turn no ``session/prompt`` waits for (a restored question after ``session/load``)."""

        async def turn() -> None:
            result = await self.run(request)
            stop = result.stop_reason if result is not None else "superseded"
            _log.info(f"{name} ended: {stop}")

        task: asyncio.Task[object] = asyncio.ensure_future(turn())
        task.set_name(f"cairn-acp-{name}")
        self._background.add(task)
        task.add_done_callback(self._background.discard)

    async def close(self) -> None:
        self._unlisten()
        for task in list(self._background):
            task.cancel()
        await self.session.close()

    # ----- updates -----

    async def sink(self, event: SessionEvent) -> None:
        """The session's event sink: each event becomes its ``session/update`` notifications."""
        if isinstance(event, ToolCallStart) and event.name == ASK_USER_TOOL:
            self.question_call_id = event.call_id
        for payload in self._updates.event(event):
            await self.send(payload)

    async def replay(self, items: Iterable[ReplayItem]) -> None:
        """A loaded session's conversation, as the person saw it."""
        for payload in self._updates.replay(items):
            await self.send(payload)
        await self.sink(self.session.client.context_used())  # how full it is, as live

    async def send(self, payload: Mapping[str, Any]) -> None:
        try:
            await self._client.session_update(session_id=self.id, update=update_model(payload))
        except ConnectionError as exc:  # the client went away: the turn still ends cleanly
            if not self._send_failed:
                self._send_failed = True
                _log.warning(f"session/update not delivered: {exc}")
