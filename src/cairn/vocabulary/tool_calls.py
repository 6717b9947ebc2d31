"""What a tool call is, as every layer talks about it: its kind, its diff, its places, a plan.

Tools produce these, the scheduler reports them in session events, front ends render them.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal, TypeAlias

from cairn.values import Value

__all__ = ["ConfirmationKind", "FileDiff", "Location", "TodoItem", "ToolKind"]


class ToolKind(StrEnum):
    """What a tool does; front ends pick icons and ACP ``kind`` from it."""

    READ = "read"
    EDIT = "edit"
    DELETE = "delete"
    SEARCH = "search"
    EXECUTE = "execute"
    THINK = "think"
    FETCH = "fetch"
    OTHER = "other"


# How a call that needs approval is confirmed: an edit (auto-approved in auto-edit mode),
# a command (asks unless yolo), information only, or an MCP tool call that may change things
# (asks unless yolo; refused in plan mode even when a rule allows it).
ConfirmationKind: TypeAlias = Literal["edit", "exec", "info", "mcp"]


class Location(Value):
    path: Path
    line: int | None = None


class FileDiff(Value):
    path: Path
    old_text: str | None  # None: the file is new
    new_text: str


class TodoItem(Value):
    id: str
    content: str
    status: Literal["pending", "in_progress", "completed", "cancelled"]
