"""``glob``: files whose path matches a pattern, newest first."""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.tools._walk import SKIPPED_DIRS, GlobPattern, iter_files
from cairn.tools.arguments import optional_str, require_str
from cairn.tools.base import Location, ToolContext, ToolError, ToolResult
from cairn.tools.builtin import PatternSearchTool
from cairn.tools.files import display_path, folder_phrase
from cairn.tools.schema import object_schema, string_property
from cairn.vocabulary.tool_names import ToolName

__all__ = ["MAX_GLOB_RESULTS", "GlobTool"]

MAX_GLOB_RESULTS = 500  # paths returned by one call; the note gives the total

_PARAMETERS = object_schema(
    {
        "pattern": string_property(
            "Glob matched against paths relative to the search folder: '*' stays within one "
            "folder, '**' spans folders, '{a,b}' lists alternatives (e.g. 'src/**/*.py', "
            "'**/*.{ts,tsx}')."
        ),
        "path": string_property("Folder to search in (default: the workspace)."),
    },
    required=["pattern"],
)


class GlobTool(PatternSearchTool):
    name = ToolName.GLOB
    description = (
        "Find files by name pattern (supports '**'), newest first. Skips "
        + ", ".join(sorted(SKIPPED_DIRS))
        + " and what .gitignore and .cairnignore exclude"
        + f". Returns at most {MAX_GLOB_RESULTS} paths."
    )
    parameters = _PARAMETERS
    verb = "Find"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = require_str(args, "pattern")
        base = ctx.resolve(optional_str(args, "path") or ".")
        shown = display_path(base, ctx.workspace)
        if not await asyncio.to_thread(base.is_dir):
            raise ToolError(f"Folder not found: {shown}")
        shown = folder_phrase(shown)
        glob = GlobPattern.compile(_relative_pattern(pattern, base))
        found = await asyncio.to_thread(_matching_files, base, glob, ctx)
        if not found:
            return ToolResult(output=f'No files found matching "{pattern}" in {shown}.')
        listed = [display_path(path, ctx.workspace) for path in found[:MAX_GLOB_RESULTS]]
        lines = [f'Found {len(found)} file(s) matching "{pattern}" in {shown}, newest first:']
        lines += listed
        if len(found) > len(listed):
            lines.append(
                f"[Showing the {len(listed)} newest of {len(found)} matches. Narrow the "
                "pattern or the path to see the rest.]"
            )
        return ToolResult(
            output="\n".join(lines),
            display=f"Found {len(found)} files",
            locations=[Location(path) for path in found[:MAX_GLOB_RESULTS]],  # jump-to links
        )


def _relative_pattern(pattern: str, base: Path) -> str:
    """Patterns are relative to ``base``; an absolute one must point inside it."""
    if not pattern.startswith("/"):
        return pattern
    prefix = base.as_posix().rstrip("/") + "/"
    if not pattern.startswith(prefix):
        raise ToolError(
            f"The pattern {pattern} is absolute but not inside the search folder {base}. "
            "Give a pattern relative to path."
        )
    return pattern[len(prefix) :]


def _matching_files(base: Path, glob: GlobPattern, ctx: ToolContext) -> list[Path]:
    """Matching files, newest first; those the context may not read (a symlink out of the
    roots, a path under a deny rule) are left out."""
    matches: list[tuple[float, str, Path]] = []
    for path in iter_files(base, lambda: ctx.abort.aborted, ignore=ctx.ignore):
        relative = path.relative_to(base).as_posix()
        if glob.matches(relative) and ctx.may_read(path):
            try:
                mtime = path.stat().st_mtime
            except OSError:
                continue
            matches.append((-mtime, relative, path))
    matches.sort()
    return [path for _, _, path in matches]
