"""``grep_search``: lines matching a regular expression, as ``path:line:text``.

ripgrep does the search when ``rg`` is on PATH; otherwise :mod:`cairn.tools._grep_worker` does,
in a process of its own. Either way the search is a child process that is killed when the turn
is cancelled or when it runs past its time budget (a backtracking pattern such as ``(a+)+$``
would otherwise never end). Both skip the same folders, binary files and symbolic links, visit
files in path order and produce the same output.

Every result goes through the tool context's path check before the model sees it: a file
outside the readable roots (after resolving symlinks) or under a ``Read(...)`` deny rule is
dropped, whichever searcher found it. What ``.gitignore`` and ``.cairnignore`` exclude
(:mod:`cairn.tools.ignore`) is skipped by both searchers and checked again on every result.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import re
import shutil
import signal
import sys
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from cairn.tools._walk import SKIPPED_DIRS
from cairn.tools.arguments import optional_str, require_str
from cairn.tools.base import Location, ToolContext, ToolError, ToolResult
from cairn.tools.builtin import PatternSearchTool
from cairn.tools.files import check_regular_file, display_path, folder_phrase
from cairn.tools.schema import object_schema, string_property
from cairn.values import Value
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from collections.abc import Callable

    from cairn.tools.ignore import IgnoreRules

__all__ = ["MAX_GREP_MATCHES", "MAX_MATCH_LINE_CHARS", "GrepTool"]

MAX_GREP_MATCHES = 500  # matching lines returned by one call
MAX_MATCH_LINE_CHARS = 500  # characters kept of one matching line
_RG_MAX_COLUMNS = 2 * MAX_MATCH_LINE_CHARS  # rg shortens longer lines itself
_RG_LINE_BUFFER = 1 << 20  # bytes of one rg output line the reader accepts
_STDERR_KEPT = 4000  # bytes of a searcher's error output kept for the message

_PARAMETERS = object_schema(
    {
        "pattern": string_property(
            "Regular expression to search for (case-sensitive; start it with (?i) to ignore "
            "case)."
        ),
        "path": string_property("File or folder to search (default: the workspace)."),
        "glob": string_property(
            "Only search files matching this glob, e.g. '*.py' (any depth) or 'src/**/*.ts' "
            "(relative to path)."
        ),
    },
    required=["pattern"],
)


class _Matches(Value, frozen=False):
    lines: list[str] = field(default_factory=list)
    places: list[Location] = field(default_factory=list)  # each match's file and line
    truncated: bool = False
    stopped: Literal["time", "cancelled"] | None = None

    def add(self, path: str, number: int, text: str, where: Path) -> bool:
        """Record one match; False once the cap is reached."""
        if len(self.lines) >= MAX_GREP_MATCHES:
            self.truncated = True
            return False
        text = text.rstrip("\r")
        if len(text) > MAX_MATCH_LINE_CHARS:
            text = text[:MAX_MATCH_LINE_CHARS] + " ..."
        self.lines.append(f"{path}:{number}:{text}")
        self.places.append(Location(where, number))
        return True


class GrepTool(PatternSearchTool):
    name = ToolName.GREP
    description = (
        "Search file contents with a regular expression. Returns matching lines as "
        f"path:line:text (at most {MAX_GREP_MATCHES}), paths relative to the workspace. "
        "Use glob to limit the files searched."
    )
    parameters = _PARAMETERS
    verb = "Search for"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        pattern = require_str(args, "pattern")
        try:
            re.compile(pattern)
        except re.error as exc:
            raise ToolError(f"Invalid regular expression {pattern!r}: {exc}") from None
        target = ctx.resolve(optional_str(args, "path") or ".")
        glob = optional_str(args, "glob")
        shown = display_path(target, ctx.workspace)
        if not await asyncio.to_thread(target.exists):
            raise ToolError(f"Path not found: {shown}")
        if not await asyncio.to_thread(target.is_dir):
            await check_regular_file(target, shown)
        rg = shutil.which("rg")
        if rg is not None:
            command = _rg_command(rg, pattern, target, glob, ctx)
        else:
            command = _worker_command(pattern, target, glob, ctx)
        found = await _search(command, ctx, _ignored_filter(target, ctx))
        if found.stopped == "cancelled":
            raise ToolError(f"The search for {pattern!r} was cancelled.")
        if found.stopped == "time" and not found.lines:
            raise ToolError(_too_slow(pattern, ctx.search_timeout))
        return _result(found, pattern, shown, glob, ctx.search_timeout)


def _too_slow(pattern: str, seconds: float) -> str:
    return (
        f"The search for {pattern!r} was stopped after {seconds:g} s. If the pattern nests "
        "repetition (such as (a+)+ or (.*)*), it can backtrack without end: simplify it, or "
        "narrow the path or glob."
    )


def _result(
    found: _Matches, pattern: str, shown: str, glob: str | None, seconds: float
) -> ToolResult:
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
    if found.stopped == "time":
        lines.append(f"[{_too_slow(pattern, seconds)} These are the matches found until then.]")
    return ToolResult(
        output="\n".join(lines),
        display=f"Found {len(found.lines)} matches",
        locations=found.places,  # jump-to links in an editor
    )


def _rg_command(
    rg: str, pattern: str, target: Path, glob: str | None, ctx: ToolContext
) -> list[str]:
    return [
        rg, "--no-config", "--no-heading", "--line-number", "--with-filename", "--null",
        "--color", "never", "--hidden", *_rg_ignore_flags(ctx.ignore), "--sort", "path",
        "--crlf",
        "--max-columns", str(_RG_MAX_COLUMNS), "--max-columns-preview",
        *(arg for name in sorted(SKIPPED_DIRS) for arg in ("--glob", f"!{name}")),
        *(("--glob", glob) if glob else ()),
        "--regexp", pattern, "--", _relative_target(target, ctx.workspace),
    ]  # fmt: skip


def _worker_command(pattern: str, target: Path, glob: str | None, ctx: ToolContext) -> list[str]:
    options: dict[str, Any] = {
        "pattern": pattern,
        "target": _relative_target(target, ctx.workspace),
        "glob": glob,
        "limit": MAX_GREP_MATCHES + 1,
    }
    rules = ctx.ignore
    if rules is not None and rules.active:
        options["ignore"] = {
            "root": str(rules.root),
            "gitignore": rules.gitignore,
            "cairnignore": rules.cairnignore,
        }
    return [sys.executable, "-m", "cairn.tools._grep_worker", json.dumps(options)]


def _rg_ignore_flags(ignore: IgnoreRules | None) -> list[str]:
    """rg prunes what .gitignore ignores under the search folder (fast); the exact rules
    (parent folders' files, .cairnignore) are then applied to what it found."""
    if ignore is None or not ignore.gitignore:
        return ["--no-ignore"]
    return ["--no-require-git", "--no-ignore-parent", "--no-ignore-dot", "--no-ignore-global"]


def _ignored_filter(target: Path, ctx: ToolContext) -> Callable[[str], bool] | None:
    """Whether a result path (relative to the workspace) is ignored below the search folder."""
    rules = ctx.ignore
    if rules is None or not rules.active:
        return None
    base = target if target.is_dir() else target.parent
    seen: dict[str, bool] = {}

    def ignored(path: str) -> bool:
        known = seen.get(path)
        if known is None:
            known = seen[path] = rules.ignored_below(base, ctx.workspace / path)
        return known

    return ignored


def _relative_target(target: Path, workspace: Path) -> str:
    shown = display_path(target, workspace)
    return "." if shown == "." else shown


async def _search(
    command: Sequence[str], ctx: ToolContext, skip: Callable[[str], bool] | None = None
) -> _Matches:
    """Run a searcher in its own process group and read its matches, within the time budget.

    Cancelling the turn, aborting it, or the budget running out kills the whole group."""
    process = await asyncio.create_subprocess_exec(
        *command,
        cwd=ctx.workspace,
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        limit=_RG_LINE_BUFFER,
        start_new_session=True,
    )
    found = _Matches()
    errors = bytearray()
    try:
        found.stopped = await _read_until_done(process, found, errors, ctx, skip)
    finally:
        _kill(process)
        await process.wait()
    if process.returncode == 2 and not found.lines and errors and found.stopped is None:
        message = errors.decode("utf-8", errors="replace").strip()
        raise ToolError(f"Search failed: {message[:1000]}")
    if process.returncode not in (0, 1, 2) and found.stopped is None and errors:
        last = errors.decode("utf-8", errors="replace").strip().splitlines()[-1:]
        raise ToolError(f"Search failed: {' '.join(last)[:1000]}")
    return found


async def _read_until_done(
    process: asyncio.subprocess.Process,
    found: _Matches,
    errors: bytearray,
    ctx: ToolContext,
    skip: Callable[[str], bool] | None = None,
) -> Literal["time", "cancelled"] | None:
    assert process.stdout is not None and process.stderr is not None
    stdout, stderr = process.stdout, process.stderr

    async def read_matches() -> None:
        async for raw in stdout:
            if not _add_line(raw, found, ctx, skip):
                return

    async def read_errors() -> None:
        while chunk := await stderr.read(4096):
            errors.extend(chunk[: max(_STDERR_KEPT - len(errors), 0)])

    aborted: asyncio.Future[None] = asyncio.get_running_loop().create_future()

    def on_abort(_reason: str | None) -> None:
        if not aborted.done():
            aborted.set_result(None)

    remove = ctx.abort.add_listener(on_abort)
    reading = asyncio.ensure_future(asyncio.gather(read_matches(), read_errors()))
    waited: list[asyncio.Future[Any]] = [reading, aborted]
    try:
        done, _ = await asyncio.wait(
            waited, timeout=ctx.search_timeout, return_when=asyncio.FIRST_COMPLETED
        )
    finally:
        remove()
        aborted.cancel()
        if not reading.done():
            reading.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await reading
    if reading in done:
        reading.result()
        return None
    return "cancelled" if ctx.abort.aborted else "time"


def _kill(process: asyncio.subprocess.Process) -> None:
    if process.returncode is None:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, signal.SIGKILL)


def _add_line(
    raw: bytes, found: _Matches, ctx: ToolContext, skip: Callable[[str], bool] | None = None
) -> bool:
    """Parse ``path\\0line:text``; drop what the context may not read; False at the cap."""
    path, sep, rest = raw.decode("utf-8", errors="replace").rstrip("\n").partition("\0")
    number, colon, text = rest.partition(":")
    if not sep or not colon or not number.isdigit():
        return True
    path = path.removeprefix("./")
    if not ctx.may_read(ctx.workspace / path):
        return True  # outside the roots after a symlink, or under a deny rule
    if skip is not None and skip(path):
        return True  # .gitignore or .cairnignore
    return found.add(path, int(number), text, ctx.workspace / path)
