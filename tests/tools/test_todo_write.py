from __future__ import annotations

from typing import Any

import pytest

from cairn.tools.base import TodoItem, ToolContext
from cairn.tools.todo_write import TodoWriteTool

tool = TodoWriteTool()


async def test_returns_the_todos_and_a_short_summary(ctx: ToolContext) -> None:
    todos = [
        {"id": "1", "content": "Read the code", "status": "completed"},
        {"id": "2", "content": "Write the fix", "status": "in_progress"},
        {"id": "3", "content": "Run the tests", "status": "pending"},
    ]

    result = await tool.execute({"todos": todos}, ctx)

    assert result.todos == [
        TodoItem("1", "Read the code", "completed"),
        TodoItem("2", "Write the fix", "in_progress"),
        TodoItem("3", "Run the tests", "pending"),
    ]
    assert result.output == (
        "Todo list updated (3 items: 1 pending, 1 in progress, 1 completed). "
        "In progress: Write the fix. Keep it up to date as you work."
    )


async def test_empty_list_clears_the_todos(ctx: ToolContext) -> None:
    result = await tool.execute({"todos": []}, ctx)

    assert result.todos == []
    assert result.output == "Todo list cleared."


async def test_numeric_ids_are_accepted_as_text(ctx: ToolContext) -> None:
    result = await tool.execute({"todos": [{"id": 7, "content": "x", "status": "pending"}]}, ctx)

    assert result.todos == [TodoItem("7", "x", "pending")]


@pytest.mark.parametrize(
    ("todos", "message"),
    [
        (None, "`todos` must be a list"),
        ("do things", "`todos` must be a list"),
        (["do things"], "todos[0] must be an object"),
        ([{"content": "x", "status": "pending"}], "todos[0].id must be a non-empty string"),
        ([{"id": "1", "content": " ", "status": "pending"}], "todos[0].content must be"),
        ([{"id": "1", "content": "x", "status": "done"}], "todos[0].status is 'done'"),
        (
            [
                {"id": "1", "content": "x", "status": "pending"},
                {"id": "1", "content": "y", "status": "pending"},
            ],
            "todo ids must be unique; repeated: ['1']",
        ),
    ],
)
async def test_invalid_todos_are_refused_with_the_reason(
    ctx: ToolContext, todos: Any, message: str
) -> None:
    result = await tool.execute({"todos": todos}, ctx)

    assert result.error is not None
    assert message in result.error
    assert result.todos is None


def test_is_a_think_tool_without_confirmation(ctx: ToolContext) -> None:
    assert tool.kind == "think"
    assert tool.confirmation({"todos": []}, ctx) is None
