from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import pytest

from cairn.llm.types import ToolDeclaration
from cairn.tools.base import ToolContext
from cairn.tools.read_file import ReadFileTool
from cairn.tools.registry import ToolRegistry, default_registry

BUILT_IN = [
    "read_file",
    "write_file",
    "edit",
    "list_directory",
    "glob",
    "grep_search",
    "run_shell_command",
    "todo_write",
    "ask_user_question",
]


def test_default_registry_holds_every_built_in_tool() -> None:
    assert default_registry().names() == BUILT_IN


def test_declarations_give_each_tool_name_description_and_schema() -> None:
    declarations = default_registry().declarations()

    assert [d.name for d in declarations] == BUILT_IN
    read = declarations[0]
    assert isinstance(read, ToolDeclaration)
    assert read.description
    assert read.parameters["type"] == "object"
    assert read.parameters["required"] == ["file_path"]


@pytest.mark.parametrize("name", BUILT_IN)
def test_every_schema_requires_only_declared_properties(name: str) -> None:
    tool = default_registry().get(name)

    assert tool is not None
    schema: Mapping[str, Any] = tool.parameters
    assert set(schema["required"]) <= set(schema["properties"])


def test_get_returns_the_tool_or_none() -> None:
    registry = default_registry()

    tool = registry.get("read_file")
    assert tool is not None
    assert tool.name == "read_file"
    assert registry.get("Read") is None


def test_registering_a_second_tool_with_the_same_name_fails() -> None:
    registry = ToolRegistry([ReadFileTool()])

    with pytest.raises(ValueError, match="already registered"):
        registry.register(ReadFileTool())


def test_subset_keeps_registry_order_and_ignores_unknown_names() -> None:
    subset = default_registry().subset(["write_file", "read_file", "no_such_tool"])

    assert subset.names() == ["read_file", "write_file"]


def test_unknown_tool_message_suggests_close_names() -> None:
    message = default_registry().unknown_tool_message("read_files")

    assert message == (
        'Tool "read_files" not found in registry. Tools must use the exact names that are '
        'registered. Did you mean "read_file"?'
    )


def test_unknown_tool_message_maps_familiar_aliases() -> None:
    message = default_registry().unknown_tool_message("Bash")

    assert message.endswith('Did you mean "run_shell_command"?')


def test_unknown_tool_message_offers_at_most_three_suggestions() -> None:
    message = default_registry().unknown_tool_message("file")

    assert 'Did you mean one of: "' in message
    assert message.count('", "') <= 2


def test_unknown_tool_message_without_a_close_name_has_no_suggestion() -> None:
    message = default_registry().unknown_tool_message("launch_rockets")

    assert message == (
        'Tool "launch_rockets" not found in registry. Tools must use the exact names that '
        "are registered."
    )


async def test_registered_tools_run_through_the_protocol(ctx: ToolContext) -> None:
    tool = default_registry().get("todo_write")
    assert tool is not None

    result = await tool.execute({"todos": []}, ctx)

    assert result.output == "Todo list cleared."
