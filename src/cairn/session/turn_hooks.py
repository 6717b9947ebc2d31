"""Turn hooks: code that follows a session's turns without living in a front end.

A part of cairn that must act at fixed points of every turn (an extension that audits changes,
a hook of its own before the workspace changes, ...) adds a :class:`TurnHook` with
``session.add_turn_hook(hook)``; every front end's turns then pass through it. A hook that
raises is logged and shown as a warning: it never fails the turn.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.session.session import PromptRequest, Session
    from cairn.vocabulary.events import TurnResult

__all__ = ["TurnHook"]


class TurnHook:
    """Override the points you need; the others do nothing."""

    async def turn_started(self, session: Session, request: PromptRequest) -> None:
        """A turn began (any kind: see ``request.fresh``), before anything reached the model."""

    async def before_change(self, session: Session) -> None:
        """A call that may change the workspace (an edit, a command that is not read-only) was
        approved and is about to run; after the session's own checkpoint, if it takes one."""

    async def turn_ended(self, session: Session, result: TurnResult) -> None:
        """The turn is over (it may have been cancelled or failed: see ``result``)."""
