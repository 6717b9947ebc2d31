"""What a session needs from the front end that drives it: approvals and answers from a user."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeAlias

from cairn.tools.base import ConfirmationKind, FileDiff, Question, ToolKind

__all__ = ["Frontend", "NonInteractive", "PermissionOutcome", "PermissionRequest"]

PermissionOutcome: TypeAlias = Literal["allow_once", "allow_always", "reject", "cancelled"]


@dataclass(frozen=True)
class PermissionRequest:
    call_id: str
    tool_name: str
    title: str
    kind: ToolKind
    confirmation: ConfirmationKind
    args: Mapping[str, Any]
    diff: FileDiff | None = None


class Frontend(Protocol):
    @property
    def interactive(self) -> bool: ...

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome: ...

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None: ...


class NonInteractive:
    """No user: approvals are denied by policy before they get here; questions go unanswered."""

    interactive = False

    async def request_permission(self, request: PermissionRequest) -> PermissionOutcome:
        return "reject"

    async def ask_user(self, questions: Sequence[Question]) -> list[str] | None:
        return None
