"""Records of the manager's background memory tasks (Extract, Dream), and waiting for them.

A :class:`MemoryTask` is what one scheduled Extract or Dream did: queued, superseded by a newer
request, skipped (and why), completed or failed. The manager keeps the most recent ones for
inspection (``MemoryManager.recent_tasks``) and tracks the running asyncio tasks so a front end
that must not exit early (headless ``cairn -p``) can :meth:`TaskBook.drain` them.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import time
from collections import deque
from collections.abc import Callable, Collection, Coroutine, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from cairn.config.settings import Settings
from cairn.llm.types import Provider
from cairn.memory.background.pressure import AvailableMemory
from cairn.memory.document import MemoryDoc, MemoryScope
from cairn.memory.paths import TYPE_FOLDERS, MemoryRoots
from cairn.memory.store.backend import DreamLock
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.memory.trust.provenance import Author, Writer

__all__ = [
    "MAX_TASK_RECORDS",
    "MemoryRuntime",
    "MemorySpace",
    "MemoryTask",
    "TaskBook",
    "TaskKind",
    "TaskStatus",
    "WrittenFile",
    "agent_limits",
    "written_files",
]

MAX_TASK_RECORDS = 100  # finished task records kept per manager

TaskKind: TypeAlias = Literal["extract", "dream", "remember"]
TaskStatus: TypeAlias = Literal[
    "pending", "running", "completed", "skipped", "failed", "cancelled", "superseded"
]
Trigger: TypeAlias = Literal["auto", "manual"]


class MemoryRuntime(Protocol):
    """What the memory tasks use of a session runtime (:class:`cairn.session.runtime.Runtime`)."""

    @property
    def provider(self) -> Provider: ...

    @property
    def settings(self) -> Settings: ...

    @property
    def project_root(self) -> Path: ...

    @property
    def chats_dir(self) -> Path: ...

    def spawn(self, coro: Any, *, name: str) -> asyncio.Task[Any]: ...


class MemorySpace(Value):
    """What Extract and Dream work on, handed to them by the manager."""

    roots: MemoryRoots
    clock: Callable[[], float]  # seconds since the epoch (injectable for tests)
    docs: Callable[[], list[MemoryDoc]]  # every memory, current with the disk
    rebuild_indexes: Callable[[], None]  # regenerate MEMORY.md files (root locks held)
    available_memory: AvailableMemory  # for the memory-pressure gate
    dream_lock: Callable[[], DreamLock]  # Dream's cross-process lock (the backend's)
    workspace: Path | None = None  # the folder evidence paths are relative to (git root)

    def author(
        self,
        by: Writer,
        session_id: str,
        turn: int | None = None,
        *,
        why: str = "",
        versions_at_write: bool = True,
    ) -> Author:
        """Who writes memory in a run: what the memories' provenance and versions record."""
        from cairn.memory.trust.provenance import Author

        project = self.roots.project
        return Author(
            by, session_id, turn, self.workspace, project, self.clock, why, versions_at_write
        )

    def writable_roots(self, *, include_user: bool = True) -> list[tuple[MemoryScope, Path]]:
        found: list[tuple[MemoryScope, Path]] = []
        if self.roots.project is not None:
            found.append(("project", self.roots.project))
        if include_user:
            found.append(("user", self.roots.user))
        return found


class WrittenFile(Value):
    """A file a memory agent wrote, located in its memory root."""

    scope: MemoryScope
    relative_path: str  # POSIX, relative to the root
    topic: str | None  # the memory type folder it is in, if any

    @property
    def label(self) -> str:
        return f"{self.scope}:{self.relative_path}"


def written_files(
    paths: Sequence[Path], roots: Sequence[tuple[MemoryScope, Path]]
) -> list[WrittenFile]:
    """Where each written path lies: its root's scope, its relative path and its topic."""
    found: list[WrittenFile] = []
    resolved = [(scope, os.path.realpath(root)) for scope, root in roots]
    for path in paths:
        real = os.path.realpath(path)
        for scope, root in resolved:
            if real.startswith(root + os.sep):
                relative = Path(os.path.relpath(real, root)).as_posix()
                first = relative.split("/", 1)[0]
                topic = first if first in TYPE_FOLDERS and "/" in relative else None
                found.append(WrittenFile(scope, relative, topic))
                break
    return found


def agent_limits(
    settings: Settings, *, default_turns: int, default_minutes: float
) -> tuple[int, float | None]:
    """The memory agent's turn budget and time limit in seconds (None: no limit).

    ``memory.agentMaxTurns`` and ``memory.agentTimeoutMinutes`` override the defaults;
    a timeout of 0 minutes means no limit.
    """
    turns = settings.memory.agent_max_turns
    minutes = settings.memory.agent_timeout_minutes
    max_turns = turns if turns is not None and turns > 0 else default_turns
    if minutes is None or minutes < 0:
        minutes = default_minutes
    return max_turns, (minutes * 60.0 if minutes > 0 else None)


class MemoryTask(Value, frozen=False):
    id: str
    kind: TaskKind
    session_id: str
    trigger: Trigger = "auto"
    status: TaskStatus = "pending"
    skipped_reason: str | None = None
    created_at: float = field(default_factory=time.time)
    finished_at: float | None = None
    files: list[str] = field(default_factory=list)  # "scope:relpath" written or deleted
    detail: str = ""

    def finish(self, status: TaskStatus, *, reason: str | None = None, detail: str = "") -> None:
        self.status = status
        self.skipped_reason = reason
        self.finished_at = time.time()
        if detail:
            self.detail = detail


class TaskBook:
    """Task records (newest last) and the asyncio tasks still running."""

    def __init__(self, limit: int = MAX_TASK_RECORDS) -> None:
        self._records: deque[MemoryTask] = deque(maxlen=limit)
        self._running: set[asyncio.Task[Any]] = set()
        self._ids = itertools.count(1)

    def new(self, kind: TaskKind, session_id: str, *, trigger: Trigger = "auto") -> MemoryTask:
        record = MemoryTask(f"{kind}-{next(self._ids)}", kind, session_id, trigger)
        self._records.append(record)
        return record

    def records(self) -> list[MemoryTask]:
        return list(self._records)

    def start(
        self, runtime: MemoryRuntime | None, coro: Coroutine[Any, Any, Any], *, name: str
    ) -> asyncio.Task[Any]:
        """Run ``coro`` in the background (on the runtime when given, so it is cancelled at
        shutdown) and track it until it ends."""
        if runtime is not None:
            task = runtime.spawn(coro, name=name)
        else:
            task = asyncio.ensure_future(coro)
        self._running.add(task)
        task.add_done_callback(self._running.discard)
        return task

    @property
    def busy(self) -> bool:
        return bool(self._running)

    async def drain(self, timeout: float, *, names: Collection[str] | None = None) -> bool:
        """Wait until no task runs (tasks started meanwhile included), at most ``timeout`` s.

        ``names`` limits the wait to tasks started under those names (e.g. only
        ``memory-extract``). True when everything waited for finished; never cancels anything.
        """
        deadline = time.monotonic() + max(timeout, 0.0)
        while waiting := {t for t in self._running if names is None or t.get_name() in names}:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                return False
            await asyncio.wait(waiting, timeout=remaining)
        return True
