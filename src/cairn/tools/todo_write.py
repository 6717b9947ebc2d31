"""``todo_write``: replace the session's todo list. The list lives in the result, nowhere else."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from cairn.tools.base import TodoItem, ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.schema import object_schema, string_property
from cairn.vocabulary.tool_names import ToolName

__all__ = ["TODO_STATUSES", "TodoStatus", "TodoWriteTool", "parse_todos"]

TodoStatus: TypeAlias = Literal["pending", "in_progress", "completed", "cancelled"]
TODO_STATUSES: tuple[TodoStatus, ...] = ("pending", "in_progress", "completed", "cancelled")

_ITEM = object_schema(
    {
        "id": string_property("A stable id for the item."),
        "content": string_property("What to do."),
        "status": {"type": "string", "enum": list(TODO_STATUSES)},
    },
    required=["id", "content", "status"],
)
_PARAMETERS = object_schema(
    {
        "todos": {
            "type": "array",
            "description": "The complete, updated todo list (it replaces the previous one).",
            "items": _ITEM,
        }
    },
    required=["todos"],
)


class TodoWriteTool(BuiltinTool):
    name = ToolName.TODO_WRITE
    description = (
        "Create or update the todo list for the current task. Send the whole list each time. "
        "Use it for work with several steps; keep exactly one item in_progress while working "
        "and mark items completed as soon as they are done."
    )
    parameters = _PARAMETERS
    kind = ToolKind.THINK

    def title(self, args: Mapping[str, Any]) -> str:
        return "Update todos"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        todos = parse_todos(args.get("todos"))
        summary = _summary(todos)
        return ToolResult(output=summary, display=summary, todos=todos)


def parse_todos(value: Any) -> list[TodoItem]:
    """Validate the ``todos`` argument; raises :class:`ToolError` naming the bad item."""
    if not isinstance(value, list):
        raise ToolError("Invalid parameters: `todos` must be a list of {id, content, status}.")
    todos = [_parse_item(index, item) for index, item in enumerate(value)]
    duplicates = sorted(i for i, n in Counter(t.id for t in todos).items() if n > 1)
    if duplicates:
        raise ToolError(f"Invalid parameters: todo ids must be unique; repeated: {duplicates}.")
    return todos


def _parse_item(index: int, item: Any) -> TodoItem:
    where = f"todos[{index}]"
    if not isinstance(item, Mapping):
        raise ToolError(f"Invalid parameters: {where} must be an object {{id, content, status}}.")
    raw_id = item.get("id")
    if isinstance(raw_id, int) and not isinstance(raw_id, bool):
        raw_id = str(raw_id)
    if not isinstance(raw_id, str) or not raw_id.strip():
        raise ToolError(f"Invalid parameters: {where}.id must be a non-empty string.")
    content = item.get("content")
    if not isinstance(content, str) or not content.strip():
        raise ToolError(f"Invalid parameters: {where}.content must be a non-empty string.")
    raw_status = item.get("status")
    status = next((s for s in TODO_STATUSES if s == raw_status), None)
    if status is None:
        raise ToolError(
            f"Invalid parameters: {where}.status is {raw_status!r}; use one of "
            + ", ".join(TODO_STATUSES)
            + "."
        )
    return TodoItem(raw_id.strip(), content.strip(), status)


def _summary(todos: list[TodoItem]) -> str:
    if not todos:
        return "Todo list cleared."
    counts = Counter(t.status for t in todos)
    parts = [f"{counts[s]} {s.replace('_', ' ')}" for s in TODO_STATUSES if counts[s]]
    current = next((t.content for t in todos if t.status == "in_progress"), None)
    text = f"Todo list updated ({len(todos)} items: {', '.join(parts)})."
    if current:
        text += f" In progress: {current}."
    return text + " Keep it up to date as you work."
