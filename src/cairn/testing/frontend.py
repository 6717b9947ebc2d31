"""A scripted person at the front end: the :class:`~cairn.vocabulary.interaction.Frontend` double.

:class:`ScriptedFrontend` answers approvals and ``ask_user_question`` questions from scripts, in
order, and records everything it was asked, so a test (yours or cairn's) can drive a real
:class:`~cairn.session.session.Session` without a terminal, an editor or an HTTP client::

    user = ScriptedFrontend(permissions=["allow_once", "reject"], answers=[["Postgres"]])
    session = runtime.new_session(frontend=user)
    ...
    assert [r.tool_name for r in user.permission_requests] == ["edit", "run_shell_command"]

An answer may be :data:`NEVER`: that request is never answered (the turn waits until it is
cancelled), as when a person walks away. When a script runs out, ``default_permission`` and
``default_answer`` answer; ``None`` as the default refuses to guess and fails the test with a
message naming the unexpected request.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Final, Literal, TypeAlias, TypeVar

from cairn.vocabulary.interaction import PermissionOutcome, PermissionRequest, Question

__all__ = ["NEVER", "Never", "ScriptedFrontend", "UnexpectedRequest"]


@dataclass(frozen=True)
class Never:
    """An answer that never comes (see :data:`NEVER`)."""


NEVER: Final = Never()
PermissionAnswer: TypeAlias = PermissionOutcome | Never
QuestionAnswer: TypeAlias = Sequence[str] | None  # None: nobody answers ("no user")
_T = TypeVar("_T")


class UnexpectedRequest(AssertionError):
    """The front end was asked something its script did not expect."""


class ScriptedFrontend:
    """Answers from scripts, records what it was asked (see the module docstring)."""

    def __init__(
        self,
        *,
        permissions: Iterable[PermissionAnswer] = (),
        answers: Iterable[QuestionAnswer | Never] = (),
        default_permission: PermissionOutcome | None = "allow_once",
        default_answer: Sequence[str] | Literal["first"] | None = "first",
        interactive: bool = True,
    ) -> None:
        """``default_answer="first"`` picks each question's first option."""
        self._permissions: deque[PermissionAnswer] = deque(permissions)
        self._answers: deque[QuestionAnswer | Never] = deque(answers)
        self._default_permission = default_permission
        self._default_answer = default_answer
        self._interactive = interactive
        self.permission_requests: list[PermissionRequest] = []
        self.questions: list[list[Question]] = []  # each ask: the questions asked together
        self._asked: asyncio.Condition | None = None

    @property
    def interactive(self) -> bool:
        return self._interactive

    @property
    def asked(self) -> int:
        """How many times it was asked anything (approvals and questions)."""
        return len(self.permission_requests) + len(self.questions)

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        self.permission_requests.append(request)
        default = self._default_permission
        return await self._next(
            self._permissions,
            None if default is None else lambda: default,
            f"unexpected permission request: {request.title}",
        )

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        self.questions.append(list(questions))
        answer = await self._next(
            self._answers, self._default_for(questions), f"unexpected question: {questions}"
        )
        return None if answer is None else list(answer)

    def _default_for(self, questions: Sequence[Question]) -> Callable[[], QuestionAnswer] | None:
        default = self._default_answer
        if default == "first":
            return lambda: [q.options[0] if q.options else "" for q in questions]
        return None if default is None else lambda: default

    async def _next(
        self, script: deque[_T | Never], default: Callable[[], _T] | None, unexpected: str
    ) -> _T:
        await self._notify()
        if script:
            answer = script.popleft()
        elif default is not None:
            answer = default()
        else:
            raise UnexpectedRequest(unexpected)
        if isinstance(answer, Never):
            await asyncio.Event().wait()  # never answered: until the turn is cancelled
            raise AssertionError("unreachable")
        return answer

    async def wait_until_asked(self, count: int = 1, *, timeout: float = 10.0) -> None:
        """Wait until it was asked ``count`` things in all (``TimeoutError`` after ``timeout``)."""
        condition = self._condition()
        async with asyncio.timeout(timeout), condition:
            await condition.wait_for(lambda: self.asked >= count)

    async def _notify(self) -> None:
        condition = self._condition()
        async with condition:
            condition.notify_all()

    def _condition(self) -> asyncio.Condition:
        if self._asked is None:  # made on first use, inside the test's event loop
            self._asked = asyncio.Condition()
        return self._asked
