"""The main agent's own memory writes: ``/remember``, and memories the model saves itself.

The session's ``read_file``, ``write_file`` and ``edit`` are wrapped (:meth:`MemoryWrites.wrapped`).
A call whose file lies in a memory folder (project or user memory) runs under the memory agents'
rules; every other call is the tool as it was, inside the workspace:

- the memory folders are the only place beyond the workspace the main agent may read or write,
  and only for that call;
- one Markdown memory per file, never ``MEMORY.md``, ``pinned/`` or a dot name; the content must
  be a complete memory (front matter with a ``name``, a ``description`` and a known ``type``),
  checked before anything is written; an existing memory is overwritten only after it was read;
- the write is atomic, with the memory folders' cross-process locks held; then the ``MEMORY.md``
  indexes are rebuilt, the audit trail gets a ``remember`` line and the session shows what was
  saved (:class:`~cairn.vocabulary.events.MemoryChanged`);
- in a turn the user started with ``/remember``, a memory write needs no approval; in any other
  turn it is approved like any other edit (the approval mode and permission rules decide);
- a write stating a fact the user asked to forget (a tombstone,
  :mod:`cairn.memory.forget.tombstones`) is refused before anything is written, and the model
  told to ask the user first, unless the user restated the fact in a message written after the
  forget (:meth:`MemoryWrites.user_said`) or the turn is a ``/remember`` turn (the user's
  explicit word); such a write saved removes the tombstone.

The turn's Extract is then skipped (``memory_tool``): the turn already saved what it meant to.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.memory.wrapped_tool import WrappedTool
from cairn.tools.base import (
    ConfirmationKind,
    FileDiff,
    Location,
    Tool,
    ToolContext,
    ToolError,
    ToolResult,
)
from cairn.values import Value, replace
from cairn.vocabulary.events import MemoryChanged
from cairn.vocabulary.tool_names import ToolName

if TYPE_CHECKING:
    from cairn.memory.background.agent_tools import MemoryFiles
    from cairn.memory.document import MemoryScope
    from cairn.memory.manager import MemoryManager
    from cairn.tools.registry import ToolRegistry

__all__ = ["MEMORY_TOOLS", "MemoryWrites"]

# The main agent's tools that reach memory.
MEMORY_TOOLS = (ToolName.READ_FILE, ToolName.WRITE_FILE, ToolName.EDIT)
_WRITE_TOOLS = frozenset({ToolName.WRITE_FILE, ToolName.EDIT})


class _Target(Value):
    path: Path  # resolved
    root: Path  # resolved memory root holding it
    scope: MemoryScope


class MemoryWrites:
    """One session's memory reads and writes through its own tools (see the module docstring).

    ``manager`` gives the session's memory manager, or None while managed memory is off;
    ``asked`` says whether the running turn is one the user started with ``/remember``;
    ``turn`` the number of the session's running turn (the memories' provenance records it).
    """

    def __init__(
        self,
        manager: Callable[[], MemoryManager | None],
        *,
        session_id: str,
        asked: Callable[[], bool],
        turn: Callable[[], int | None] = lambda: None,
    ) -> None:
        self._manager = manager
        self._session_id = session_id
        self.asked = asked
        self.turn = turn
        self._files: MemoryFiles | None = None
        self._changes: list[MemoryChanged] = []
        self.said: list[tuple[float, str]] = []  # (when, text) of each message the user wrote

    def user_said(self, text: str) -> None:
        """The user wrote ``text`` now (a prompt, or text typed while a turn runs): a message
        restating a forgotten fact after its forget lets the agent save it again."""
        if not text.strip():
            return
        manager = self._manager()
        self.said.append((manager.clock() if manager is not None else time.time(), text))

    def wrapped(self, registry: ToolRegistry) -> ToolRegistry:
        """``registry`` with ``read_file``, ``write_file`` and ``edit`` made memory-aware (the
        other tools, and the order, as they were)."""
        from cairn.tools.registry import ToolRegistry

        return ToolRegistry(
            _MemoryAware(tool, self) if tool.name in MEMORY_TOOLS else tool for tool in registry
        )

    def drain(self) -> list[MemoryChanged]:
        """What was saved since the last drain, for the session to show."""
        changes, self._changes = self._changes, []
        return changes

    @property
    def files(self) -> MemoryFiles:
        """What this session's agent read and wrote in memory (for the read-before-write rule)."""
        if self._files is None:
            from cairn.memory.background.agent_tools import MemoryFiles

            self._files = MemoryFiles()
        return self._files

    def target(self, args: Mapping[str, Any], ctx: ToolContext) -> _Target | None:
        """The memory file a call's ``file_path`` names, or None when it is not in memory."""
        manager = self._manager()
        raw = args.get("file_path")
        if manager is None or not manager.enabled or not isinstance(raw, str) or not raw.strip():
            return None
        candidate = Path(raw).expanduser()
        if not candidate.is_absolute():
            candidate = ctx.workspace / candidate
        path = Path(os.path.realpath(candidate))
        for scope, root in manager.root_map().items():
            real_root = Path(os.path.realpath(root))
            if real_root in path.parents:
                return _Target(path, real_root, scope)
        return None

    def context(self, ctx: ToolContext, target: _Target) -> ToolContext:
        """``ctx`` allowed into ``target``'s memory folder only, ``pinned/`` protected."""
        from cairn.memory.paths import PINNED_FOLDER

        return replace(
            ctx,
            writable_roots=[target.root],
            readable_roots=[target.root],
            protected_subdirs=(PINNED_FOLDER,),
        )

    async def read(self, tool: Tool, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        from cairn.memory.background.agent_tools import RecordingReads

        return await tool.execute(args, replace(ctx, fs=RecordingReads(self.files)))

    async def write(
        self, tool: Tool, args: Mapping[str, Any], ctx: ToolContext, target: _Target
    ) -> ToolResult:
        """The memory write, then the index, the audit line and the change to show."""
        from cairn.memory.background.agent_tools import guarded_write

        manager = self._manager()
        if manager is None:
            return ToolResult(error="Managed memory is off; nothing was saved.")
        from cairn.memory.trust.provenance import Author

        existed = target.path.exists()
        asked = self.asked()
        self.files.author = Author(
            "remember" if asked else "agent",
            self._session_id,
            self.turn(),
            manager.workspace,
            manager.roots.project,
            manager.clock,
            "asked with /remember" if asked else "saved by the session's agent",
        )
        # A fact the user asked to forget is refused unless the user restated it since (or
        # asked with /remember: their explicit word, which lifts its tombstone in any case).
        forgotten = None
        if not asked:
            from cairn.memory.forget.tombstones import SESSION_REFUSAL, ForgottenFacts

            forgotten = await asyncio.to_thread(
                ForgottenFacts.load,
                manager.root_paths(),
                said=list(self.said),
                refusal_text=SESSION_REFUSAL,
            )
        self.files.forgotten = forgotten
        result = await guarded_write(tool, args, ctx, self.files, target.path, target.root)
        if not result.ok:
            return result
        try:
            change = await manager.background.record_remember(
                self._session_id, target.path, created=not existed, forgotten=forgotten
            )
        except Exception as error:  # saved; only the index lags (`cairn memory reindex`)
            return result.noted(f" (the memory index was not rebuilt: {error})")
        self._changes.append(change)
        return result


class _MemoryAware(WrappedTool):
    """A built-in tool that follows the memory rules when its file is in a memory folder."""

    def __init__(self, inner: Tool, writes: MemoryWrites) -> None:
        super().__init__(inner)
        self.writes = writes

    def _in_memory(
        self, args: Mapping[str, Any], ctx: ToolContext
    ) -> tuple[_Target, ToolContext] | None:
        target = self.writes.target(args, ctx)
        return None if target is None else (target, self.writes.context(ctx, target))

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        found = self._in_memory(args, ctx)
        if found is None:
            return self.inner.confirmation(args, ctx)
        if self.name in _WRITE_TOOLS and self.writes.asked():
            return None  # the user asked for this memory write (/remember)
        return self.inner.confirmation(args, found[1])

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        found = self._in_memory(args, ctx)
        return self.inner.locations(args, ctx if found is None else found[1])

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff | None:
        found = self._in_memory(args, ctx)
        return await self.inner.preview(args, ctx if found is None else found[1])

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        found = self._in_memory(args, ctx)
        if found is None:
            return await self.inner.execute(args, ctx)
        target, memory_ctx = found
        try:
            if self.name in _WRITE_TOOLS:
                return await self.writes.write(self.inner, args, memory_ctx, target)
            return await self.writes.read(self.inner, args, memory_ctx)
        except ToolError as error:
            return ToolResult(error=str(error))
