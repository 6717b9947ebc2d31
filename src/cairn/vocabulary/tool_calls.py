"""What a tool call is, as every layer talks about it: its kind, its diff, its places, a plan.

Tools produce these, the scheduler reports them in session events, front ends render them.
"""

from __future__ import annotations

from enum import StrEnum
from pathlib import Path
from typing import Literal, TypeAlias

from cairn.values import Value

__all__ = ["ConfirmationKind", "FileDiff", "Location", "SubagentReport", "TodoItem", "ToolKind"]


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


class SubagentReport(Value):
    """What the subagent of an ``agent`` call did, as people saw it under the call: its tool
    calls (title and final status, in order) and its answers. Recorded, so a replay shows it."""

    agent_type: str
    steps: tuple[tuple[str, str], ...] = ()  # (title, status)
    answers: tuple[str, ...] = ()

    def to_record(self) -> dict[str, object]:
        return {
            "agentType": self.agent_type,
            "steps": [list(step) for step in self.steps],
            "answers": list(self.answers),
        }

    @classmethod
    def from_record(cls, raw: object) -> SubagentReport | None:
        """The report a recording holds, or ``None`` when it is not one."""
        if not isinstance(raw, dict) or not isinstance(raw.get("agentType"), str):
            return None
        steps = raw.get("steps")
        answers = raw.get("answers")
        return cls(
            raw["agentType"],
            tuple(
                (step[0], step[1])
                for step in (steps if isinstance(steps, list) else [])
                if isinstance(step, list)
                and len(step) == 2
                and all(isinstance(part, str) for part in step)
            ),
            tuple(a for a in (answers if isinstance(answers, list) else []) if isinstance(a, str)),
        )


class TodoItem(Value):
    id: str
    content: str
    status: Literal["pending", "in_progress", "completed", "cancelled"]
