"""``edit``: replace exact text in a file (or create a file from an empty ``old_string``)."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.tools.arguments import optional_bool, require_str
from cairn.tools.base import (
    FileDiff,
    Location,
    ToolContext,
    ToolError,
    ToolResult,
)
from cairn.tools.builtin import FileChangeTool
from cairn.tools.files import display_path
from cairn.tools.schema import object_schema, string_property
from cairn.tools.write_file import read_existing_text, write_text
from cairn.values import Value
from cairn.vocabulary.tool_names import ToolName

__all__ = ["EditTool"]

_PARAMETERS = object_schema(
    {
        "file_path": string_property(
            "Path of the file to change, absolute or relative to the workspace."
        ),
        "old_string": string_property(
            "The exact text to replace, including whitespace and indentation. Include enough "
            "surrounding lines to match exactly one place. Empty to create a new file."
        ),
        "new_string": string_property("The text to put in its place."),
        "replace_all": {
            "type": "boolean",
            "description": "Replace every occurrence of old_string (default false).",
        },
    },
    required=["file_path", "old_string", "new_string"],
)


class _EditPlan(Value):
    diff: FileDiff
    replacements: int
    first_line: int  # 1-based line of the first change


class EditTool(FileChangeTool):
    name = ToolName.EDIT
    description = (
        "Replace exact text in a file. old_string must match the file exactly (whitespace "
        "and indentation included) and, unless replace_all is true, exactly once. An empty "
        "old_string with a path that does not exist creates the file with new_string."
    )
    parameters = _PARAMETERS
    verb = "Edit"

    async def _diff(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff:
        return (await _plan(args, ctx)).diff

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        plan = await _plan(args, ctx)
        path = plan.diff.path
        shown = display_path(path, ctx.workspace)
        await write_text(path, plan.diff.new_text, shown, ctx)
        if plan.diff.old_text is None:
            output = f"Created {shown}."
        else:
            times = "1 occurrence" if plan.replacements == 1 else f"{plan.replacements} occurrences"
            output = f"Edited {shown}: replaced {times}."
        return ToolResult(
            output=output, diff=plan.diff, locations=[Location(path, plan.first_line)]
        )


async def _plan(args: Mapping[str, Any], ctx: ToolContext) -> _EditPlan:
    path = ctx.resolve(require_str(args, "file_path"), write=True)
    old_string = require_str(args, "old_string", allow_empty=True)
    new_string = require_str(args, "new_string", allow_empty=True)
    replace_all = optional_bool(args, "replace_all")
    shown = display_path(path, ctx.workspace)
    if old_string == new_string:
        raise ToolError("old_string and new_string are identical; the edit would change nothing.")
    current = await read_existing_text(path, shown, ctx)
    if current is None:
        if old_string:
            raise ToolError(
                f"File not found: {shown}. To create a file, use write_file, or edit with an "
                "empty old_string."
            )
        return _EditPlan(FileDiff(path, None, new_string), 1, 1)
    if not old_string:
        raise ToolError(
            f"{shown} already exists; an empty old_string only creates new files. Give the "
            "exact text to replace, or use write_file to replace the whole file."
        )
    return _replace(current, old_string, new_string, replace_all, shown, path)


def _replace(
    current: str, old: str, new: str, replace_all: bool, shown: str, path: Path
) -> _EditPlan:
    # A file with only CRLF endings is matched with LF endings and written back with CRLF,
    # so an old_string the model copied from read_file output still matches.
    crlf = "\r\n" in current and current.count("\r\n") == current.count("\n") and "\r" not in old
    text = current.replace("\r\n", "\n") if crlf else current
    count = text.count(old)
    if count == 0:
        raise ToolError(
            f"Could not find the text to replace in {shown} (0 occurrences of old_string). "
            "old_string must match the file exactly, including whitespace and indentation; "
            "read the file again and copy the text precisely."
        )
    if count > 1 and not replace_all:
        raise ToolError(
            f"Found {count} occurrences of old_string in {shown}, but replace_all is false. "
            "Include more surrounding lines in old_string so that it matches exactly one "
            "place, or set replace_all to true to replace every occurrence."
        )
    updated = text.replace(old, new) if replace_all else text.replace(old, new, 1)
    first_line = text[: text.index(old)].count("\n") + 1
    if crlf:
        updated = updated.replace("\r\n", "\n").replace("\n", "\r\n")
    return _EditPlan(FileDiff(path, current, updated), count if replace_all else 1, first_line)
