"""``grep_search``: lines matching a regular expression, as ``path:line:text``.

ripgrep does the search when ``rg`` is on PATH; otherwise a Python walk does. Both skip the same
folders and binary files, visit files in path order and produce the same output.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, BinaryIO

from cairn.tools._common import (
    BINARY_SNIFF_BYTES,
    BuiltinTool,
    display_path,
    folder_phrase,
    optional_str,
    require_str,
)
from cairn.tools._walk import SKIPPED_DIRS, GlobPattern, iter_files
from cairn.tools.base import ToolContext, ToolError, ToolKind, ToolResult

__all__ = ["MAX_GREP_MATCHES", "MAX_MATCH_LINE_CHARS", "GrepTool"]

MAX_GREP_MATCHES = 500  # matching lines returned by one call
MAX_MATCH_LINE_CHARS = 500  # characters kept of one matching line
_RG_MAX_COLUMNS = 2 * MAX_MATCH_LINE_CHARS  # rg shortens longer lines itself
_RG_LINE_BUFFER = 1 << 20  # bytes of one rg output line the reader accepts
MAX_WHOLE_FILE_BYTES = 16 << 20  # larger files are searched line by line, without a pre-check
# Regex syntax whose meaning depends on where the text ends, so a whole-file pre-check could
# miss a line's match: string anchors and lookarounds.
_LINE_SENSITIVE_SYNTAX = ("\\A", "\\Z", "\\z", "(?=", "(?!", "(?<")

_PARAMETERS: Mapping[str, Any] = {
    "type": "object",
    "properties": {
        "pattern": {
            "type": "string",
            "description": "Regular expression to search for (case-sensitive; start it with "
            "(?i) to ignore case).",
        },
        "path": {
            "type": "string",
            "description": "File or folder to search (default: the workspace).",
        },
        "glob": {
            "type": "string",
            "description": "Only search files matching this glob, e.g. '*.py' (any depth) or "
            "'src/**/*.ts' (relative to path).",
        },
    },
    "required": ["pattern"],
}


@dataclass
class _Matches:
    lines: list[str] = field(default_factory=list)
    truncated: bool = False

    def add(self, path: str, number: int, text: str) -> bool:
        """Record one match; False once the cap is reached."""
        if len(self.lines) >= MAX_GREP_MATCHES:
            self.truncated = True
            return False
        text = text.rstrip("\r")
        if len(text) > MAX_MATCH_LINE_CHARS:
            text = text[:MAX_MATCH_LINE_CHARS] + " ..."
        self.lines.append(f"{path}:{number}:{text}")
        return True


class GrepTool(BuiltinTool):
    name = "grep_search"
    description = (
        "Search file contents with a regular expression. Returns matching lines as "
        f"path:line:text (at most {MAX_GREP_MATCHES}), paths relative to the workspace. "
        "Use glob to limit the files searched."
    )
    parameters = _PARAMETERS
    kind = ToolKind.SEARCH

    def title(self, args: Mapping[str, Any]) -> str:
        where = args.get("path")
        return f"Search for {args.get('pattern', '')}" + (f" in {where}" if where else "")

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = require_str(args, "pattern")
        try:
            searcher = _Searcher.compile(pattern)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}") from None
        target = ctx.resolve(optional_str(args, "path") or ".")
        glob_text = optional_str(args, "glob")
        shown = display_path(target, ctx.workspace)
        if not target.exists():
            raise ToolError(f"Path not found: {shown}")
        glob = GlobPattern.compile(glob_text, anywhere=True) if glob_text else None
        if shutil.which("rg"):
            found = await _ripgrep(pattern, target, glob_text, ctx)
        else:
            found = await asyncio.to_thread(
                _python_search, searcher, target, glob, ctx.workspace, lambda: ctx.abort.aborted
            )
        return _result(found, pattern, shown, glob_text)


def _result(found: _Matches, pattern: str, shown: str, glob: str | None) -> ToolResult:
    where = f"in {folder_phrase(shown)}" + (f" (files matching {glob})" if glob else "")
    if not found.lines:
        return ToolResult(output=f"No matches found for pattern {pattern!r} {where}.")
    lines = [f"Found {len(found.lines)} matching line(s) for pattern {pattern!r} {where}:"]
    lines += found.lines
    if found.truncated:
        lines.append(
            f"[Showing the first {MAX_GREP_MATCHES} matches; there are more. Narrow the "
            "pattern, path or glob to see the rest.]"
        )
    return ToolResult(output="\n".join(lines), display=f"Found {len(found.lines)} matches")


@dataclass(frozen=True, slots=True)
class _Searcher:
    """The pattern per line, and (when safe) over a whole file to skip files quickly."""

    line: re.Pattern[str]
    whole: re.Pattern[str] | None

    @classmethod
    def compile(cls, pattern: str) -> _Searcher:
        line = re.compile(pattern)
        # Anchors and lookarounds can see past a line in the whole text; search per line only.
        exact_per_line = any(token in pattern for token in _LINE_SENSITIVE_SYNTAX)
        return cls(line, None if exact_per_line else re.compile(pattern, re.MULTILINE))


def _python_search(
    searcher: _Searcher,
    target: Path,
    glob: GlobPattern | None,
    workspace: Path,
    should_stop: Callable[[], bool],
) -> _Matches:
    found = _Matches()
    searching_folder = target.is_dir()
    files = iter_files(target, should_stop) if searching_folder else [target]
    for path in files:
        if glob is not None:
            relative = path.relative_to(target).as_posix() if searching_folder else path.name
            if not glob.matches(relative):
                continue
        hits = _file_matches(path, searcher, MAX_GREP_MATCHES + 1 - len(found.lines))
        if hits:
            shown = display_path(path, workspace)
            if not all(found.add(shown, number, line) for number, line in hits):
                break
    return found


def _file_matches(path: Path, searcher: _Searcher, limit: int) -> list[tuple[int, str]]:
    """Up to ``limit`` (line number, line) matches; unreadable and binary files have none."""
    try:
        with path.open("rb") as handle:
            data = handle.read(BINARY_SNIFF_BYTES)
            if b"\0" in data:
                return []
            if os.fstat(handle.fileno()).st_size > MAX_WHOLE_FILE_BYTES:
                return _first_matches(_decoded_lines(handle, data), searcher.line, limit)
            data += handle.read()
    except OSError:
        return []  # as ripgrep does
    text = data.decode("utf-8", errors="replace")
    if "\r" in text:
        text = text.replace("\r\n", "\n")
    if searcher.whole is not None and searcher.whole.search(text) is None:
        return []
    lines = text.split("\n")
    if lines[-1] == "":
        lines.pop()
    return _first_matches(lines, searcher.line, limit)


def _decoded_lines(handle: BinaryIO, start: bytes) -> Iterator[str]:
    """The lines of a large file, read as they are needed."""
    pending = start
    for chunk in iter(lambda: handle.read(1 << 20), b""):
        pending += chunk
        *complete, pending = pending.split(b"\n")
        for raw in complete:
            yield raw.decode("utf-8", errors="replace").removesuffix("\r")
    if pending:
        yield pending.decode("utf-8", errors="replace").removesuffix("\r")


def _first_matches(
    lines: Iterable[str], regex: re.Pattern[str], limit: int
) -> list[tuple[int, str]]:
    hits: list[tuple[int, str]] = []
    for number, line in enumerate(lines, start=1):
        if regex.search(line):
            hits.append((number, line))
            if len(hits) >= limit:
                break
    return hits


async def _ripgrep(pattern: str, target: Path, glob: str | None, ctx: ToolContext) -> _Matches:
    command = [
        "rg", "--no-config", "--no-heading", "--line-number", "--with-filename", "--null",
        "--color", "never", "--hidden", "--no-ignore", "--sort", "path", "--crlf",
        "--max-columns", str(_RG_MAX_COLUMNS), "--max-columns-preview",
        *(arg for name in sorted(SKIPPED_DIRS) for arg in ("--glob", f"!{name}")),
        *(("--glob", glob) if glob else ()),
        "--regexp", pattern, "--", _rg_target(target, ctx.workspace),
    ]  # fmt: skip
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=ctx.workspace,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_RG_LINE_BUFFER,
    )
    found = _Matches()
    try:
        assert process.stdout is not None
        async for raw in process.stdout:
            if not _add_rg_line(raw, found) or ctx.abort.aborted:
                break
    finally:
        if process.returncode is None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()
        _, errors = await process.communicate()
    if process.returncode == 2 and not found.lines and errors:
        message = errors.decode("utf-8", errors="replace").strip()
        raise ToolError(f"Search failed: {message[:1000]}")
    return found


def _rg_target(target: Path, workspace: Path) -> str:
    shown = display_path(target, workspace)
    return "." if shown == "." else shown


def _add_rg_line(raw: bytes, found: _Matches) -> bool:
    """Parse ``path\\0line:text``; False once the cap is reached."""
    path, sep, rest = raw.decode("utf-8", errors="replace").rstrip("\n").partition("\0")
    number, colon, text = rest.partition(":")
    if not sep or not colon or not number.isdigit():
        return True
    path = path.removeprefix("./")
    return found.add(path, int(number), text)
