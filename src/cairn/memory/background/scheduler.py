"""When Extract and Dream run on one memory space: the scheduler behind the memory manager.

- :meth:`BackgroundScheduler.schedule_extract` runs one extraction of the space at a time; a
  request arriving meanwhile waits in a single slot, where the newest replaces older ones. A
  turn whose own agent wrote memory is not extracted (its writes are indexed instead; one it
  wrote past the memory guard that states a forgotten fact the user did not state again goes
  to the trash, :mod:`cairn.memory.forget.tombstones`).
- :meth:`BackgroundScheduler.schedule_dream` checks Dream's gates in the background and runs it;
  :meth:`BackgroundScheduler.run_dream_now` skips every gate but the lock.
- An extraction cut short (a shutdown) is noted and run by the next session from its recording;
  a conversation rewind moves the extract cursor back.
- :meth:`BackgroundScheduler.drain` waits for the tasks (headless); every task leaves a record.

Its state belongs to the space: everything scheduled through one manager writes the same memory
roots, so there is one extraction slot and one Dream per space, whichever folder of the project
the session runs in. What it uses of the manager is :class:`SchedulerHost`.
"""

from __future__ import annotations

import asyncio
import os
import time
from collections.abc import Awaitable, Callable, Coroutine, Sequence
from collections.abc import Set as AbstractSet
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol

from cairn.content import Content
from cairn.debug_log import get_logger
from cairn.memory.background.turn_writes import turn_wrote_memory
from cairn.memory.telemetry import emit_dream, emit_extract
from cairn.vocabulary.events import Notice

if TYPE_CHECKING:
    from cairn.memory.background.dream.gates import ScanClock
    from cairn.memory.background.dream.run import DreamReport
    from cairn.memory.background.extract import ExtractOutcome, ExtractRequest
    from cairn.memory.background.tasks import (
        MemoryRuntime,
        MemorySpace,
        MemoryTask,
        TaskBook,
        TaskStatus,
    )
    from cairn.memory.forget.tombstones import ForgottenFacts
    from cairn.memory.forget.trash import TrashedWrite
    from cairn.memory.paths import MemoryRoots
    from cairn.vocabulary.events import MemoryChanged, MemoryOperation, MemoryRef

    class SchedulerHost(Protocol):
        """What the scheduler uses of its memory manager."""

        roots: MemoryRoots
        clock: Callable[[], float]

        @property
        def enabled(self) -> bool: ...

        def space(self) -> MemorySpace: ...

        def root_paths(self) -> list[Path]: ...

        def describe_change(
            self,
            operation: MemoryOperation,
            labels: Sequence[str],
            *,
            created: AbstractSet[str] = frozenset(),
            removed: Sequence[MemoryRef] = (),
        ) -> MemoryChanged: ...

        def dream_change(self, report: DreamReport) -> MemoryChanged: ...

        def memory_changed(self) -> None:
            """The memory files changed (the system prompt's index is stale)."""
            ...

        async def ready(self) -> None:
            """Until the store's warm-up has ended (nothing else may use the store before)."""
            ...

        async def announce(
            self, session_id: str, change: MemoryChanged | Notice | None
        ) -> None: ...

        def lift_tombstones(self, paths: Sequence[Path]) -> str: ...


__all__ = ["BackgroundScheduler", "Progress"]

_log = get_logger("MEMORY")

Progress = Callable[[str], Awaitable[None]]


