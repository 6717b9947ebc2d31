"""What the code that runs a turn needs from the person behind it: approvals and answers.

A front end implements :class:`Frontend`; tools see only the :class:`UserInteraction` part.
Headless runs and background agents use :class:`NonInteractive`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal, Protocol, TypeAlias

from cairn.values import Value
from cairn.vocabulary.tool_calls import ConfirmationKind, FileDiff, ToolKind

__all__ = [
    "Frontend",
    "NonInteractive",
    "PermissionOutcome",
    "PermissionRequest",
    "Question",
    "UserInteraction",
]

PermissionOutcome: TypeAlias = Literal["allow_once", "allow_always", "reject", "cancelled"]


class Question(Value):
    """One question of ``ask_user_question``: a prompt and 2-4 choices."""

    question: str
    options: Sequence[str]
    header: str = ""
    multi_select: bool = False
    option_descriptions: Sequence[str] = ()  # parallel to ``options``; may be empty


class PermissionRequest(Value):
    call_id: str
    tool_name: str
    title: str
    kind: ToolKind
    confirmation: ConfirmationKind
    args: Mapping[str, Any]
    diff: FileDiff | None = None
    strict: Literal["settings", "unresolved"] | None = None  # "always" cannot apply to it
    allow_always: bool = True  # False: the session may not remember an "always" answer
    programs: tuple[str, ...] = ()  # a shell command's programs: what "always" would allow


class UserInteraction(Protocol):
    """How a front end asks its user. Headless and background agents answer without a user."""

    @property
    def interactive(self) -> bool: ...

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        """The chosen option (or free text) per question; ``None`` when nobody can answer."""
        ...


class Frontend(UserInteraction, Protocol):
    """A :class:`UserInteraction` that can also approve tool calls."""

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome: ...


class NonInteractive:
    """No user: approvals are denied by policy before they get here; questions go unanswered."""

    interactive = False

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        return "reject"

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return None
