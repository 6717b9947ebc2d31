"""The memory manager of one project: one per (process, project root), shared by its sessions.

It owns the project's :class:`~cairn.memory.store.memory_store.MemoryStore` and is the one entry
point the session runtime, the agent client and ``cairn memory`` use for the system-prompt
section, Recall, Forget and the background tasks. Every session's Recall handle
(:class:`~cairn.memory.recall.lifecycle.RecallLifecycle`) calls :meth:`MemoryManager.recall`.

Background tasks (never awaited by a turn) are its scheduler's
(:class:`~cairn.memory.background.scheduler.BackgroundScheduler`, one per memory space), which
the manager fronts: :meth:`MemoryManager.schedule_extract`, :meth:`MemoryManager.schedule_dream`,
:meth:`MemoryManager.drain`. Every write into a memory root, here and in the tasks, holds that
root's cross-process lock (:mod:`cairn.memory.store.locks`) and is recorded in the root's audit
trail (:mod:`cairn.memory.store.history`).
"""

from __future__ import annotations

import contextlib
import os
import time
from collections.abc import Awaitable, Callable, Iterator, Mapping, Sequence
from collections.abc import Set as AbstractSet
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.config.settings import Settings
from cairn.content import Content
from cairn.debug_log import get_logger
from cairn.fsutil import NotRegularFile, atomic_write_text, read_regular_bytes
from cairn.memory.background.pressure import AvailableMemory, available_memory_mb
from cairn.memory.document import MemoryDoc, MemoryScope
from cairn.memory.paths import INDEX_FILE_NAME, MemoryRoots, memory_roots, workspace_folder
from cairn.memory.prompt import MemoryTier, build_auto_memory_prompt
from cairn.memory.recall.render import render_relevant_memory
from cairn.memory.store.memory_store import MemoryStore, ScanReport, ScoredDoc
from cairn.memory.store.scan import holds_memories
from cairn.memory.telemetry import emit_forget
from cairn.vocabulary.events import MemoryChanged, MemoryOperation, MemoryRef, Notice

if TYPE_CHECKING:
    import asyncio

    # Loaded on first use (the agent loop, asyncio: `cairn memory search|show` load neither).
    from cairn.abort import AbortSignal
    from cairn.llm.types import Provider
    from cairn.memory.background.dream.run import DreamReport
    from cairn.memory.background.scheduler import BackgroundScheduler, Progress
    from cairn.memory.background.tasks import MemoryRuntime, MemorySpace, MemoryTask
    from cairn.memory.forget.selection import ForgetCandidate, ForgetPlan
    from cairn.memory.forget.tombstones import Tombstone
    from cairn.memory.forget.trash import ForgetReport
    from cairn.memory.recall.query import RecallResult
    from cairn.memory.store.backend import MemoryBackend
    from cairn.memory.store.history import HistoryEntry
    from cairn.memory.store.transfer import TransferReport
    from cairn.memory.store.warm_up import WarmUp
    from cairn.memory.trust.provenance import Provenance
    from cairn.memory.trust.staleness import EvidenceCheck
    from cairn.memory.trust.versions import Version

__all__ = ["MemoryManager"]

_MAX_INDEX_BYTES = 256 * 1024  # MEMORY.md read into the prompt (the prompt keeps 25,000 chars)
_MAX_SESSION_CHECKS = 64  # sessions whose evidence hashes a manager keeps
_log = get_logger("MEMORY_RECALL")
_task_log = get_logger("MEMORY")

# (session id, what changed, or a notice about memory: an extraction that failed)
ChangeListener = Callable[[str, MemoryChanged | Notice], Awaitable[None]]


