"""``list_directory``: the entries of one folder, folders first."""

from __future__ import annotations

import asyncio
import fnmatch
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.tools.arguments import optional_str_list, require_str
from cairn.tools.base import Location, ToolContext, ToolError, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool
from cairn.tools.files import display_path
from cairn.tools.schema import object_schema, string_property
from cairn.vocabulary.tool_names import ToolName

__all__ = ["MAX_ENTRIES", "ListDirectoryTool"]

MAX_ENTRIES = 1000  # entries listed by one call; the rest are counted in a note

_PARAMETERS = object_schema(
    {
        "path": string_property(
            "Folder to list, absolute or relative to the workspace ('.' for the workspace "
            "itself)."
        ),
        "ignore": {
            "type": "array",
            "items": {"type": "string"},
            "description": "Glob patterns of entry names to leave out, e.g. ['*.pyc'].",
        },
    },
    required=["path"],
)


class ListDirectoryTool(BuiltinTool):
    name = ToolName.LIST_DIRECTORY
    description = (
        "List the files and folders directly inside a folder. Folders come first and end with '/'."
    )
    parameters = _PARAMETERS
    kind = ToolKind.READ

    def title(self, args: Mapping[str, Any]) -> str:
        return f"List {args.get('path', '.')}"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        try:
            return [Location(ctx.resolve(require_str(args, "path")))]
        except ToolError:
            return []

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        folder = ctx.resolve(require_str(args, "path"))
        ignore = optional_str_list(args, "ignore")
        shown = display_path(folder, ctx.workspace)
        if not await asyncio.to_thread(folder.exists):
            raise ToolError(f"Folder not found: {shown}")
        if not await asyncio.to_thread(folder.is_dir):
            raise ToolError(f"{shown} is a file, not a folder. Use read_file to read it.")
        entries = await asyncio.to_thread(_entries, folder, ignore, shown)
        entries, skipped = _without_ignored(entries, folder, ctx)
        if not entries:
            note = f" ({skipped} ignored entries not shown)" if skipped else ""
            return ToolResult(output=f"Folder {shown} is empty{note}.", display="Empty folder")
        listed = entries[:MAX_ENTRIES]
        lines = [f"Contents of {shown}:", *listed]
        if len(entries) > len(listed):
            lines.append(
                f"[Showing {len(listed)} of {len(entries)} entries. Use glob with a pattern "
                "to find specific files.]"
            )
        if skipped:
            lines.append(f"[{skipped} entries ignored by .gitignore or .cairnignore not shown.]")
        return ToolResult(output="\n".join(lines), display=f"Listed {len(entries)} entries")


def _entries(folder: Path, ignore: list[str], shown: str) -> list[str]:
    """Names sorted case-insensitively, folders (with a trailing "/") before files."""
    try:
        with os.scandir(folder) as scan:
            items = [
                (entry.name, _is_dir(entry))
                for entry in scan
                if not any(fnmatch.fnmatchcase(entry.name, pattern) for pattern in ignore)
            ]
    except OSError as exc:
        raise ToolError(f"Could not list {shown}: {exc.strerror or exc}") from None
    items.sort(key=lambda item: (not item[1], item[0].lower(), item[0]))
    return [f"{name}/" if is_dir else name for name, is_dir in items]


def _without_ignored(entries: list[str], folder: Path, ctx: ToolContext) -> tuple[list[str], int]:
    """``entries`` minus what .gitignore / .cairnignore ignore (the folder itself counts as
    asked for), and how many were left out."""
    rules = ctx.ignore
    if rules is None or not rules.active:
        return entries, 0
    kept = [
        e
        for e in entries
        if not rules.ignored_below(folder, folder / e.rstrip("/"), is_dir=e.endswith("/"))
    ]
    return kept, len(entries) - len(kept)


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
