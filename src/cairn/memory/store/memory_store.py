"""The memory store: every memory of a project and its user, kept current and ranked fast.

A :class:`MemoryStore` holds, per root (project first, then user), a parse cache keyed by each
file's stat and an inverted index over the parsed documents. :meth:`MemoryStore.refresh` brings both
up to date with the disk: the first refresh stat-walks the roots; later ones ask the kernel which
files changed (inotify, see :mod:`cairn.memory.store.watch`) and re-stat only those, falling back to
the full walk where notifications are unavailable. Only changed files are read again, and a changed
file re-indexes only itself. :meth:`MemoryStore.save` persists cache and index so a new process
starts warm.

The store is not thread-safe: use it from one thread at a time (``asyncio.to_thread`` included).
"""

from __future__ import annotations

import heapq
import os
import threading
import time
from bisect import bisect_left, insort
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.bulk import BULK_MIN_FILES, default_workers
from cairn.memory.store.cache import (
    DamagedIndex,
    DocRecord,
    RecordTable,
    ShardCache,
    SkipRecord,
    StatKey,
    append_changes,
    change_entry,
    compact,
    load_cache,
    needs_compaction,
    save_cache,
)
from cairn.memory.store.index_file import MAX_INDEX_LINES, write_index
from cairn.memory.store.lexical_index import search
from cairn.memory.store.parse import ParseSkip, parse_memory_file
from cairn.memory.store.scan import Walk, is_memory_name, stat_file, stat_key, walk_root
from cairn.memory.store.scorer import DEFAULT_SCORER, ScorerConfig, term_weights
from cairn.memory.store.tokenizer import load as load_tokenizer
from cairn.memory.store.tokenizer import query_tokens, tokenize
from cairn.memory.store.watch import TreeWatcher, open_watcher
from cairn.values import Value

if TYPE_CHECKING:
    import numpy as np

    from cairn.memory.store.embedding import EmbeddingModel
    from cairn.memory.store.vectors import VectorTable

__all__ = ["MemoryStore", "ScanReport", "ScoredDoc", "VectorJob", "VectorSync"]

_T = TypeVar("_T")
_INLINE_COMPACT_BYTES = 4 * 1024 * 1024  # a snapshot this small is compacted in the writer
_CACHE_FOLDER = "recall-index"  # under the project state dir, and under the memory base (user)
_ROOT_SYMLINK = "project memory root skipped (it is a symlink)"
_log = get_logger("MEMORY")


class ScoredDoc(Value):
    doc: MemoryDoc
    score: float  # > 0; comparable within one ranking only


class ScanReport(Value):
    """What one :meth:`MemoryStore.refresh` did."""

    docs: int  # memories after the refresh
    reparsed: int  # files read and parsed again (new or changed)
    removed: int  # memories gone from disk
    full_walks: int  # roots stat-walked file by file (the first refresh, or no notifications)
    warnings: list[str] = field(default_factory=list)  # one per skipped file or folder
    duration_ms: float = 0.0
    reindex_ms: float = 0.0  # of which parsing and re-indexing changed files
    scanned_at: float = 0.0  # the store's clock when the refresh finished


class _Tally(Value, frozen=False):
    reparsed: int = 0
    removed: int = 0
    full_walks: int = 0
    reindex_seconds: float = 0.0


class VectorSync(Protocol):
    """Vectors shared between processes (the PostgreSQL backend's table); blocking calls."""

    def fetch(
        self, scope: str, model: str, dim: int, wanted: Mapping[str, bytes]
    ) -> list[tuple[str, bytes, np.ndarray]]: ...

    def store(
        self, scope: str, model: str, rows: Sequence[tuple[str, bytes, np.ndarray]]
    ) -> None: ...

    def close(self) -> None: ...


class VectorJob(Value):
    """A memory whose embedding is missing or stale: embed ``text``, then apply the row."""

    shard: int
    scope: MemoryScope
    relative: str
    stat_key: tuple[int, int, int, int]
    digest: bytes
    text: str


