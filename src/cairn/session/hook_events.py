"""The hook events of a session's life, in every front end: ``SessionStart``, ``SessionEnd``,
``PreCompact`` and the idle ``Notification``.

- ``SessionStart`` runs when the session is made (``startup``, or ``resume`` for a loaded one),
  after ``/clear`` (``clear``) and after the conversation was compressed (``compact``). The
  first turn waits for it. What it adds for the model goes with the next prompt; its messages
  are shown when that turn starts.
- ``SessionEnd`` runs when the session closes (``other``) and on ``/clear`` (``clear``); it
  cannot stop anything.
- ``PreCompact`` runs before the conversation is compressed (``manual`` for ``/compress``,
  ``auto``); a block keeps the conversation as it is.
- ``Notification`` with ``idle_prompt`` runs once a finished turn has waited
  ``notifications.idleSeconds`` for the next prompt (``permission_prompt`` is the tool
  scheduler's, when it asks).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import TYPE_CHECKING, Protocol

from cairn.debug_log import get_logger
from cairn.session.turn_hooks import TurnHook
from cairn.vocabulary.events import Notice

if TYPE_CHECKING:
    from cairn.agent.client import AgentClient
    from cairn.config.settings import Settings
    from cairn.hooks.outcome import HookOutcome
    from cairn.hooks.runner import HookRunner
    from cairn.session.session import PromptRequest, Session
    from cairn.session.turn import Carryover
    from cairn.vocabulary.events import TurnResult

    class ShellExports(Protocol):
        def export(self, change: Mapping[str, str | None]) -> None:
            """Shell commands get ``change`` (None: unset) from now on, instead of the last one."""
            ...

    class HookedSession(Protocol):
        """What the lifecycle hooks use of their session."""

        settings: Settings
        client: AgentClient
        carry: Carryover  # what the hooks say goes to the next turn

        @property
        def workspace(self) -> ShellExports:
            """Where CLAUDE_ENV_FILE's exports go."""
            ...

        @property
        def hooks(self) -> HookRunner:
            """Read each time: a settings change replaces the runner."""
            ...


__all__ = ["IDLE_MESSAGE", "SessionHookEvents"]

IDLE_MESSAGE = "cairn is waiting for your input"
_log = get_logger("HOOKS")


class SessionHookEvents(TurnHook):
    """Runs one session's lifecycle hooks (see the module docstring). The session registers
    :meth:`pre_compact` and :meth:`compacted` with its agent client."""

    def __init__(self, session: HookedSession) -> None:
        self.session = session
        self._starting: asyncio.Future[None] | None = None
        self._pending_source: str | None = None  # made outside an event loop: run at turn 1
        self._idle: asyncio.TimerHandle | None = None
        self._running: set[asyncio.Future[HookOutcome]] = set()

    @property
    def _hooks(self) -> HookRunner:
        return self.session.hooks  # read each time: a settings change replaces the runner

    # ----- SessionStart / SessionEnd -----

    def start(self, source: str) -> None:
        """Begin the ``SessionStart`` hooks (in the background when an event loop runs)."""
        if not self._hooks.has("SessionStart"):
            return
        try:
            asyncio.get_running_loop()
        except RuntimeError:
            self._pending_source = source
            return
        self._starting = asyncio.ensure_future(self._session_start(source))

    async def _session_start(self, source: str) -> None:
        try:
            model = self.session.client.model
            outcome = await self._hooks.session_start(source=source, model=model)
        except Exception as exc:  # a hook is never a reason for a session to fail
            _log.warning(f"SessionStart hooks failed: {exc!r}")
            return
        self._keep(outcome, "SessionStart")
        if outcome.additional_context:
            self.session.carry.add_context(outcome.additional_context)
        if outcome.environment is not None:  # CLAUDE_ENV_FILE: for the shell commands
            self.session.workspace.export(outcome.environment)

    async def end(self, reason: str) -> None:
        """The ``SessionEnd`` hooks, waited for (each within its own timeout)."""
        self._cancel_idle()
        if not self._hooks.has("SessionEnd"):
            return
        try:
            outcome = await self._hooks.session_end(reason=reason)
        except Exception as exc:
            _log.warning(f"SessionEnd hooks failed: {exc!r}")
            return
        self._keep(outcome, "SessionEnd")

    async def cleared(self) -> None:
        """``/clear``: the old conversation ends, a new one starts."""
        await self.end("clear")
        self.start("clear")
        await self._started()

    # ----- PreCompact -----

    async def pre_compact(self, trigger: str) -> str | None:
        """A reason not to compress the conversation (a PreCompact hook blocked), or None."""
        if not self._hooks.has("PreCompact"):
            return None
        outcome = await self._hooks.pre_compact(trigger=trigger)
        self._keep(outcome, "PreCompact")
        if outcome.blocked or outcome.stop:
            return outcome.reason or outcome.stop_reason or "No reason provided"
        return None

    async def compacted(self) -> None:
        """The conversation was compressed: SessionStart hooks run with ``compact``."""
        self.start("compact")
        await self._started()

    # ----- turns: the first waits for SessionStart; a finished one may go idle -----

    async def turn_started(self, session: Session, request: PromptRequest) -> None:
        self._cancel_idle()
        await self._started()
        background = self._hooks.take_background()  # what async hooks said since
        if background is not None:
            self._keep(background, "async")
            if background.additional_context:
                self.session.carry.add_context(background.additional_context)

    async def turn_ended(self, session: Session, result: TurnResult) -> None:
        seconds = session.settings.notifications.idle_seconds
        if seconds <= 0 or not self._hooks.has("Notification"):
            return
        loop = asyncio.get_running_loop()
        self._idle = loop.call_later(seconds, self._went_idle)

    def _went_idle(self) -> None:
        self._idle = None
        task = asyncio.ensure_future(
            self._hooks.notification(message=IDLE_MESSAGE, notification_type="idle_prompt")
        )
        self._running.add(task)
        task.add_done_callback(self._running.discard)

    def _cancel_idle(self) -> None:
        if self._idle is not None:
            self._idle.cancel()
            self._idle = None

    async def close(self) -> None:
        """The session closes: no idle notification any more, running ones finish."""
        self._cancel_idle()
        if self._starting is not None and not self._starting.done():
            self._starting.cancel()
        if self._running:
            await asyncio.gather(*self._running, return_exceptions=True)
        await self._hooks.close()  # async hooks still running are stopped

    # ----- shared -----

    async def _started(self) -> None:
        if self._pending_source is not None:
            source, self._pending_source = self._pending_source, None
            self._starting = asyncio.ensure_future(self._session_start(source))
        if self._starting is not None:
            starting, self._starting = self._starting, None
            await asyncio.gather(starting, return_exceptions=True)

    def _keep(self, outcome: HookOutcome, event: str) -> None:
        """What the hooks said for the user, shown when the next turn starts."""
        carry = self.session.carry
        for warning in outcome.warnings:
            carry.add_notice(Notice("warning", warning, "hook"))
        if outcome.system_message:
            carry.add_notice(Notice("info", outcome.system_message, "hook"))
        if outcome.blocked and outcome.reason and event in ("SessionStart", "SessionEnd"):
            carry.add_notice(Notice("warning", f"{event} hook: {outcome.reason}", "hook"))
