"""``read_file``: a text file, or a window of its lines; an image file as an image."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.fsutil import FileTooLarge, NotRegularFile
from cairn.images import ImageError, describe_image, is_image_path, load_image
from cairn.tools.arguments import optional_int, require_str
from cairn.tools.base import (
    MAX_TEXT_FILE_BYTES,
    Location,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)
from cairn.tools.builtin import BuiltinTool
from cairn.tools.files import check_regular_file, display_path, looks_binary
from cairn.tools.schema import object_schema, string_property
from cairn.values import Value
from cairn.vocabulary.tool_names import ToolName

__all__ = ["DEFAULT_LINE_LIMIT", "MAX_LINE_CHARS", "MAX_READ_CHARS", "ReadFileTool"]

DEFAULT_LINE_LIMIT = 2000  # lines returned when the model gives no limit
MAX_LINE_CHARS = 2000  # characters kept of one very long line (minified code, data)
MAX_READ_CHARS = 100_000  # characters returned by one call, whatever the line count

_PARAMETERS = object_schema(
    {
        "file_path": string_property(
            "Path of the file to read, absolute or relative to the workspace."
        ),
        "offset": {
            "type": "integer",
            "minimum": 0,
            "description": "0-based line to start from. Use it with limit to page through "
            "large files.",
        },
        "limit": {
            "type": "integer",
            "minimum": 1,
            "description": f"Maximum number of lines to read (default {DEFAULT_LINE_LIMIT}).",
        },
    },
    required=["file_path"],
)


class _Window(Value):
    text: str
    first: int  # 1-based number of the first line shown
    last: int  # 1-based number of the last line shown
    total: int
    cut_lines: bool  # some long lines were shortened


class ReadFileTool(BuiltinTool):
    name = ToolName.READ_FILE
    description = (
        "Read a text file from the workspace. Returns up to "
        f"{DEFAULT_LINE_LIMIT} lines by default; for larger files use offset (0-based line) "
        "and limit to read further. Images (PNG, JPEG, GIF, WebP) are returned as images you "
        "can see. Other binary files are refused."
    )
    parameters = _PARAMETERS
    kind = ToolKind.READ

    def title(self, args: Mapping[str, Any]) -> str:
        path = args.get("file_path", "")
        offset, limit = args.get("offset"), args.get("limit")
        if isinstance(offset, int) and isinstance(limit, int):
            return f"Read {path} (lines {offset + 1}-{offset + limit})"
        return f"Read {path}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        try:
            path = ctx.resolve(require_str(args, "file_path"))
            offset = optional_int(args, "offset")
        except ToolError:
            return []
        return [Location(path, offset + 1 if offset else None)]

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        raw = require_str(args, "file_path")
        offset = optional_int(args, "offset") or 0
        limit = optional_int(args, "limit", minimum=1) or DEFAULT_LINE_LIMIT
        path = ctx.resolve(raw)
        shown = display_path(path, ctx.workspace)
        if ctx.ignore is not None and ctx.ignore.cairn_ignored(path):
            raise ToolError(
                f"{shown} is listed in .cairnignore: the user keeps it out of the agent's reach."
            )
        if is_image_path(path):
            return await _read_image(path, shown)
        text = await _read_text(path, shown, ctx)
        window = _window(text, offset, limit, shown)
        return ToolResult(
            output=_with_notes(window),
            display=f"Read lines {window.first}-{window.last} of {window.total}"
            if window.total
            else "Read an empty file",
            locations=[Location(path, window.first if offset else None)],
        )


async def _read_image(path: Path, shown: str) -> ToolResult:
    """The picture for the model (size-capped, downscaled when Pillow is installed)."""
    try:
        image = await asyncio.to_thread(load_image, path, source=shown)
    except ImageError as exc:
        raise ToolError(str(exc)) from None
    return ToolResult(
        output=f"Read image {describe_image(image)}; it is attached for you to see.",
        display=f"Read image ({image.mime_type}, {image.size // 1024 or 1} KB)",
        locations=[Location(path)],
        media=(image,),
    )


async def _read_text(path: Path, shown: str, ctx: ToolContext) -> str:
    await check_regular_file(path, shown)
    if await asyncio.to_thread(looks_binary, path):
        raise ToolError(f"{shown} is a binary file; read_file only reads text files.")
    try:
        return await ctx.fs.read_text(path)
    except FileNotFoundError:
        raise ToolError(f"File not found: {shown}") from None
    except UnicodeDecodeError:
        raise ToolError(
            f"{shown} is not UTF-8 text (it may be binary); read_file only reads text files."
        ) from None
    except NotRegularFile:
        raise ToolError(f"{shown} is not a regular file; read_file only reads files.") from None
    except FileTooLarge:
        raise ToolError(
            f"{shown} is larger than {MAX_TEXT_FILE_BYTES >> 20} MB, more than read_file reads; "
            "look at parts of it with run_shell_command (head, tail, grep)."
        ) from None
    except OSError as exc:
        raise ToolError(f"Could not read {shown}: {exc.strerror or exc}") from None


def _split_lines(text: str) -> list[str]:
    """Lines split on ``\\n`` only (as editors and grep number them); no trailing empty line."""
    lines = text.split("\n")
    if lines and lines[-1] == "":
        lines.pop()
    return lines


def _window(text: str, offset: int, limit: int, shown: str) -> _Window:
    lines = _split_lines(text)
    total = len(lines)
    if total == 0:
        return _Window("", 0, 0, 0, cut_lines=False)
    if offset >= total:
        raise ToolError(
            f"offset {offset} is past the end of {shown}, which has {total} lines "
            f"(valid offsets are 0-{total - 1})."
        )
    kept: list[str] = []
    size, cut_lines = 0, False
    for line in lines[offset : offset + limit]:
        if len(line) > MAX_LINE_CHARS:
            line = line[:MAX_LINE_CHARS] + " ... [line truncated]"
            cut_lines = True
        if kept and size + len(line) + 1 > MAX_READ_CHARS:
            break
        kept.append(line)
        size += len(line) + 1
    return _Window("\n".join(kept), offset + 1, offset + len(kept), total, cut_lines)


def _with_notes(window: _Window) -> str:
    if window.total == 0:
        return "[The file is empty.]"
    notes: list[str] = []
    if window.first > 1 or window.last < window.total:
        notes.append(
            f"[File content truncated: showing lines {window.first}-{window.last} of "
            f"{window.total} total lines. Use offset/limit to read more "
            f"(next offset: {window.last}).]"
            if window.last < window.total
            else f"[Showing lines {window.first}-{window.last} of {window.total} total lines.]"
        )
    if window.cut_lines:
        notes.append(f"[Lines longer than {MAX_LINE_CHARS} characters were shortened.]")
    if not notes:
        return window.text
    return "\n".join(notes) + "\n\n" + window.text