def _terms_of(record: DocRecord) -> set[str]:
    return {*tokenize(record.title), *tokenize(record.description), *tokenize(record.body)}


def _file_name(relative: str) -> str:
    return relative.rsplit("/", 1)[-1]


class _Walker:
    """A stat walk of a root in a thread of its own: the validation of a saved index that a
    provisional refresh does not wait for (the store itself is only touched by its caller)."""

    def __init__(self, root: str, watcher: TreeWatcher | None) -> None:
        self._root = root
        self._watcher = watcher
        self._result: Walk | BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cairn-memory-walk", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            self._result = walk_root(self._root, self._watcher)
        except BaseException as error:  # handed to the caller by result()
            self._result = error

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> Walk:
        self._thread.join()
        if isinstance(self._result, BaseException):
            raise self._result
        assert self._result is not None
        return self._result


class _Shard:
    """One memory root: its parse cache, lexical index, watcher and lazily built documents."""

    def __init__(
        self,
        scope: MemoryScope,
        root: Path | None,
        cache_path: Path | None,
        *,
        scorer: ScorerConfig,
        watch: bool,
        bulk_files: int,
        workers: int,
    ) -> None:
        self.scope = scope
        self.bulk_files = bulk_files  # files a first scan reads through a new snapshot
        self.workers = workers
        self.root = Path(os.path.abspath(root)) if root is not None else None
        self.root_text = str(self.root) if self.root is not None else ""
        self.cache_path = cache_path
        self.scorer = scorer
        self.watch = watch
        self.cache = ShardCache()
        self.docs: dict[str, MemoryDoc] = {}  # built on first use
        self.folder_warnings: list[str] = []
        self.watcher: TreeWatcher | None = None
        self.loaded = False
        self.walked = False  # a full walk registered watches on every folder
        self.walker: _Walker | None = None  # a provisional refresh's walk, still to be applied
        self.snapshot_wanted = False  # no usable snapshot on disk: the next save writes one
        # What changed since the last save, for the journal: relative path -> (stat key and
        # terms of the version on disk, the new version's term weights or None)
        self.pending: dict[str, tuple[StatKey | None, set[str] | None]] = {}
        self.pending_weights: dict[str, dict[str, int]] = {}
        self.compactor: threading.Thread | None = None
        self.order: list[tuple[float, str, str]] | None = None  # docs() order, kept sorted
        self.skip_messages: list[str] | None = None  # warnings of skipped files (cached)
        self.vectors: VectorTable | None = None  # loaded on the refined path only

    @property
    def provisional(self) -> bool:
        """Serving a saved index whose check against the files has not finished yet."""
        return self.walker is not None

    @property
    def vector_path(self) -> Path | None:
        return None if self.cache_path is None else self.cache_path.with_suffix(".vec")

    @property
    def records(self) -> RecordTable:
        return self.cache.records

    # --- loading and saving -------------------------------------------------------------

    def load(self) -> None:
        self.loaded = True
        if self.cache_path is None or self.root is None:
            return
        cached = load_cache(
            self.cache_path,
            root=self.root_text,
            scope=self.scope,
            fingerprint=self.scorer.fingerprint(),
        )
        if cached is None:
            self.snapshot_wanted = True
        else:
            self.cache = cached
            self.snapshot_wanted = needs_compaction(cached)

    def save(self) -> None:
        self.save_vectors()
        path = self.cache_path
        if path is None or self.root is None or not (self.pending or self.snapshot_wanted):
            return
        fingerprint = self.scorer.fingerprint()
        if not self.snapshot_wanted:
            payloads = [
                change_entry(relative, self.records.get(relative),
                             self.pending_weights.get(relative), old_key, old_terms)
                for relative, (old_key, old_terms) in self.pending.items()
            ]  # fmt: skip
            size = append_changes(path, payloads)
            if size is not None:
                self._clear_pending()
                self.cache.journal_entries += len(payloads)
                self.cache.journal_bytes = size
                if needs_compaction(self.cache):
                    self._compact(path, fingerprint)
                return
        if save_cache(path, self.cache, root=self.root_text, scope=self.scope,
                      fingerprint=fingerprint):  # fmt: skip
            self._clear_pending()
            self.snapshot_wanted = False

    def _clear_pending(self) -> None:
        self.pending.clear()
        self.pending_weights.clear()

    def _compact(self, path: Path, fingerprint: str) -> None:
        """Fold the journal into a new snapshot: here for a small index, in a thread of its
        own (reading the files, not this store) for a large one."""
        self.cache.journal_entries = self.cache.journal_bytes = 0
        if self.compactor is not None and self.compactor.is_alive():
            return
        arguments = {"root": self.root_text, "scope": self.scope, "fingerprint": fingerprint}
        try:
            size = path.stat().st_size
        except OSError:
            return
        if size <= _INLINE_COMPACT_BYTES:
            compact(path, **arguments)
            return
        self.compactor = threading.Thread(
            target=compact, args=(path,), kwargs=arguments, name="cairn-index-compact",
            daemon=True,
        )  # fmt: skip
        self.compactor.start()

    def load_vectors(self, model_id: str, dim: int) -> VectorTable:
        from cairn.memory.store.vectors import VectorTable, load_vectors

        table = self.vectors
        if table is not None and (table.model_id, table.dim) == (model_id, dim):
            return table
        path = self.vector_path
        if path is None or self.root is None:
            table = VectorTable(model_id, dim)
        else:
            table = load_vectors(path, model_id=model_id, dim=dim, root=self.root_text,
                                 scope=self.scope)  # fmt: skip
        self.vectors = table
        return table

    def save_vectors(self) -> None:
        table, path = self.vectors, self.vector_path
        if table is None or not table.dirty or path is None or self.root is None:
            return  # (before the import: numpy stays unloaded in a session that never used it)
        from cairn.memory.store.vectors import save_vectors

        save_vectors(path, table, root=self.root_text, scope=self.scope)

    def vector_jobs(self, index: int) -> list[VectorJob]:
        from cairn.memory.store.vectors import embedding_text, text_digest

        table = self.vectors
        if table is None:
            return []
        keys = self.records.keys
        docs = set(self.records.by_slot.values())
        table.retain(docs.__contains__)
        jobs: list[VectorJob] = []
        for relative in docs:
            key = keys[relative]
            if table.current(relative, key):
                continue
            record = self.record_at(relative)
            text = embedding_text(record.title, record.description, record.body)
            digest = text_digest(text)
            if table.same_text(relative, digest):
                table.touch(relative, key)
            else:
                jobs.append(VectorJob(index, self.scope, relative, key, digest, text))
        jobs.sort(key=lambda job: job.relative)
        return jobs

    # --- refreshing ---------------------------------------------------------------------

    def refresh(self, tally: _Tally, *, provisional: bool = False) -> None:
        if self.root is None:
            return
        if not self.loaded:
            self.load()
        if not self._root_usable():
            self._drop_all(tally)
            return
        if self.walker is not None:
            if provisional and not self.walker.done():
                return  # still checking the saved index against the files
            walker, self.walker = self.walker, None
            self._apply_walk(walker.result(), tally)
            return
        if self.watcher is not None and self.walked:
            changes = self.watcher.drain()
            if not changes.rescan:
                self._restat({*changes.files, *self.records.symlinks}, tally)
                return
        if provisional and self.cache.generation and len(self.records) and not self.walked:
            self.walker = _Walker(self.root_text, self._watcher_for_walk())
            tally.full_walks += 1
            return
        self._full_walk(tally)

    def _root_usable(self) -> bool:
        if self.scope == "project" and os.path.islink(self.root_text):
            warning = f"{self.root_text}: {_ROOT_SYMLINK}"
            if warning not in self.folder_warnings:
                _log.warning(warning)
            self.folder_warnings = [warning]
            return False
        self.folder_warnings = [w for w in self.folder_warnings if not w.endswith(_ROOT_SYMLINK)]
        return os.path.isdir(self.root_text)

    def _drop_all(self, tally: _Tally) -> None:
        for relative in list(self.records.keys):
            self._remove(relative, tally)
        self.close()

    def _watcher_for_walk(self) -> TreeWatcher | None:
        if self.watch and self.watcher is None:
            self.watcher = open_watcher()
        if self.watcher is not None:
            self.watcher.drain()  # the walk sees everything queued so far
            self.watcher.forget_folders()
        return self.watcher

    def _full_walk(self, tally: _Tally) -> None:
        walk = walk_root(self.root_text, self._watcher_for_walk())
        tally.full_walks += 1
        self._apply_walk(walk, tally)

    def _apply_walk(self, walk: Walk, tally: _Tally) -> None:
        self.walked = True
        for warning in walk.warnings:
            if warning not in self.folder_warnings:
                _log.warning(warning)
        self.folder_warnings = walk.warnings
        known = self.records.keys
        if walk.keys == known:
            return  # the usual case: nothing changed, decided in one C-level comparison
        if not known and len(walk.keys) >= self.bulk_files and self._bulk_build(walk, tally):
            return
        for relative in known.keys() - walk.keys.keys():
            self._remove(relative, tally)
        for relative, key in walk.keys.items():
            if known.get(relative) != key:
                self._update(relative, walk.infos[relative], relative in walk.symlinks, tally)

    def _bulk_build(self, walk: Walk, tally: _Tally) -> bool:
        """The first scan of a large root, into a new saved index (see
        :mod:`~cairn.memory.store.bulk`); False when it cannot be saved (then file by file)."""
        from cairn.memory.store.bulk import build_snapshot

        path = self.cache_path
        if path is None:
            return False
        started = time.perf_counter()
        relatives = sorted(walk.keys)
        built = build_snapshot(path, root=self.root_text, scope=self.scope, relatives=relatives,
                               scorer=self.scorer, workers=self.workers)  # fmt: skip
        loaded = self._load_built(path) if built else None
        if loaded is None:
            return False
        self.cache = loaded
        self.docs.clear()
        self.order = None
        self.skip_messages = None
        self._clear_pending()
        self.snapshot_wanted = False
        tally.reparsed += len(relatives)
        tally.reindex_seconds += time.perf_counter() - started
        return True

    def _load_built(self, path: Path) -> ShardCache | None:
        return load_cache(path, root=self.root_text, scope=self.scope,
                          fingerprint=self.scorer.fingerprint())  # fmt: skip

    def _restat(self, candidates: set[str], tally: _Tally) -> None:
        known = self.records.keys
        for relative in candidates:
            if not is_memory_name(_file_name(relative)):
                continue
            found = stat_file(self.root_text, relative)
            if found is None:
                if relative in known:
                    self._remove(relative, tally)
            elif known.get(relative) != stat_key(found[0]):
                self._update(relative, found[0], found[1], tally)

    # --- applying changes ---------------------------------------------------------------

    def _unindex(self, relative: str) -> None:
        record = self.records.pop(relative)
        self.docs.pop(relative, None)
        terms: set[str] | None = None
        if isinstance(record, DocRecord):
            terms = _terms_of(record)
            self.cache.index.remove(record.slot, terms)
            self._unorder(relative, record.mtime)
        if relative not in self.pending:  # the first change since the last save
            self.pending[relative] = (record.stat_key if record is not None else None, terms)
        self.pending_weights.pop(relative, None)
        self.skip_messages = None

    def _remove(self, relative: str, tally: _Tally) -> None:
        self._unindex(relative)
        tally.removed += 1

    def _update(self, relative: str, info: os.stat_result, symlink: bool, tally: _Tally) -> None:
        started = time.perf_counter()
        assert self.root is not None
        key = stat_key(info)
        parsed = parse_memory_file(self.root / relative, self.root, self.scope, info=info)
        self._unindex(relative)
        if isinstance(parsed, ParseSkip):
            self.records.put(relative, SkipRecord(key, parsed.reason, parsed.detail))
            _log.warning(parsed.message)
        else:
            weights = term_weights(parsed.title, parsed.description, parsed.body, self.scorer)
            slot = self.cache.index.add(weights)
            self.records.put(relative, DocRecord(
                key, slot, parsed.type, parsed.title, parsed.description, parsed.body,
                parsed.mtime, parsed.size, symlink,
            ))  # fmt: skip
            self.pending_weights[relative] = weights
            self.docs[relative] = parsed
            self._order(relative, parsed.mtime)
        tally.reparsed += 1
        tally.reindex_seconds += time.perf_counter() - started

    def _order(self, relative: str, mtime: float) -> None:
        if self.order is not None:
            insort(self.order, (-mtime, _file_name(relative), relative))

    def _unorder(self, relative: str, mtime: float) -> None:
        if self.order is not None:
            entry = (-mtime, _file_name(relative), relative)
            at = bisect_left(self.order, entry)
            if at < len(self.order) and self.order[at] == entry:
                del self.order[at]
            else:  # not where its record says: sort again when next needed
                self.order = None

    # --- reading ------------------------------------------------------------------------

    def relative_of(self, slot: int) -> str:
        return self.records.by_slot[slot]

    def doc(self, relative: str) -> MemoryDoc:
        found = self.docs.get(relative)
        if found is not None:
            return found
        record = self.record_at(relative)
        assert self.root is not None
        memory_type: MemoryType = record.type  # type: ignore[assignment]
        found = MemoryDoc(
            self.root / relative, relative, self.scope, memory_type, record.title,
            record.description, record.body, record.mtime, record.size,
        )  # fmt: skip
        self.docs[relative] = found
        return found

    def ordered(self) -> list[tuple[float, str, str]]:
        """(-mtime, file name, relative path) of the documents, sorted: docs() order."""
        if self.order is None:
            documents = [
                (-mtime, _file_name(relative), relative)
                for relative, mtime in self.records.doc_mtimes()
            ]
            documents.sort()
            self.order = documents
        return self.order

    def warnings(self) -> list[str]:
        if self.skip_messages is None:
            self.skip_messages = sorted(
                ParseSkip(Path(self.root_text, relative), record.reason, record.detail).message  # type: ignore[arg-type]
                for relative, record in self.records.skipped()
            )
        return [*self.folder_warnings, *self.skip_messages]

    def record_at(self, relative: str) -> DocRecord:
        record = self.records.get(relative)
        assert isinstance(record, DocRecord)
        return record

    def reset(self) -> None:
        """Forget everything loaded (a damaged saved index): the next refresh reads every file
        again and the next save writes a whole new snapshot."""
        self.cache = ShardCache()
        self.docs.clear()
        self.order = None
        self.skip_messages = None
        self._clear_pending()
        self.walker = None
        self.walked = False
        self.snapshot_wanted = True

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        self.walked = False
        self.walker = None


