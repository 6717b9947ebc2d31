"""The tool set of the memory agents (Extract and Dream): built-in tools with memory guards.

The agents get ``read_file``, ``grep_search``, ``glob``, ``run_shell_command`` (read-only
commands only: anything else needs a confirmation nobody can give) and ``write_file`` and
``edit`` restricted to the memory roots (``pinned/`` refused by the tool context). On top of the
built-in tools:

- every write runs under the cross-process lock of its memory root (:mod:`cairn.memory.store.locks`)
  and is atomic, so a concurrent writer in another process never sees a torn file;
- ``write_file`` over an existing memory is refused unless this agent read the file's current
  content first: a file another process changed after the agent read it is never overwritten
  with a stale version (optimistic concurrency; ``edit`` is safe by construction, since its
  ``old_string`` must match the current text);
- only Markdown memory files (and names a caller allows, such as Dream's operations manifest)
  may be written, never the generated ``MEMORY.md``, and only complete memories: front matter
  with a ``name``, a ``description`` and a known ``type`` (checked before anything is written);
- a memory stating a fact the user asked to forget is refused (the run's tombstones,
  :mod:`cairn.memory.forget.tombstones`), unless the file already stated it;
- each memory written gets its ``provenance`` stamped (:mod:`cairn.memory.trust.provenance`):
  who wrote it, in which session and turn, when, and the evidence files it declares, hashed.

:func:`guarded_write` is that write path on its own: the main agent's memory writes
(:mod:`cairn.memory.remember`) go through it too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import os
import tempfile
from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.abort import AbortSignal
from cairn.fsutil import read_regular_bytes, read_regular_file
from cairn.memory.paths import INDEX_FILE_NAME, PINNED_FOLDER
from cairn.memory.store.locks import hold_roots_async
from cairn.memory.store.parse import memory_file_problem
from cairn.memory.wrapped_tool import WrappedTool
from cairn.tools.base import (
    MAX_TEXT_FILE_BYTES,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
)
from cairn.tools.registry import ToolRegistry, default_registry
from cairn.values import replace
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.memory.forget.tombstones import ForgottenFacts
    from cairn.memory.trust.provenance import Author

__all__ = [
    "MEMORY_AGENT_TOOLS",
    "MEMORY_FORMAT_HINT",
    "WRITE_PAUSE_ENV",
    "WRITE_TOOLS",
    "MemoryFiles",
    "guarded_write",
    "memory_agent_context",
    "memory_agent_registry",
    "write_refusal",
]

MEMORY_AGENT_TOOLS = (
    ToolName.READ_FILE,
    ToolName.GREP,
    ToolName.GLOB,
    ToolName.SHELL,
    ToolName.WRITE_FILE,
    ToolName.EDIT,
)
# Test hook for crash tests: seconds to pause between writing a memory's temp file and renaming
# it into place, with the root lock held (so a test can kill -9 the process mid-write).
WRITE_PAUSE_ENV = "CAIRN_TEST_MEMORY_WRITE_PAUSE"
_MEMORY_SUFFIX = ".md"
WRITE_TOOLS = frozenset({ToolName.WRITE_FILE, ToolName.EDIT})
MEMORY_FORMAT_HINT = (
    "A memory file starts with front matter, then the memory: "
    "'---\\nname: <short title>\\ndescription: <one specific line>\\n"
    "type: <user|feedback|project|reference>\\n---\\n\\n<the memory>'."
)


def _digest(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _write_pause() -> float:
    try:
        return max(float(os.environ.get(WRITE_PAUSE_ENV, "0") or 0), 0.0)
    except ValueError:
        return 0.0


class MemoryFiles:
    """The file system of one memory-agent run: atomic writes, and what the agent has read.

    ``forgotten`` (the tombstones the run honours) refuses a write that states a fact the user
    asked to forget; ``author`` stamps each memory's provenance (who, session, turn, when, and
    the evidence it declares).
    """

    def __init__(
        self, *, forgotten: ForgottenFacts | None = None, author: Author | None = None
    ) -> None:
        self.seen: dict[Path, str] = {}  # resolved path -> digest of the content the agent saw
        self.written: list[Path] = []  # resolved paths written, first write first
        self.forgotten = forgotten
        self.author = author
        self.notes: list[str] = []  # for the writer: evidence not recorded, and why
        # resolved path -> its text before this run first wrote it (None: it did not exist)
        self.originals: dict[Path, str | None] = {}

    async def read_text(self, path: Path) -> str:
        # In a worker thread, as the session's file system reads: never on the event loop.
        # Bytes, not read_text(): universal newlines would turn CRLF files into LF on write.
        data = await asyncio.to_thread(read_regular_file, path, max_bytes=MAX_TEXT_FILE_BYTES)
        return data.decode("utf-8")

    async def write_text(self, path: Path, content: str) -> None:
        data = content.encode("utf-8")
        temp = await asyncio.to_thread(_write_temp, path, data)  # the write and its fsync
        try:
            pause = _write_pause()
            if pause:
                await asyncio.sleep(pause)
            os.replace(temp, path)
        except BaseException:
            with contextlib.suppress(OSError):
                os.unlink(temp)
            raise
        resolved = path.resolve()
        self.seen[resolved] = _digest(data)
        if resolved not in self.written:
            self.written.append(resolved)

    def saw(self, path: Path, text: str) -> None:
        self.seen[path.resolve()] = _digest(text.encode("utf-8"))


def _write_temp(path: Path, data: bytes) -> str:
    """A fully written, fsynced temp file beside ``path`` (same folder: the rename is atomic)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    mode: int | None = None
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode & 0o777
    fd, temp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(temp, mode)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise
    return temp