class BackgroundScheduler:
    """Extract and Dream of one memory space (see the module docstring)."""

    def __init__(self, host: SchedulerHost) -> None:
        self.host = host
        self._book: TaskBook | None = None
        self._extracting = False
        self._queued: tuple[ExtractRequest, MemoryTask] | None = None  # the one trailing slot
        self._dreaming = False
        self._scans: ScanClock | None = None
        self._rewinds: dict[str, tuple[int, int]] = {}  # session -> (rewinds so far, length)
        self._remembered: dict[str, set[str]] = {}  # session id -> paths /remember recorded
        self._failures_said: set[str] = set()  # sessions told their memory was not saved
        self._handed_off: list[str] = []  # sessions whose extraction a worker is to run

    @property
    def _tasks(self) -> TaskBook:
        """The task records, created when the first task is scheduled."""
        if self._book is None:
            from cairn.memory.background.tasks import TaskBook

            self._book = TaskBook()
        return self._book

    def recent_tasks(self) -> list[MemoryTask]:
        """Records of recent Extract and Dream tasks, oldest first."""
        return self._book.records() if self._book is not None else []

    async def drain(self, timeout: float, *, extract_only: bool = False) -> bool:
        """Wait up to ``timeout`` seconds for running and queued tasks; True when done.

        ``extract_only`` waits for extractions (and the index rebuild of a turn that wrote
        memory itself) but not for a Dream, which may run for minutes and is safe to interrupt.
        """
        if self._book is None:
            return True  # nothing was ever scheduled
        names = ("memory-extract", "memory-remember") if extract_only else None
        return await self._book.drain(timeout, names=names)

    def _start(
        self, runtime: MemoryRuntime | None, coro: Coroutine[Any, Any, Any], *, name: str
    ) -> asyncio.Task[Any]:
        """Run ``coro`` in the background once the store's warm-up is over: a fresh machine's
        first turn may end before it (its Recall asked the database meanwhile)."""
        return self._tasks.start(runtime, _when_ready(self.host, coro), name=name)

    # ----- Extract -----

    def schedule_extract(
        self,
        *,
        project_root: Path,
        session_id: str,
        history: Sequence[Content],
        runtime: MemoryRuntime,
        hand_off: bool = False,
        said: Sequence[tuple[float, str]] = (),
        asked: bool = False,
    ) -> None:
        """Extract from a finished turn in the background; returns at once. ``hand_off``
        (``cairn -p``): not here; the session is noted pending and listed for a worker process
        (:meth:`take_handed_off`, :meth:`extract_handed_off`). ``said`` (``(when, text)`` of
        what the session's user wrote) and ``asked`` (a ``/remember`` turn) decide whether a
        memory the turn's agent wrote past the memory guard may state a forgotten fact."""
        if not self.host.enabled:
            return
        entries = [entry.shallow_copy() for entry in history]
        record = self._tasks.new("extract", session_id)
        wrote = turn_wrote_memory(entries, self.host.root_paths(), base=Path(project_root))
        recorded = self._remembered.pop(session_id, set())
        if wrote:
            record.finish("skipped", reason="memory_tool")
            emit_extract(
                trigger="auto", status="skipped", skipped_reason="memory_tool",
                touched_topics=[], duration_ms=0.0,
            )  # fmt: skip
            unrecorded = [path for path in wrote if os.path.realpath(path) not in recorded]
            if unrecorded:  # written around the memory guard: index them now
                coro = self._record_session_writes(
                    unrecorded, session_id, said=list(said), asked=asked
                )
                self._start(runtime, coro, name="memory-remember")
            return
        if hand_off:
            record.finish("skipped", reason="handed_off")
            self._note_pending(session_id)  # until the worker has extracted it
            self._handed_off.append(session_id)
            return
        from cairn.memory.background.extract import ExtractRequest

        request = ExtractRequest(Path(project_root), session_id, entries, runtime)
        if self._extracting:
            if self._queued is not None:
                self._queued[1].finish("superseded")
            self._queued = (request, record)
            return
        self._extracting = True
        retry = self._take_pending(session_id)
        loop = self._extract_loop(request, record, retry=retry)
        self._start(runtime, loop, name="memory-extract")

    def take_handed_off(self) -> list[str]:
        """The sessions whose extraction :meth:`schedule_extract` handed off since last asked."""
        handed, self._handed_off = self._handed_off, []
        return handed

    def extract_here(self, session_id: str, runtime: MemoryRuntime) -> None:
        """Extract a handed-off session in this process after all (no worker could start)."""
        coro = self.extract_handed_off(session_id, runtime)
        self._start(runtime, coro, name="memory-extract")

    async def extract_handed_off(self, session_id: str, runtime: MemoryRuntime) -> None:
        """Extract a handed-off session from its recording, as a turn's extraction runs; it
        leaves the pending list once extracted, and stays on it when cut short or failed."""
        from cairn.memory.background.extract import ExtractRequest
        from cairn.memory.background.pending import drop_pending

        record = self._tasks.new("extract", session_id)
        history = await asyncio.to_thread(_recorded_history, runtime.chats_dir, session_id)
        request = ExtractRequest(runtime.project_root, session_id, history, runtime)
        retry = self._take_pending(session_id)  # an earlier one cut short, as a turn's does
        if retry is not None:
            await self._retry_pending(retry, request)
        if not history:
            record.finish("skipped", reason="no_recording")
        else:
            await self._extract_once(request, record)
        if record.status == "failed":
            return  # still pending: the next extraction in the project tries again
        try:
            drop_pending(self.host.roots.state_dir, session_id, now=self.host.clock())
        except OSError as error:  # at worst the next extraction finds nothing new in it
            _log.warning(f"could not note the extraction done: {error!r}")

    async def _extract_loop(
        self, request: ExtractRequest, record: MemoryTask, *, retry: str | None = None
    ) -> None:
        try:
            if retry is not None:
                await self._retry_pending(retry, request)
            while True:
                await self._extract_once(request, record)
                if self._queued is None:
                    return
                (request, record), self._queued = self._queued, None
        finally:
            self._extracting = False
            dropped, self._queued = self._queued, None
            if dropped is not None:
                dropped[1].finish("cancelled")
                self._note_pending(dropped[0].session_id)

    async def _extract_once(
        self, request: ExtractRequest, record: MemoryTask, *, retry: bool = False
    ) -> None:
        rewinds_before = self._rewinds.get(request.session_id, (0, 0))[0]
        try:
            await self._run_extract_once(request, record, retry=retry)
        finally:
            rewound = self._rewinds.get(request.session_id)
            if rewound is not None and rewound[0] != rewinds_before:
                await self._clamp_cursor(request.session_id, rewound[1])  # a pre-rewind history

    async def _run_extract_once(
        self, request: ExtractRequest, record: MemoryTask, *, retry: bool = False
    ) -> None:
        from cairn.memory.background.extract import ExtractOutcome, run_extract

        record.status = "running"
        started = time.monotonic()
        try:
            outcome = await run_extract(request, self.host.space())
        except asyncio.CancelledError:
            record.finish("cancelled")
            self._note_pending(request.session_id)
            emit_extract(
                trigger="auto", status="cancelled", skipped_reason=None, touched_topics=[],
                duration_ms=(time.monotonic() - started) * 1000,
            )  # fmt: skip
            raise
        except Exception as error:  # a lock timeout, a full disk: reported, never raised
            _log.warning(f"extraction failed: {error!r}")
            outcome = ExtractOutcome("failed", error=f"{type(error).__name__}: {error}")
        record.files = [f.label for f in outcome.files]
        record.finish(outcome.status, reason=outcome.skipped_reason, detail=outcome.error)
        if outcome.status == "failed":
            await self._extraction_failed(request.session_id, outcome, retry=retry)
        if outcome.files:
            self.host.memory_changed()
            labels = [f.label for f in outcome.files]
            change = self.host.describe_change("extract", labels, created=set(outcome.created))
            await self.host.announce(request.session_id, change)
        emit_extract(
            trigger="auto",
            status=outcome.status,
            skipped_reason=outcome.skipped_reason,
            touched_topics=outcome.touched_topics,
            duration_ms=(time.monotonic() - started) * 1000,
            agent_status=outcome.agent_status,
            files=len(outcome.files),
        )

    # ----- a conversation rewind (cairn.session.rewind) -----

    async def conversation_rewound(self, session_id: str, history_length: int) -> None:
        """The session's conversation now has ``history_length`` entries (a rewind cut it).

        Extract must neither skip the turns typed from here nor repeat the ones kept: the
        cursor moves back to the rewind point, a waiting request holding the rewound turns is
        dropped, and an extraction running now has its cursor clamped again when it ends.
        """
        if self._queued is not None and self._queued[0].session_id == session_id:
            self._queued[1].finish("superseded")
            self._queued = None
        count = self._rewinds.get(session_id, (0, 0))[0] + 1
        self._rewinds[session_id] = (count, history_length)
        await self._clamp_cursor(session_id, history_length)

    async def _clamp_cursor(self, session_id: str, history_length: int) -> None:
        from cairn.memory.background.cursor import clamp_cursor
        from cairn.memory.store.locks import hold_roots_async

        host = self.host
        try:
            async with hold_roots_async(host.root_paths()):
                clamp_cursor(host.roots.state_dir, session_id, history_length, now=host.clock())
        except Exception as error:  # best effort: at worst Extract looks at a turn again
            _log.warning(f"moving the extract cursor back after a rewind failed: {error!r}")

    # ----- extractions cut short (a shutdown) or failed, run by the next session -----

    async def _extraction_failed(
        self, session_id: str, outcome: ExtractOutcome, *, retry: bool
    ) -> None:
        """Queue the session for the next extraction (a retry that failed too is given up) and
        tell it once that its memory was not saved."""
        if not retry:
            self._note_pending(session_id)
        if session_id in self._failures_said:
            return
        self._failures_said.add(session_id)
        why = _EXTRACT_STOPS.get(outcome.agent_status or "") or f"failed ({outcome.error})"
        later = (
            "It was given up after a second try."
            if retry
            else "The next extraction in this project tries again."
        )
        text = f"Memory was not saved: the extraction agent {why}. {later}"
        await self.host.announce(session_id, Notice("warning", text, "memory"))

    def _note_pending(self, session_id: str) -> None:
        from cairn.memory.background.pending import add_pending

        try:
            add_pending(self.host.roots.state_dir, session_id, now=self.host.clock())
        except OSError as error:  # best effort: the user's words stay in the recording
            _log.warning(f"could not note the unfinished extraction: {error!r}")

    def _take_pending(self, session_id: str) -> str | None:
        from cairn.memory.background.pending import take_pending

        host = self.host
        try:
            return take_pending(host.roots.state_dir, besides=session_id, now=host.clock())
        except OSError as error:
            _log.warning(f"could not read the unfinished extractions: {error!r}")
            return None

    async def _retry_pending(self, session_id: str, current: ExtractRequest) -> None:
        """Extract a session whose extraction was cut short, from its recording."""
        from cairn.memory.background.extract import ExtractRequest

        chats = current.runtime.chats_dir  # a daemon tenant's recordings are its own
        history = await asyncio.to_thread(_recorded_history, chats, session_id)
        if not history:
            return
        request = ExtractRequest(current.project_root, session_id, history, current.runtime)
        await self._extract_once(request, self._tasks.new("extract", session_id), retry=True)

    # ----- memory the session's own agent wrote (/remember, or a write of its own) -----

    async def record_remember(
        self,
        session_id: str,
        path: Path,
        *,
        created: bool,
        forgotten: ForgottenFacts | None = None,
    ) -> MemoryChanged:
        """The session's own agent wrote the memory at ``path``: rebuild the indexes and note
        it in the audit trail (roots locked), and say what changed.

        ``forgotten``: the tombstones the write was checked against (a write of the agent's
        own): the ones the user restated and it saved are removed; None (``/remember``, the
        user's explicit word): every tombstone the memory states is removed.
        """
        from cairn.memory.background.extract import record_written
        from cairn.memory.background.tasks import written_files
        from cairn.memory.forget.tombstones import lifted_detail
        from cairn.memory.store.locks import hold_roots_async

        host = self.host
        await host.ready()
        space = host.space()
        files = written_files([path], space.writable_roots())
        async with hold_roots_async(host.root_paths()):
            if forgotten is None:
                detail = host.lift_tombstones([path])
            else:
                detail = lifted_detail(forgotten.release())
            record_written(space, files, operation="remember", session_id=session_id, detail=detail)
        self._remembered.setdefault(session_id, set()).add(os.path.realpath(path))
        host.memory_changed()
        labels = [f.label for f in files]
        return host.describe_change("remember", labels, created=set(labels) if created else set())

    async def _record_session_writes(
        self,
        paths: Sequence[Path],
        session_id: str,
        *,
        said: Sequence[tuple[float, str]] = (),
        asked: bool = False,
    ) -> None:
        """The turn's own agent wrote memory past the memory guard: index it and note it in
        the audit trail. Outside a ``/remember`` turn (``asked``), a memory stating a forgotten
        fact no message of ``said`` restated after its forget goes to the trash, the audit
        trail and the session told why; its tombstone stays."""
        from cairn.memory.background.extract import record_written
        from cairn.memory.background.tasks import written_files
        from cairn.memory.forget.tombstones import ForgottenFacts, lifted_detail
        from cairn.memory.forget.trash import trash_forgotten
        from cairn.memory.store.history import HistoryEntry, append_history
        from cairn.memory.store.locks import hold_roots_async

        host = self.host
        space = host.space()
        roots = space.writable_roots()
        moved: list[TrashedWrite] = []
        try:
            async with hold_roots_async(host.root_paths()):
                now = host.clock()
                if asked:  # the user's explicit word: the tombstones of what they state go
                    detail = host.lift_tombstones(paths)
                else:
                    forgotten = ForgottenFacts.load(host.root_paths(), said=said)
                    moved = trash_forgotten(roots, paths, forgotten, now=now, session_id=session_id)
                    detail = lifted_detail(forgotten.release())
                gone = {m.path for m in moved}
                kept = written_files([p for p in paths if p not in gone], roots)
                record_written(
                    space, kept, operation="remember", session_id=session_id, detail=detail
                )
                for m in moved:
                    why = f"moved to the trash: {m.why}"
                    entry = HistoryEntry(now, "remember", m.scope, [m.relative_path],
                                         session_id, why, 1)  # fmt: skip
                    append_history(m.root, entry)
                if moved and not kept:
                    space.rebuild_indexes()
        except Exception as error:  # best effort: `cairn memory reindex` catches up
            _log.warning(f"indexing the session's memory writes failed: {error!r}")
            return
        host.memory_changed()
        for m in moved:
            text = (
                f"Memory not kept: {m.scope}:{m.relative_path} stated a fact you asked to forget "
                f"on {m.tombstone.date} ({m.tombstone.title!r}) again; it was moved to the trash "
                "(`cairn memory restore` brings it back). Say it again to keep it."
            )
            await host.announce(session_id, Notice("warning", text, "memory"))

    # ----- Dream -----

    def schedule_dream(self, *, session_id: str, runtime: MemoryRuntime) -> None:
        """Check Dream's gates and, when they all pass, consolidate in the background.

        Returns at once: the gates (which read meta.json and may scan the recordings) run in
        the background task too.
        """
        if not self.host.enabled:
            return
        record = self._tasks.new("dream", session_id)
        coro = self._auto_dream(session_id, runtime, record)
        self._start(runtime, coro, name="memory-dream")

    async def _auto_dream(
        self, session_id: str, runtime: MemoryRuntime, record: MemoryTask
    ) -> None:
        from cairn.memory.background.dream.gates import ScanClock, auto_dream_gate

        space = self.host.space()
        if self._scans is None:
            self._scans = ScanClock()
        reason = auto_dream_gate(
            runtime=runtime, space=space, session_id=session_id, scans=self._scans
        )
        if reason is None and self._consolidation_held(space):
            reason = "locked"
        if reason is None and self._dreaming:
            reason = "running"
        if reason is not None:
            record.finish("skipped", reason=reason)
            emit_dream(
                trigger="auto", status="skipped", skipped_reason=reason, touched_topics=[],
                duration_ms=0.0,
            )  # fmt: skip
            return
        await self._dream(session_id, runtime, record, trigger="auto", progress=None)

    def _consolidation_held(self, space: MemorySpace) -> bool:
        from cairn.memory.background.dream.gates import consolidation_lock

        lock = consolidation_lock(space)
        return lock.holder(time.time(), clean=False, ours_is_stale=not self._dreaming) is not None

    async def run_dream_now(
        self, *, session_id: str, runtime: MemoryRuntime, progress: Progress | None = None
    ) -> DreamReport:
        """Consolidate now (``cairn memory dream``, ``/dream``): every gate but the lock skipped.

        ``progress`` is told each step as it starts. The report's ``str()`` is a summary.
        """
        from cairn.memory.background.dream.run import DreamReport

        await self.host.ready()
        record = self._tasks.new("dream", session_id, trigger="manual")
        if self._dreaming:
            record.finish("skipped", reason="locked")
            return DreamReport("skipped", "locked")
        return await self._dream(session_id, runtime, record, trigger="manual", progress=progress)

    async def _dream(
        self,
        session_id: str,
        runtime: MemoryRuntime,
        record: MemoryTask,
        *,
        trigger: Literal["auto", "manual"],
        progress: Progress | None,
    ) -> DreamReport:
        from cairn.memory.background.dream.run import DreamReport, run_dream

        self._dreaming = True
        record.status = "running"
        started = time.monotonic()
        try:
            report = await run_dream(
                runtime=runtime, space=self.host.space(), session_id=session_id, progress=progress
            )
        except asyncio.CancelledError:
            record.finish("cancelled")
            emit_dream(
                trigger=trigger, status="cancelled", skipped_reason=None, touched_topics=[],
                duration_ms=(time.monotonic() - started) * 1000,
            )  # fmt: skip
            raise
        except Exception as error:  # a lock timeout, a full disk: reported
            _log.warning(f"dream failed: {error!r}")
            report = DreamReport("failed", error=f"{type(error).__name__}: {error}")
        finally:
            self._dreaming = False
        record.files = [f"project:{p}" for p in (*report.created, *report.updated, *report.deleted)]
        record.finish(_task_status(report), reason=report.skipped_reason, detail=report.error)
        if report.changed:
            self.host.memory_changed()
            report.change = self.host.dream_change(report)
            if trigger == "auto":
                await self.host.announce(session_id, report.change)
        emit_dream(
            trigger=trigger,
            status=report.status,
            skipped_reason=report.skipped_reason,
            touched_topics=report.touched_topics,
            duration_ms=(time.monotonic() - started) * 1000,
            created=len(report.created),
            updated=len(report.updated),
            deleted=len(report.deleted),
            deduped=report.deduped,
            split=report.split,
        )
        return report


