"""The terminal UI as the session's :class:`~cairn.vocabulary.Frontend`: modal dialogs."""

from __future__ import annotations

import asyncio
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.tools.base import Question
from cairn.ui.dialogs import PermissionScreen, QuestionScreen
from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest

if TYPE_CHECKING:
    from textual.app import App
    from textual.screen import ModalScreen

__all__ = ["TuiFrontend"]

_T = TypeVar("_T")


class TuiFrontend:
    """Approvals and questions are asked in modal dialogs; the turn waits for the answer."""

    interactive = True

    def __init__(self, app: App[Any], cwd: Path | None = None) -> None:
        self.app = app
        self.cwd = cwd  # paths under it are shown relative to it

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        outcome = await self._ask(PermissionScreen(request, self.cwd))
        return outcome if outcome is not None else "cancelled"

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        answers: list[str] = []
        for index, question in enumerate(questions, 1):
            position = f"{index}/{len(questions)}" if len(questions) > 1 else ""
            answer = await self._ask(QuestionScreen(question, position))
            if answer is None:
                return None
            answers.append(answer)
        return answers

    async def _ask(self, screen: ModalScreen[_T]) -> _T | None:
        """Show ``screen`` and wait for its result; a cancelled turn closes it."""
        answer: asyncio.Future[_T | None] = asyncio.get_running_loop().create_future()
        dismissed = False

        def done(result: _T | None) -> None:
            nonlocal dismissed
            dismissed = True
            if not answer.done():
                answer.set_result(result)

        await self.app.push_screen(screen, callback=done)
        try:
            return await answer
        finally:
            # Cancelling the turn also cancels ``answer``: close the dialog nobody answered.
            if not dismissed and screen.is_active:
                screen.dismiss(None)