class RecordingReads:
    """The ``read_file`` view of :class:`MemoryFiles`: what it returns counts as seen."""

    def __init__(self, files: MemoryFiles) -> None:
        self.files = files

    async def read_text(self, path: Path) -> str:
        text = await self.files.read_text(path)
        self.files.saw(path, text)
        return text

    async def write_text(self, path: Path, content: str) -> None:
        await self.files.write_text(path, content)


class _Guarded(WrappedTool):
    """A built-in tool run with memory guards; everything else is delegated."""

    def __init__(self, inner: Tool, files: MemoryFiles, allowed_names: frozenset[str]) -> None:
        super().__init__(inner)
        self.files = files
        self.allowed_names = allowed_names

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        if self.name == ToolName.READ_FILE:
            reading = replace(ctx, fs=RecordingReads(self.files))
            return await self.inner.execute(args, reading)
        if self.name not in WRITE_TOOLS:
            return await self.inner.execute(args, ctx)
        try:
            path, root = _write_target(args, ctx)
        except ToolError as error:
            return ToolResult(error=str(error))
        return await guarded_write(
            self.inner, args, ctx, self.files, path, root, allowed_names=self.allowed_names
        )


async def guarded_write(
    tool: Tool,
    args: Mapping[str, Any],
    ctx: ToolContext,
    files: MemoryFiles,
    path: Path,
    root: Path,
    *,
    allowed_names: AbstractSet[str] = frozenset(),
) -> ToolResult:
    """Run ``write_file`` or ``edit`` on ``path`` (in the memory root ``root``) under the
    memory rules: refused outside memory files, never over a version the writer has not read,
    only complete memory files, atomic, with the lock of ``root`` held."""
    refusal = write_refusal(path, root, allowed_names)
    if refusal is not None:
        return ToolResult(error=refusal)
    exempt = path.name in allowed_names and path.parent == root
    noted = len(files.notes)
    async with hold_roots_async([root]):
        if tool.name == ToolName.WRITE_FILE:
            stale = await asyncio.to_thread(_stale, path, files)
            if stale is not None:
                return ToolResult(error=stale)
        checked = replace(ctx, fs=_CheckedWrites(files, root, exempt=exempt))
        result = await tool.execute(args, checked)
    notes = files.notes[noted:]
    return result.noted(" (" + "; ".join(notes) + ")") if notes and result.ok else result


def write_refusal(
    path: Path, root: Path, allowed_names: AbstractSet[str] = frozenset()
) -> str | None:
    """Why ``path`` (inside ``root``) may not be written by a memory write, or None."""
    relative = path.relative_to(root)
    if relative.name in allowed_names and len(relative.parts) == 1:
        return None
    if relative.parts and relative.parts[0] == PINNED_FOLDER:
        return f"{path}: files under {PINNED_FOLDER}/ are protected and read-only"
    if relative.name == INDEX_FILE_NAME and len(relative.parts) == 1:
        return f"{path}: {INDEX_FILE_NAME} is generated from the memory files; do not edit it"
    hidden = any(part.startswith(".") for part in relative.parts)
    if not relative.name.endswith(_MEMORY_SUFFIX) or hidden:
        return f"{path}: only Markdown memory files (*.md) can be written in memory folders"
    return None


def _stale(path: Path, files: MemoryFiles) -> str | None:
    try:
        current = _digest(read_regular_bytes(path))
    except FileNotFoundError:
        return None
    except OSError as error:
        return f"{path}: could not be read before writing ({error.strerror or error})"
    if files.seen.get(path.resolve()) == current:
        return None
    return (
        f"{path} already exists and its current content has not been read by you (it may "
        "have changed). Read it with read_file first, then write it again or use edit."
    )