def _default_cache_paths(roots: MemoryRoots, cache_dir: Path | None) -> tuple[Path, Path]:
    if cache_dir is not None:
        return cache_dir / "project.bin", cache_dir / "user.bin"
    return (
        roots.state_dir / _CACHE_FOLDER / "project.bin",
        roots.base / _CACHE_FOLDER / "user.bin",
    )


class MemoryStore:
    """The project and user memories, current with the disk, with a fast lexical ranking."""

    def __init__(
        self,
        roots: MemoryRoots,
        *,
        cache_dir: Path | None = None,
        clock: Callable[[], float] = time.time,
        scorer: ScorerConfig = DEFAULT_SCORER,
        watch: bool = True,
        before_refresh: Callable[[], None] | None = None,
        bulk_files: int = BULK_MIN_FILES,
        workers: int | None = None,
    ) -> None:
        """``watch=False`` stat-walks every root on every refresh instead of using inotify;
        ``before_refresh`` runs first at each refresh (a database backend catching up). A first
        scan of ``bulk_files`` files or more reads them in ``workers`` processes (default: one
        per core, at most 4) straight into a new saved index."""
        project_cache, user_cache = _default_cache_paths(roots, cache_dir)
        self.roots = roots
        self._clock = clock
        self._scorer = scorer
        options = {
            "scorer": scorer,
            "watch": watch,
            "bulk_files": bulk_files,
            "workers": default_workers() if workers is None else workers,
        }
        self._shards = (
            _Shard("project", roots.project, project_cache, **options),  # type: ignore[arg-type]
            _Shard("user", roots.user, user_cache, **options),  # type: ignore[arg-type]
        )
        self._refreshed = False
        self._before_refresh = before_refresh
        self.vector_sync: VectorSync | None = None  # vectors shared by a database backend

    def refresh(self, *, provisional: bool = False) -> ScanReport:
        """Bring documents and index up to date with the disk. Never raises.

        ``provisional`` (Recall's fast phase, the warm-up before the first prompt): a saved
        index just loaded is served at once and checked against the files in a thread; what
        that check finds is applied by a later refresh, and until then a memory whose file
        changed or vanished is left out of :meth:`rank` and :meth:`recent` rather than served
        from the saved copy. Any other refresh waits for the check.
        """
        started = time.perf_counter()
        tally = _Tally()
        if self._before_refresh is not None:
            try:
                self._before_refresh()
            except Exception as error:  # the files as they are, then
                _log.warning(f"memory catch-up before reading failed: {error!r}")
        for shard in self._shards:
            try:
                shard.refresh(tally, provisional=provisional)
            except DamagedIndex as error:
                self._rebuild(shard, error)
                shard.refresh(tally)
            except Exception as error:  # a broken root must not break a turn
                _log.error(f"memory refresh of {shard.root_text} failed: {error!r}")
                shard.close()
        self._refreshed = True
        return ScanReport(
            docs=sum(len(shard.records.by_slot) for shard in self._shards),
            reparsed=tally.reparsed,
            removed=tally.removed,
            full_walks=tally.full_walks,
            warnings=[warning for shard in self._shards for warning in shard.warnings()],
            duration_ms=(time.perf_counter() - started) * 1000,
            reindex_ms=tally.reindex_seconds * 1000,
            scanned_at=self._clock(),
        )

    def _rebuild(self, shard: _Shard, error: DamagedIndex) -> None:
        _log.warning(
            f"recall index of {shard.root_text} damaged ({error}); rebuilding it from the "
            "memory files"
        )
        shard.reset()

    def _guarded(self, action: Callable[[], _T]) -> _T:
        """``action``, again after a rebuild when a saved record turned out damaged."""
        try:
            return action()
        except DamagedIndex as error:
            for shard in self._shards:
                if shard.records.damaged:
                    self._rebuild(shard, error)
            self.refresh()
            return action()

    def warm(self) -> ScanReport:
        """A provisional :meth:`refresh`, then load what ranking a query needs when there is
        something to rank, for a front end that can do this before the first prompt (off the
        event loop)."""
        report = self.refresh(provisional=True)
        if report.docs:
            load_tokenizer()
        return report

    def _ensure_refreshed(self) -> None:
        if not self._refreshed:
            self.refresh()

    def _live(self, shard: _Shard, relative: str) -> bool:
        """Whether a memory of a provisional shard still is what its saved record says."""
        if not shard.provisional:
            return True
        found = stat_file(shard.root_text, relative)
        return found is not None and stat_key(found[0]) == shard.records.stat_key(relative)

    def docs(self) -> list[MemoryDoc]:
        """Every memory: project first, then user; each by mtime desc, file name, path."""
        self._ensure_refreshed()
        return self._guarded(
            lambda: [shard.doc(entry[2]) for shard in self._shards for entry in shard.ordered()]
        )

    def count(self) -> int:
        """How many memories there are (no document is built)."""
        self._ensure_refreshed()
        return sum(len(shard.records.by_slot) for shard in self._shards)

    def iter_docs(self) -> Iterator[MemoryDoc]:
        """:meth:`docs`, one at a time (a long listing starts without building them all)."""
        self._ensure_refreshed()
        for shard in self._shards:
            for entry in list(shard.ordered()):
                yield shard.doc(entry[2])

    def recent(
        self, *, limit: int, exclude: Callable[[MemoryDoc], bool] | None = None
    ) -> list[MemoryDoc]:
        """The ``limit`` most recently modified memories, in :meth:`docs` order among ties.

        Cheaper than :meth:`docs` on a cold store: only the documents returned are built.
        """
        self._ensure_refreshed()
        return self._guarded(lambda: self._recent(limit, exclude))

    def _recent(
        self, limit: int, exclude: Callable[[MemoryDoc], bool] | None
    ) -> list[MemoryDoc]:
        streams = [self._by_recency(index) for index in range(len(self._shards))]
        chosen: list[MemoryDoc] = []
        for _, index, _, relative in heapq.merge(*streams):
            if len(chosen) >= limit:
                break
            shard = self._shards[index]
            if not self._live(shard, relative):
                continue
            doc = shard.doc(relative)
            if exclude is None or not exclude(doc):
                chosen.append(doc)
        return chosen

    def _by_recency(self, index: int) -> Iterator[tuple[float, int, str, str]]:
        for negative_mtime, name, relative in self._shards[index].ordered():
            yield negative_mtime, index, name, relative

    def rank(
        self,
        query: str,
        *,
        limit: int,
        exclude: Callable[[MemoryDoc], bool] | None = None,
    ) -> list[ScoredDoc]:
        """The ``limit`` best-matching memories, score descending (every score above zero).

        Ties go to the more recently modified memory, then to :meth:`docs` order. ``exclude``
        removes documents (already surfaced, tool noise) before the cut.
        """
        self._ensure_refreshed()
        return self._guarded(lambda: self._rank(query, limit, exclude))

    def _rank(
        self, query: str, limit: int, exclude: Callable[[MemoryDoc], bool] | None
    ) -> list[ScoredDoc]:
        shards = self._shards
        if not any(shard.records.by_slot for shard in shards):
            return []  # nothing to rank (and no query to tokenize)

        def accept(shard: int, slot: int) -> bool:
            relative = shards[shard].relative_of(slot)
            if not self._live(shards[shard], relative):
                return False
            return exclude is None or not exclude(shards[shard].doc(relative))

        def order_key(shard: int, slot: int) -> tuple[float, int, str, str]:
            relative = shards[shard].relative_of(slot)
            mtime = shards[shard].records.mtime(relative)
            return (-mtime, shard, _file_name(relative), relative)

        hits = search(
            [shard.cache.index for shard in shards],
            query_tokens(query),
            limit=limit,
            accept=accept,
            order_key=order_key,
        )
        return [
            ScoredDoc(shards[hit.shard].doc(shards[hit.shard].relative_of(hit.slot)), hit.score)
            for hit in hits
        ]

    # --- vectors (the refined and background paths only) ----------------------------------

    def load_vectors(self, model: EmbeddingModel) -> None:
        """Load each root's saved vectors for ``model`` (file reads: call it off the event
        loop). A damaged file or one made by another model is dropped with one warning."""
        for shard in self._shards:
            shard.load_vectors(model.model_id, model.dim)

    def vector_jobs(self) -> list[VectorJob]:
        """The memories whose vectors are missing or stale (after :meth:`load_vectors`); rows
        of memories that are gone are dropped on the way."""
        self._ensure_refreshed()
        return [job for index, shard in enumerate(self._shards) for job in shard.vector_jobs(index)]

    def apply_vectors(self, jobs: list[VectorJob], vectors: np.ndarray) -> None:
        """Store the embeddings computed for ``jobs`` (one row each, in order)."""
        for job, vector in zip(jobs, vectors, strict=True):
            table = self._shards[job.shard].vectors
            if table is not None:
                table.put(job.relative, job.stat_key, job.digest, vector)

    def save_vectors(self) -> None:
        """Persist each root's vectors (atomically) if they changed."""
        for shard in self._shards:
            shard.save_vectors()

    def similar(
        self,
        vector: np.ndarray,
        *,
        limit: int,
        exclude: Callable[[MemoryDoc], bool] | None = None,
    ) -> list[MemoryDoc]:
        """The ``limit`` memories whose vectors are closest to ``vector`` (cosine), best first;
        equal scores in path order. Memories without a vector yet are not considered."""
        from cairn.memory.store.vectors import top_rows

        scored = []
        for index, shard in enumerate(self._shards):
            if shard.vectors is not None:
                relatives, scores = shard.vectors.scores(vector)
                scored.append((index, relatives, scores))
        total = sum(len(shard.vectors) for shard in self._shards if shard.vectors is not None)
        wanted = limit
        while limit > 0:
            pooled = sorted(
                (-score, index, relative)
                for index, relatives, scores in scored
                for relative, score in top_rows(relatives, scores, wanted)
            )
            chosen: list[MemoryDoc] = []
            for _, index, relative in pooled:
                shard = self._shards[index]
                if not isinstance(shard.records.get(relative), DocRecord):
                    continue  # removed since its vector was computed
                doc = shard.doc(relative)
                if exclude is None or not exclude(doc):
                    chosen.append(doc)
                    if len(chosen) == limit:
                        return chosen
            if wanted >= total:
                return chosen
            wanted *= 4
        return []

    def get(self, path: Path) -> MemoryDoc | None:
        """The memory stored at ``path`` (absolute), or None."""
        self._ensure_refreshed()
        return self._guarded(lambda: self._get(path))

    def _get(self, path: Path) -> MemoryDoc | None:
        target = os.path.abspath(path)
        for shard in self._shards:
            if shard.root is None or not target.startswith(shard.root_text + os.sep):
                continue
            relative = Path(os.path.relpath(target, shard.root_text)).as_posix()
            if isinstance(shard.records.get(relative), DocRecord):
                return shard.doc(relative)
        return None

    def rebuild_index_files(self) -> None:
        """Regenerate each existing root's ``MEMORY.md`` (atomically) from the current docs:
        only the newest memories make its lines, so only they are read."""
        self.refresh()
        self._guarded(self._write_index_files)

    def _write_index_files(self) -> None:
        for shard in self._shards:
            if shard.root is None or not os.path.isdir(shard.root_text):
                continue
            ordered = shard.ordered()
            docs = [shard.doc(entry[2]) for entry in ordered[:MAX_INDEX_LINES]]
            try:
                write_index(shard.root, docs, total=len(ordered))
            except OSError as error:
                _log.warning(f"{shard.root_text}: MEMORY.md not written: {error}")

    def save(self) -> None:
        """Persist each root's parse cache and index (atomically) if they changed."""
        for shard in self._shards:
            shard.save()

    def close(self) -> None:
        """Stop watching the roots (a later refresh walks them again); wait for a compaction
        of the saved index that is under way."""
        for shard in self._shards:
            shard.close()
            if shard.compactor is not None:
                shard.compactor.join()