class MemoryManager:
    """System-prompt section, Recall, Forget, Extract and Dream over one project's memory."""

    def __init__(
        self,
        project_root: Path,
        *,
        settings: Settings,
        environ: Mapping[str, str] = os.environ,
        clock: Callable[[], float] = time.time,
        available_memory: AvailableMemory = available_memory_mb,
        tenant: str | None = None,
        check_postings: bool = True,
        trust_saved: bool = False,
    ) -> None:
        """``clock`` dates meta.json and drives Dream's time gates; ``available_memory`` (MiB)
        feeds the memory-pressure gate (both injectable). A daemon ``tenant`` has a memory of
        its own (folders, database namespaces). ``check_postings``, ``trust_saved``: see
        :class:`MemoryStore`."""
        self.project_root = Path(project_root)
        self.tenant = tenant
        self.settings = settings
        self.clock = clock
        self.available_memory = available_memory
        self.backend_error = ""  # why the configured backend could not be opened
        self.backend = self._open_backend(environ)
        self.roots: MemoryRoots = self.backend.roots
        # Evidence paths are relative to the folder the project memory belongs to (git root).
        self.workspace = workspace_folder(self.project_root, environ=environ)
        pulled = self.backend.ensure_pulled
        self.store = MemoryStore(self.roots, clock=clock, before_refresh=pulled,
                                 check_postings=check_postings,
                                 trust_saved=trust_saved)  # fmt: skip
        self.store.vector_sync = self.backend.vector_sync()
        self.generation = 0  # bumped whenever a task or Forget changed memory files
        self._listeners: list[ChangeListener] = []
        self._vector_tasks: set[asyncio.Task[int]] = set()  # embeddings after writes
        self._checks: dict[str, EvidenceCheck] = {}  # session id -> its evidence check

    @cached_property
    def background(self) -> BackgroundScheduler:  # Extract and Dream of this memory
        from cairn.memory.background.scheduler import BackgroundScheduler

        return BackgroundScheduler(self)

    @cached_property
    def warm_up(self) -> WarmUp:  # indexing before the first prompt
        from cairn.memory.store.warm_up import WarmUp

        return WarmUp(self.store, self.backend)

    @property
    def enabled(self) -> bool:
        """``memory.enableManagedAutoMemory``: Recall, Extract and the prompt section."""
        return self.settings.memory.enable_managed_auto_memory

    def root_map(self) -> dict[MemoryScope, Path]:
        """The available memory roots by scope (project first)."""
        roots: dict[MemoryScope, Path] = {}
        if self.roots.project is not None:
            roots["project"] = self.roots.project
        roots["user"] = self.roots.user
        return roots

    # --- telling sessions what changed ----------------------------------------------------

    def add_change_listener(self, listener: ChangeListener) -> Callable[[], None]:
        """Call ``listener`` whenever a background task (Extract, an automatic Dream) changed
        memory; returns the function that removes it. Foreground operations (Forget, restore,
        ``/dream``, ``/remember``) hand their change to the caller instead (``.change``)."""
        self._listeners.append(listener)

        def remove() -> None:
            with contextlib.suppress(ValueError):
                self._listeners.remove(listener)

        return remove

    async def announce(self, session_id: str, change: MemoryChanged | Notice | None) -> None:
        if change is None or (isinstance(change, MemoryChanged) and not change.memories):
            return
        for listener in list(self._listeners):
            try:
                await listener(session_id, change)
            except Exception as error:  # a front end's bug must not fail the memory task
                _task_log.warning(f"memory change listener failed: {error!r}")

    def memory_ref(self, scope: MemoryScope, relative: str, name: str = "") -> MemoryRef:
        """A memory as front ends show it; its title read from the store when ``name`` is not
        given (after a write, the store is current)."""
        root = self.root_map().get(scope)
        path = (root / relative) if root is not None else Path(relative)
        if not name:
            doc = self.store.get(path)
            name = doc.title if doc is not None else Path(relative).stem
        return MemoryRef(name, scope, relative, str(path))

    def describe_change(
        self,
        operation: MemoryOperation,
        labels: Sequence[str],
        *,
        created: AbstractSet[str] = frozenset(),
        removed: Sequence[MemoryRef] = (),
    ) -> MemoryChanged:
        """``labels`` (``scope:relpath``) as saved (when in ``created``) or updated memories."""
        saved: list[MemoryRef] = []
        updated: list[MemoryRef] = []
        for label in labels:
            scope, relative = label.split(":", 1)
            ref = self.memory_ref(scope, relative)  # type: ignore[arg-type]
            (saved if label in created else updated).append(ref)
        return MemoryChanged(operation, tuple(saved), tuple(updated), tuple(removed))

    # --- system prompt ---------------------------------------------------------------------

    def system_prompt_section(self) -> str:
        """The ``# auto memory`` section; ``""`` when managed memory is off."""
        if not self.enabled:
            return ""
        tiers = [
            MemoryTier(scope, root, self._index_text(scope, root))
            for scope, root in self.root_map().items()
        ]
        return build_auto_memory_prompt(tiers)

    def _index_text(self, scope: MemoryScope, root: Path) -> str:
        path = root / INDEX_FILE_NAME
        try:
            return read_regular_bytes(path, limit=_MAX_INDEX_BYTES).decode("utf-8")
        except FileNotFoundError:
            if not holds_memories(root):  # e.g. a root only a lock file created
                return ""
        except NotRegularFile as exc:  # a FIFO would hang every prompt: never opened
            _log.warning(f"{path}: not loaded into the prompt ({exc.strerror})")
        except (OSError, UnicodeDecodeError) as exc:
            _log.warning(f"{path}: not loaded into the prompt ({exc})")
            return ""
        # No usable index (memories copied in by hand, a FIFO): show what it would say.
        from cairn.memory.store.index_file import build_index_text

        return build_index_text([doc for doc in self.docs() if doc.scope == scope])

    async def ready(self) -> None:
        """Until the store's warm-up has ended (:attr:`warm_up`)."""
        await self.warm_up.wait()

    # --- reading ---------------------------------------------------------------------------

    def refresh(self) -> ScanReport:
        return self.store.refresh()

    def docs(self) -> list[MemoryDoc]:
        """Every memory, project first, each scope newest first (after a refresh)."""
        self.store.refresh()
        return self.store.docs()

    def iter_docs(self) -> tuple[int, Iterator[MemoryDoc]]:
        """How many memories there are, and :meth:`docs` one at a time: a long listing starts
        at once instead of after checking and building every document
        (:meth:`MemoryStore.listing`)."""
        return self.store.listing()

    def search(self, query: str, *, limit: int = 10) -> list[ScoredDoc]:
        """The fast lexical ranking, as Recall's fast phase uses it."""
        self.store.refresh()
        return self.store.rank(query, limit=limit)

    def find(self, reference: str) -> list[MemoryDoc]:
        """Memories named by ``reference`` (a path or a title: :meth:`MemoryStore.find`, which
        checks the disk itself: a path without checking every memory)."""
        return self.store.find(reference)

    def render(self, docs: Sequence[MemoryDoc]) -> str:
        """The ``## Relevant memory`` block for ``docs``, aged by this manager's clock."""
        return render_relevant_memory(docs, now=self.clock())

    def reindex(self, *, on_step: Callable[[str], None] | None = None) -> ScanReport:
        """Re-read changed files, regenerate every ``MEMORY.md`` and persist the index.

        ``on_step`` is told the name of each step as it starts (for progress display).
        """
        step = on_step or (lambda _name: None)
        step("Reading memory files")
        report = self.store.refresh()
        step("Writing MEMORY.md")
        with _hold_roots(self.root_paths()):
            self.store.rebuild_index_files()
        if self.settings.memory.semantic_candidates:
            step("Computing the vectors of semantic candidates")
            from cairn.memory.recall.semantic import compute_vectors

            compute_vectors(self.store)
        step("Saving the search index")
        self.store.save()
        return report

    def _vectors_after_write(self) -> None:
        """After a write: embed the changed memories in the background, when this process has
        the model loaded already (a process that has not needed it leaves the few new memories
        to the next Recall, which embeds what is missing in milliseconds)."""
        from cairn.memory.store.embedding import model_loaded

        if not (self.settings.memory.semantic_candidates and model_loaded()):
            return
        import asyncio

        from cairn.memory.recall.semantic import update_vectors

        task = asyncio.get_running_loop().create_task(
            update_vectors(self.store), name="cairn-memory-vectors"
        )
        self._vector_tasks.add(task)
        task.add_done_callback(self._vector_tasks.discard)

    def close(self) -> None:
        """Persist the index, stop watching the roots, close the backend's connections."""
        self.store.save()
        self.store.close()
        if self.store.vector_sync is not None:
            self.store.vector_sync.close()
        self.backend.close()

    def _open_backend(self, environ: Mapping[str, str]) -> MemoryBackend:
        from cairn.memory.store.backend import FileBackend, MemoryBackendError, open_backend

        try:
            return open_backend(
                self.settings, self.project_root, environ=environ, tenant=self.tenant
            )
        except MemoryBackendError as error:  # a turn never fails for memory: files, and say so
            from cairn.memory.store.backend import tenant_environ

            self.backend_error = str(error)
            _task_log.warning(f"{error}; using the memory files on this machine instead")
            if self.tenant is not None:
                environ = tenant_environ(environ, self.tenant)
            return FileBackend(memory_roots(self.project_root, environ=environ))

    # --- recall ----------------------------------------------------------------------------

    async def recall(
        self,
        query: str,
        *,
        provider: Provider | None,
        excluded: AbstractSet[str],
        recent_tools: Sequence[str],
        abort: AbortSignal,
        on_fast_result: Callable[[RecallResult], None] | None = None,
        session_id: str | None = None,
        before_semantic: Callable[[], Awaitable[object]] | None = None,
        after_fast: Callable[[], Awaitable[object]] | None = None,
    ) -> RecallResult:
        """Relevant memories for ``query``; never raises (a failure is an empty result)."""
        from cairn.memory.recall.query import RecallResult, recall_memories
        from cairn.memory.recall.warm_up import recall_while_warming

        if not self.enabled:
            return RecallResult()
        try:
            search = self.warm_up.search  # while the store warms up, if the backend can search
            if search is not None:
                check = self.evidence_check(session_id)
                found = await recall_while_warming(
                    search, query, excluded, recent_tools, check, self.clock, on_fast_result
                )
                self.warm_up.searched()  # an empty mirror's indexing waited for this
                return found
            await self.ready()
            return await recall_memories(
                self.store,
                query,
                provider=provider,
                excluded=excluded,
                recent_tools=recent_tools,
                abort=abort,
                now=self.clock,
                on_fast_result=on_fast_result,
                session_id=session_id,
                marks=self._marks(session_id),
                semantic=self.settings.memory.semantic_candidates,
                before_semantic=before_semantic,
                after_fast=after_fast,
            )
        except Exception as exc:  # Recall is best effort: it never fails a turn
            _log.warning(f"recall failed: {exc!r}")
            return RecallResult()

    def evidence_check(self, session_id: str | None) -> EvidenceCheck:
        """The session's evidence check (its file hashes are cached for the session)."""
        from cairn.memory.trust.staleness import EvidenceCheck

        key = session_id or ""
        check = self._checks.pop(key, None) or EvidenceCheck(self.workspace)
        self._checks[key] = check  # the newest last: the oldest session's goes first
        while len(self._checks) > _MAX_SESSION_CHECKS:
            self._checks.pop(next(iter(self._checks)))
        return check

    def _marks(self, session_id: str | None) -> Callable[[Sequence[MemoryDoc]], list[MemoryDoc]]:
        """Recall's evidence check for a session (loaded only once there is a memory to mark)."""
        checks: list[EvidenceCheck] = []

        def mark(docs: Sequence[MemoryDoc]) -> list[MemoryDoc]:
            if not docs:
                return []
            if not checks:
                checks.append(self.evidence_check(session_id))
            return checks[0].mark(docs)

        return mark

    def staleness(self, docs: Sequence[MemoryDoc]) -> list[MemoryDoc]:
        """``docs`` checked against their evidence now (``cairn memory verify``, ``list``)."""
        from cairn.memory.trust.staleness import EvidenceCheck

        return EvidenceCheck(self.workspace).mark(docs)

    def provenance(self, doc: MemoryDoc) -> Provenance | None:
        """Where ``doc`` came from (its front matter's ``provenance``), or None."""
        from cairn.memory.trust.provenance import read_provenance

        return read_provenance(doc.path, mtime=doc.mtime, size=doc.size)

    # --- forget ----------------------------------------------------------------------------

    def forget_candidates(self) -> list[ForgetCandidate]:
        from cairn.memory.forget.selection import list_forget_candidates

        return list_forget_candidates(self.docs())

    async def select_forget(
        self,
        query: str,
        *,
        provider: Provider | None,
        limit: int | None = None,
        session_id: str | None = None,
    ) -> ForgetPlan:
        """The entries ``query`` asks to forget (nothing is changed yet); at most ``limit``
        (default :data:`~cairn.memory.forget.selection.MAX_FORGET_MATCHES`)."""
        import cairn.memory.forget.selection as selection

        return await selection.select_forget_candidates(
            selection.list_forget_candidates(selection.forget_docs(self.store, query, provider)),
            query,
            provider=provider,
            limit=selection.MAX_FORGET_MATCHES if limit is None else limit,
            session_id=session_id,
        )

    def apply_forget(self, plan: ForgetPlan, *, session_id: str = "") -> ForgetReport:
        """Move the plan's entries to the trash and rebuild the indexes (roots locked); for
        synchronous callers (the CLI). On an event loop use :meth:`forget`."""
        with _hold_roots(self.root_paths()):
            report = self._forget_locked(plan, session_id)
        return self._forgotten(plan, report)

    async def forget(self, plan: ForgetPlan, *, session_id: str = "") -> ForgetReport:
        """:meth:`apply_forget` waiting for the roots' locks without blocking the event loop
        (a memory agent may hold them across an await: its write, a database transaction)."""
        from cairn.memory.store.locks import hold_roots_async

        async with hold_roots_async(self.root_paths()):
            report = self._forget_locked(plan, session_id)
        return self._forgotten(plan, report)

    def _forget_locked(self, plan: ForgetPlan, session_id: str) -> ForgetReport:
        from cairn.memory.forget.trash import apply_forget_plan

        changed = self.store.changed_on_disk({f"{m.scope}:{m.relative_path}" for m in plan.matches})
        report = apply_forget_plan(plan, self.root_map(), now=self.clock(), session_id=session_id,
                                   changed=changed)  # fmt: skip
        if report.entries:
            self._after_change("forget", report.files, session_id, f"asked: {plan.query}")
        return report

    def _forgotten(self, plan: ForgetPlan, report: ForgetReport) -> ForgetReport:
        forgotten = {m.label: m for m in plan.matches if m.label in report.files}
        removed = [
            MemoryRef(m.title, m.scope, m.relative_path, str(m.path)) for m in forgotten.values()
        ]
        report.change = MemoryChanged("forget", removed=tuple(removed))
        emit_forget(
            action="forget", strategy=plan.strategy, entries=report.entries, files=len(report.files)
        )
        return report

    def forgotten(self) -> list[Tombstone]:
        """The tombstones of both roots (facts Extract and Dream must not learn again), newest
        first."""
        from cairn.memory.forget.tombstones import read_tombstones

        self.refresh()  # a database backend catches its mirror up first
        found = [t for root in self.root_paths() for t in read_tombstones(root)]
        return sorted(found, key=lambda t: -t.forgotten_at)

    def restore_last_forget(self, *, session_id: str = "") -> ForgetReport:
        """Bring back the most recent forget (refusing to overwrite) and rebuild the indexes."""
        from cairn.memory.forget.trash import restore_last_forget

        with _hold_roots(self.root_paths()):
            report = restore_last_forget(self.root_map(), now=self.clock(), session_id=session_id)
            if report.ok:
                self._after_change("restore", report.files, session_id, "", *report.removed)
                removed = [
                    self.memory_ref(scope, relative, Path(relative).stem)  # type: ignore[arg-type]
                    for scope, relative in (label.split(":", 1) for label in report.removed)
                ]
                report.change = self.describe_change(
                    "restore", report.files, created=set(report.files), removed=removed
                )
        emit_forget(
            action="restore", strategy="none", entries=report.entries, files=len(report.files)
        )
        return report

    def _after_change(
        self, operation: str, labels: Sequence[str], session_id: str, detail: str, *removed: str
    ) -> None:
        """Indexes (of the roots changed) and audit trail after Forget or restore (locked)."""
        from cairn.memory.store import history

        self.store.note_changed((*labels, *removed))
        self._rebuild_indexes({label.split(":", 1)[0] for label in (*labels, *removed)})
        now = self.clock()
        for scope, root in self.root_map().items():
            files = [label.split(":", 1)[1] for label in labels if label.startswith(f"{scope}:")]
            if files:
                line = history.HistoryEntry(now, operation, scope, files, session_id, detail)
                history.append_history(root, line)
        self.generation += 1

    def dream_change(self, report: DreamReport) -> MemoryChanged:
        labels = [f"project:{p}" for p in (*report.created, *report.updated)]
        created = {f"project:{p}" for p in report.created}
        removed = [
            self.memory_ref("project", p, report.titles.get(p) or Path(p).stem)
            for p in report.deleted
        ]
        return self.describe_change("dream", labels, created=created, removed=removed)

    def _rebuild_indexes(self, scopes: AbstractSet[str] | None = None) -> None:
        self.store.rebuild_index_files(scopes)
        self.store.save()

    def root_paths(self) -> list[Path]:
        return list(self.root_map().values())

    # --- export and import -----------------------------------------------------------------

    def export(self, folder: Path) -> TransferReport:
        """Write every memory and ``MEMORY.md`` under ``folder/<scope>/`` (either backend)."""
        from cairn.memory.store.transfer import export_memory

        self.refresh()  # a database backend catches its mirror up first
        return export_memory(self.root_map(), folder)

    def import_folder(self, folder: Path, *, session_id: str = "") -> TransferReport:
        """Make the memory match ``folder/<scope>/`` (written, trashed, skipped), in one write
        section, the indexes rebuilt and an ``import`` line in the audit trail."""
        from cairn.memory.store.transfer import import_memory

        self.refresh()
        with _hold_roots(self.root_paths()):
            report = import_memory(self.root_map(), folder, now=self.clock())
            changed = [*report.written, *report.removed]
            if changed:
                self._after_change("import", changed, session_id, f"from {folder}")
        return report

    # --- versions ------------------------------------------------------------------------

    def versions(self, reference: str) -> list[tuple[MemoryScope, str, list[Version]]]:
        """The version logs of the memories ``reference`` names (as :meth:`find` does; a path
        also names a memory that no longer exists), each with the current file as a last
        ``outside`` version when it was changed outside cairn since."""
        from cairn.memory.trust.versions import Version, current_text, read_versions

        self.refresh()  # a database backend catches its mirror up first
        roots = self.root_map()
        named = [(doc.scope, doc.relative_path) for doc in self.find(reference)]
        if not named:
            wanted = reference.strip()
            scope_named, _, relative = wanted.partition(":")
            for scope, root in roots.items():
                path = relative if scope_named == scope and relative else wanted
                if read_versions(root, path):
                    named.append((scope, path))
        found: list[tuple[MemoryScope, str, list[Version]]] = []
        for scope, relative in named:
            root = roots[scope]
            versions = read_versions(root, relative)
            current = current_text(root / relative)
            last = versions[-1].content if versions else None
            if versions and current != last:
                what = "changed outside cairn (by hand or another tool), not yet recorded"
                number = versions[-1].number + 1
                versions.append(Version(number, self.clock(), "outside", current, why=what))
            found.append((scope, relative, versions))
        return found

    def restore_version(
        self, scope: MemoryScope, relative: str, number: int, *, session_id: str = ""
    ) -> Version:
        """Write version ``number`` of a memory back (recorded as a new version, indexes
        rebuilt, an audit line); :class:`ValueError` when there is no such version to restore."""
        from cairn.memory.trust.versions import current_text, read_versions, record_version

        root = self.root_map()[scope]
        with _hold_roots(self.root_paths()):
            wanted = [v for v in read_versions(root, relative) if v.number == number]
            if not wanted or wanted[0].content is None:
                raise ValueError(f"{scope}:{relative} has no version {number} to restore")
            path = root / relative
            previous = current_text(path)
            path.parent.mkdir(parents=True, exist_ok=True)
            atomic_write_text(path, wanted[0].content)
            version = record_version(
                root, relative, wanted[0].content, previous=previous, operation="restore",
                now=self.clock(), session_id=session_id, why=f"restored version {number}",
            )  # fmt: skip
            self._after_change("restore", [f"{scope}:{relative}"], session_id, f"version {number}")
        if version is None:  # it already held that version: nothing was written
            raise ValueError(f"{scope}:{relative} already is version {number}")
        return version

    # --- the audit trail -------------------------------------------------------------------

    def history(self) -> tuple[list[HistoryEntry], list[str]]:
        """Every audit entry of both roots, newest first, and warnings for unreadable lines."""
        from cairn.memory.store.history import read_history

        return read_history(list(self.root_map().items()))

    # --- background tasks: Extract and Dream -----------------------------------------------

    def space(self) -> MemorySpace:
        """What the Extract and Dream runs work on."""
        from cairn.memory.background.tasks import MemorySpace

        return MemorySpace(
            roots=self.roots,
            clock=self.clock,
            docs=self.docs,
            rebuild_indexes=self._rebuild_indexes,
            dream_lock=self.backend.dream_lock,
            available_memory=self.available_memory,
            workspace=self.workspace,
        )

    def recent_tasks(self) -> list[MemoryTask]:
        """Records of recent Extract and Dream tasks, oldest first."""
        return self.background.recent_tasks()

    async def drain(self, timeout: float, *, extract_only: bool = False) -> bool:
        """Wait up to ``timeout`` seconds for running and queued memory tasks; True when done
        (``extract_only``: not for a Dream, which may run for minutes and is safe to stop)."""
        return await self.background.drain(timeout, extract_only=extract_only)

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
        """Extract from a finished turn in the background; returns at once (one extraction
        of this memory at a time, the newest request waiting in one slot; ``hand_off``: left
        to a worker process; ``said``, ``asked``: see :class:`BackgroundScheduler`)."""
        self.background.schedule_extract(
            project_root=project_root, session_id=session_id, history=history, runtime=runtime,
            hand_off=hand_off, said=said, asked=asked,
        )  # fmt: skip

    def schedule_dream(
        self, *, project_root: Path, session_id: str, runtime: MemoryRuntime
    ) -> None:
        """Check Dream's gates and, when they all pass, consolidate in the background."""
        self.background.schedule_dream(session_id=session_id, runtime=runtime)

    async def run_dream_now(
        self, *, session_id: str, runtime: MemoryRuntime, progress: Progress | None = None
    ) -> DreamReport:
        """Consolidate now (``cairn memory dream``, ``/dream``): every gate but the lock skipped.

        ``progress`` is told each step as it starts. The report's ``str()`` is a summary.
        """
        return await self.background.run_dream_now(
            session_id=session_id, runtime=runtime, progress=progress
        )

    async def conversation_rewound(self, session_id: str, history_length: int) -> None:
        """The session's conversation now has ``history_length`` entries (a rewind cut it):
        Extract neither skips the turns typed from here nor repeats the ones kept."""
        await self.background.conversation_rewound(session_id, history_length)

    # --- what the scheduler uses (cairn.memory.background.scheduler.SchedulerHost) -------

    def memory_changed(self) -> None:
        self.generation += 1
        self._vectors_after_write()

    def lift_tombstones(self, paths: Sequence[Path]) -> str:
        """The session's own agent saved these memories at the user's word (``/remember``):
        remove the tombstones of forgotten facts they state again (roots locked); the detail."""
        from cairn.memory.forget.tombstones import lift_stated

        return lift_stated(self.root_paths(), paths)


@contextlib.contextmanager
def _hold_roots(roots: Sequence[Path]) -> Iterator[None]:
    """:func:`cairn.memory.locks.hold_roots`, imported on first use (it loads filelock)."""
    from cairn.memory.store.locks import hold_roots

    with hold_roots(roots):
        yield