class _CheckedWrites:
    """:class:`MemoryFiles` that write only complete memory files (``exempt``: any text)."""

    def __init__(self, files: MemoryFiles, root: Path, *, exempt: bool) -> None:
        self.files = files
        self.root = root
        self.exempt = exempt

    async def read_text(self, path: Path) -> str:
        return await self.files.read_text(path)

    async def write_text(self, path: Path, content: str) -> None:
        problem = None if self.exempt else memory_file_problem(content)
        if problem is not None:
            raise ToolError(f"{path} was not saved: {problem}. {MEMORY_FORMAT_HINT}")
        files = self.files
        if not self.exempt and (files.forgotten or files.author is not None):
            previous = await asyncio.to_thread(_current_text, path)
            refusal = files.forgotten.refusal(content, previous) if files.forgotten else None
            if refusal is not None:
                raise ToolError(f"{path} was not saved: {refusal}")
            if files.author is not None:
                content = await asyncio.to_thread(_stamped, content, previous, files, path)
            files.originals.setdefault(path.resolve(), previous)
            await files.write_text(path, content)
            if files.author is not None and files.author.versions_at_write:
                await asyncio.to_thread(
                    _versioned, self.root, path, content, previous, files.author
                )
            return
        await files.write_text(path, content)


def _versioned(root: Path, path: Path, content: str, previous: str | None, author: Author) -> None:
    """Record the new version of the memory at ``path`` (the root lock is held)."""
    from cairn.memory.trust.versions import record_version

    relative = os.path.relpath(path.resolve(), root.resolve())
    record_version(
        root,
        Path(relative).as_posix(),
        content,
        previous=previous,
        operation=author.by,
        now=author.clock(),
        session_id=author.session_id,
        why=author.why,
    )


def _stamped(content: str, previous: str | None, files: MemoryFiles, path: Path) -> str:
    """``content`` with its provenance (git and the evidence files are read: a worker thread)."""
    from cairn.memory.trust.provenance import TaskStatusRefused, stamp

    assert files.author is not None
    try:
        stamped = stamp(content, previous=previous, author=files.author, path=path)
    except TaskStatusRefused as refused:
        raise ToolError(f"{path} was not saved: {refused}") from None
    files.notes.extend(stamped.notes)
    return stamped.content


def _current_text(path: Path) -> str | None:
    """The text ``path`` holds now (None when it does not exist or cannot be read)."""
    try:
        return read_regular_bytes(path, limit=MAX_TEXT_FILE_BYTES).decode("utf-8", "replace")
    except OSError:
        return None


def _write_target(args: Mapping[str, Any], ctx: ToolContext) -> tuple[Path, Path]:
    raw = args.get("file_path")
    if not isinstance(raw, str):
        raise ToolError("file_path is required")
    path = ctx.resolve(raw, write=True)
    for root in ctx.writable_roots or ():
        real_root = root.resolve()
        if path == real_root or real_root in path.parents:
            return path, real_root
    raise ToolError(f"{raw}: not inside a memory folder")


def memory_agent_registry(
    *,
    allow_shell: bool = True,
    allowed_names: Sequence[str] = (),
    forgotten: ForgottenFacts | None = None,
    author: Author | None = None,
) -> tuple[ToolRegistry, MemoryFiles]:
    """The memory agents' tools and the file system their writes go through (refusing the
    facts in ``forgotten``, stamping ``author``'s provenance)."""
    files = MemoryFiles(forgotten=forgotten, author=author)
    names = [n for n in MEMORY_AGENT_TOOLS if allow_shell or n != ToolName.SHELL]
    base = default_registry().subset(names)
    allowed = frozenset(allowed_names)
    return ToolRegistry(_Guarded(tool, files, allowed) for tool in base), files


def memory_agent_context(
    *,
    workspace: Path,
    writable: Sequence[Path],
    readable: Sequence[Path],
    files: MemoryFiles,
    abort: AbortSignal,
    session_id: str = "",
) -> ToolContext:
    """A tool context that may read ``readable`` and write ``writable`` (never ``pinned/``).

    Its read-only shell also runs in a read-only sandbox (nothing writable, no network, only
    these roots visible under ``$CAIRN_HOME``) when bubblewrap is present.
    """
    from cairn.tools.sandbox import read_only_policy

    roots = list(dict.fromkeys([*writable, *readable]))
    return ToolContext(
        workspace=workspace,
        abort=abort,
        fs=files,
        session_id=session_id,
        writable_roots=list(writable),
        readable_roots=roots,
        protected_subdirs=(PINNED_FOLDER,),
        sandbox=read_only_policy(workspace, roots),
    )
