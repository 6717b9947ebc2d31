"""``write_file``: create a file or replace its whole content."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.tools.arguments import require_str
from cairn.tools.base import (
    FileDiff,
    Location,
    ToolContext,
    ToolError,
    ToolResult,
)
from cairn.tools.builtin import FileChangeTool
from cairn.tools.files import check_regular_file, display_path
from cairn.tools.schema import object_schema, string_property
from cairn.vocabulary.tool_names import ToolName

__all__ = ["WriteFileTool", "read_existing_text", "write_text"]

_PARAMETERS = object_schema(
    {
        "file_path": string_property(
            "Path of the file to write, absolute or relative to the workspace. Missing parent "
            "folders are created."
        ),
        "content": string_property("The complete new content of the file."),
    },
    required=["file_path", "content"],
)


class WriteFileTool(FileChangeTool):
    name = ToolName.WRITE_FILE
    description = (
        "Write a file in the workspace, creating it (and its folders) or replacing all of its "
        "content. To change part of an existing file, prefer edit."
    )
    parameters = _PARAMETERS
    verb = "Write"

    async def _diff(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff:
        path = ctx.resolve(require_str(args, "file_path"), write=True)
        content = require_str(args, "content", allow_empty=True)
        old = await read_existing_text(path, display_path(path, ctx.workspace), ctx)
        return FileDiff(path, old, content)

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        diff = await self._diff(args, ctx)
        shown = display_path(diff.path, ctx.workspace)
        await write_text(diff.path, diff.new_text, shown, ctx)
        verb = "Created" if diff.old_text is None else "Overwrote"
        output = f"{verb} {shown} ({_count_lines(diff.new_text)} lines)."
        return ToolResult(output=output, diff=diff, locations=[Location(diff.path)])


def _count_lines(text: str) -> int:
    return text.count("\n") + (1 if text and not text.endswith("\n") else 0)


async def read_existing_text(path: Path, shown: str, ctx: ToolContext) -> str | None:
    """The current text of ``path``, ``None`` when it does not exist; refuses non-text files
    and anything but a regular file (a FIFO or a device is never replaced)."""
    try:
        if not await check_regular_file(path, shown, missing_ok=True):
            return None
    except ToolError as exc:
        raise ToolError(f"{exc} Give the path of a regular file.") from None
    try:
        return await ctx.fs.read_text(path)
    except FileNotFoundError:
        return None
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} exists and is not a UTF-8 text file; refusing to replace it."
        ) from None
    except OSError as exc:
        raise ToolError(f"Could not read {shown}: {exc.strerror or exc}") from None


async def write_text(path: Path, text: str, shown: str, ctx: ToolContext) -> None:
    """Write through ``ctx.fs`` after creating missing parent folders."""
    try:
        await asyncio.to_thread(path.parent.mkdir, parents=True, exist_ok=True)
        await ctx.fs.write_text(path, text)
    except OSError as exc:
        raise ToolError(f"Could not write {shown}: {exc.strerror or exc}") from None