# Why the extraction agent stopped (its status), in words that follow "the extraction agent".
_EXTRACT_STOPS = {
    "loop": "was stopped by loop protection (the model kept repeating itself)",
    "max_turns": "ran out of turns (memory.agentMaxTurns)",
    "timeout": "ran out of time (memory.agentTimeoutMinutes)",
    "cut": "had an answer cut at its output bound (model.generationConfig.maxOutputTokens)",
    "stopped": "was stopped by a hook",
}


def _recorded_history(chats_dir: Path, session_id: str) -> list[Content]:
    """The model history recorded for ``session_id`` (empty when it is gone or unreadable)."""
    from cairn.recording.reader import SessionLoadError, load_session

    try:
        return load_session(chats_dir / f"{session_id}.jsonl").history
    except SessionLoadError as error:
        _log.warning(f"unfinished extraction of {session_id} given up: {error}")
        return []


def _task_status(report: DreamReport) -> TaskStatus:
    if report.status == "skipped":
        return "skipped"
    if report.status in ("failed", "cancelled"):
        return "failed" if report.status == "failed" else "cancelled"
    return "completed"


async def _when_ready(host: SchedulerHost, coro: Coroutine[Any, Any, Any]) -> Any:
    try:
        await host.ready()
    except BaseException:
        coro.close()  # never started: no "never awaited" warning
        raise
    return await coro
