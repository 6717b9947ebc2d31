"""The memory store: every memory of a project and its user, kept current and ranked fast.

A :class:`MemoryStore` holds, per root (project first, then user), a parse cache keyed by each
file's stat and an inverted index over the parsed documents. :meth:`MemoryStore.refresh` brings
both up to date with the disk: the first refresh stat-walks the roots; later ones ask the kernel
which files changed (inotify, see :mod:`cairn.memory.watch`) and re-stat only those, falling back
to the full walk where notifications are unavailable. Only changed files are read again, and a
changed file re-indexes only itself. :meth:`MemoryStore.save` persists cache and index so a new
process starts warm.

The store is not thread-safe: use it from one thread at a time (``asyncio.to_thread`` included).
"""

from __future__ import annotations

import heapq
import os
import time
from collections.abc import Callable, Hashable
from dataclasses import dataclass, field
from pathlib import Path

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
from cairn.memory.index_file import write_index
from cairn.memory.lexical_index import LexicalIndex, search
from cairn.memory.parse import ParseSkip, parse_memory_file
from cairn.memory.paths import MemoryRoots
from cairn.memory.scan import FileStat, is_memory_name, stat_file, walk_root
from cairn.memory.scorer import DEFAULT_SCORER, TYPE_BONUS_CAP, ScorerConfig, term_weights
from cairn.memory.scorer import type_keyword_hits as _type_keyword_hits
from cairn.memory.store_cache import (
    DocRecord,
    ShardCache,
    SkipRecord,
    load_cache,
    save_cache,
)
from cairn.memory.tokenizer import query_tokens, tokenize
from cairn.memory.watch import TreeWatcher, open_watcher

__all__ = ["MemoryStore", "ScanReport", "ScoredDoc"]

_CACHE_FOLDER = "recall-index"  # under the project state dir, and under the memory base (user)
_log = get_logger("MEMORY")


@dataclass(frozen=True, slots=True)
class ScoredDoc:
    doc: MemoryDoc
    score: float  # > 0; comparable within one ranking only


@dataclass(frozen=True)
class ScanReport:
    """What one :meth:`MemoryStore.refresh` did."""

    docs: int  # memories after the refresh
    reparsed: int  # files read and parsed again (new or changed)
    removed: int  # memories gone from disk
    full_walks: int  # roots stat-walked file by file (the first refresh, or no notifications)
    warnings: list[str] = field(default_factory=list)  # one per skipped file or folder
    duration_ms: float = 0.0
    reindex_ms: float = 0.0  # of which parsing and re-indexing changed files
    scanned_at: float = 0.0  # the store's clock when the refresh finished


@dataclass
class _Tally:
    reparsed: int = 0
    removed: int = 0
    full_walks: int = 0
    reindex_seconds: float = 0.0


def _terms_of(record: DocRecord) -> set[str]:
    return {*tokenize(record.title), *tokenize(record.description), *tokenize(record.body)}


def _file_name(relative: str) -> str:
    return relative.rsplit("/", 1)[-1]


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
    ) -> None:
        self.scope = scope
        self.root = Path(os.path.abspath(root)) if root is not None else None
        self.root_text = str(self.root) if self.root is not None else ""
        self.cache_path = cache_path
        self.scorer = scorer
        self.watch = watch
        self.cache = ShardCache()
        self.by_id: dict[int, str] = {}
        self.docs: dict[str, MemoryDoc] = {}  # built on first use
        self.symlinks: set[str] = set()
        self.folder_warnings: list[str] = []
        self.watcher: TreeWatcher | None = None
        self.loaded = False
        self.walked = False  # a full walk registered watches on every folder
        self.dirty = False  # changed since loaded or saved
        self.order: list[str] | None = None  # relative paths in docs() order

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
            self.dirty = True
            return
        self.cache = cached
        for relative, record in cached.records.items():
            if isinstance(record, DocRecord):
                self.by_id[record.doc_id] = relative
                if record.symlink:
                    self.symlinks.add(relative)

    def save(self) -> None:
        if not self.dirty or self.cache_path is None or self.root is None:
            return
        saved = save_cache(
            self.cache_path,
            self.cache,
            root=self.root_text,
            scope=self.scope,
            fingerprint=self.scorer.fingerprint(),
        )
        self.dirty = not saved

    # --- refreshing ---------------------------------------------------------------------

    def refresh(self, tally: _Tally) -> None:
        if self.root is None:
            return
        if not self.loaded:
            self.load()
        if not self._root_usable():
            self._drop_all(tally)
            return
        if self.watcher is not None and self.walked:
            changes = self.watcher.drain()
            if not changes.rescan:
                self._restat({*changes.files, *self.symlinks}, tally)
                return
        self._full_walk(tally)

    def _root_usable(self) -> bool:
        if self.scope == "project" and os.path.islink(self.root_text):
            warning = f"{self.root_text}: project memory root skipped (it is a symlink)"
            if warning not in self.folder_warnings:
                _log.warning(warning)
            self.folder_warnings = [warning]
            return False
        return os.path.isdir(self.root_text)

    def _drop_all(self, tally: _Tally) -> None:
        for relative in list(self.cache.records):
            self._remove(relative, tally)
        self.walked = False
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        if not self.folder_warnings or "symlink" not in self.folder_warnings[0]:
            self.folder_warnings = []

    def _full_walk(self, tally: _Tally) -> None:
        if self.watch and self.watcher is None:
            self.watcher = open_watcher()
        if self.watcher is not None:
            self.watcher.drain()  # the walk below sees everything queued so far
            self.watcher.forget_folders()
        walk = walk_root(self.root_text, self.watcher)
        self.walked = True
        tally.full_walks += 1
        for warning in walk.warnings:
            if warning not in self.folder_warnings:
                _log.warning(warning)
        self.folder_warnings = walk.warnings
        records = self.cache.records
        for relative in [path for path in records if path not in walk.files]:
            self._remove(relative, tally)
        for relative, found in walk.files.items():
            record = records.get(relative)
            if record is None or record.stat_key != found.key:
                self._update(relative, found, tally)

    def _restat(self, candidates: set[str], tally: _Tally) -> None:
        for relative in candidates:
            if not is_memory_name(_file_name(relative)):
                continue
            found = stat_file(self.root_text, relative)
            record = self.cache.records.get(relative)
            if found is None:
                if record is not None:
                    self._remove(relative, tally)
            elif record is None or record.stat_key != found.key:
                self._update(relative, found, tally)

    # --- applying changes ---------------------------------------------------------------

    def _unindex(self, relative: str) -> None:
        record = self.cache.records.pop(relative, None)
        self.docs.pop(relative, None)
        self.symlinks.discard(relative)
        if isinstance(record, DocRecord):
            self.cache.index.remove(record.doc_id, _terms_of(record))
            self.by_id.pop(record.doc_id, None)
        self.dirty = True
        self.order = None

    def _remove(self, relative: str, tally: _Tally) -> None:
        self._unindex(relative)
        tally.removed += 1

    def _update(self, relative: str, found: FileStat, tally: _Tally) -> None:
        started = time.perf_counter()
        assert self.root is not None
        parsed = parse_memory_file(self.root / relative, self.root, self.scope, info=found.info)
        self._unindex(relative)
        if isinstance(parsed, ParseSkip):
            self.cache.records[relative] = SkipRecord(found.key, parsed.reason, parsed.detail)
            _log.warning(parsed.message)
        else:
            self._index(relative, parsed, found)
        tally.reparsed += 1
        tally.reindex_seconds += time.perf_counter() - started

    def _index(self, relative: str, doc: MemoryDoc, found: FileStat) -> None:
        doc_id = self.cache.next_id
        self.cache.next_id += 1
        weights = term_weights(doc.title, doc.description, doc.body, self.scorer)
        self.cache.index.add(doc_id, weights)
        self.cache.records[relative] = DocRecord(
            found.key, doc_id, doc.type, doc.title, doc.description, doc.body,
            doc.mtime, doc.size, found.symlink,
        )  # fmt: skip
        self.by_id[doc_id] = relative
        self.docs[relative] = doc
        if found.symlink:
            self.symlinks.add(relative)

    # --- reading ------------------------------------------------------------------------

    def doc(self, relative: str) -> MemoryDoc:
        found = self.docs.get(relative)
        if found is not None:
            return found
        record = self.cache.records[relative]
        assert isinstance(record, DocRecord) and self.root is not None
        memory_type: MemoryType = record.type  # type: ignore[assignment]
        found = MemoryDoc(
            self.root / relative, relative, self.scope, memory_type, record.title,
            record.description, record.body, record.mtime, record.size,
        )  # fmt: skip
        self.docs[relative] = found
        return found

    def ordered(self) -> list[str]:
        """Relative paths of the documents: mtime descending, then file name, then path."""
        if self.order is None:
            documents = [
                (-record.mtime, _file_name(relative), relative)
                for relative, record in self.cache.records.items()
                if isinstance(record, DocRecord)
            ]
            documents.sort()
            self.order = [relative for _, _, relative in documents]
        return self.order

    def warnings(self) -> list[str]:
        assert self.root is not None or not self.cache.records
        skips = sorted(
            ParseSkip(Path(self.root_text, relative), record.reason, record.detail).message  # type: ignore[arg-type]
            for relative, record in self.cache.records.items()
            if isinstance(record, SkipRecord)
        )
        return [*self.folder_warnings, *skips]

    def record(self, doc_id: int) -> DocRecord:
        return self.record_at(self.by_id[doc_id])

    def record_at(self, relative: str) -> DocRecord:
        record = self.cache.records[relative]
        assert isinstance(record, DocRecord)
        return record

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        self.walked = False


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
    ) -> None:
        """``watch=False`` stat-walks every root on every refresh instead of using inotify."""
        project_cache, user_cache = _default_cache_paths(roots, cache_dir)
        self.roots = roots
        self._clock = clock
        self._scorer = scorer
        self._shards = (
            _Shard("project", roots.project, project_cache, scorer=scorer, watch=watch),
            _Shard("user", roots.user, user_cache, scorer=scorer, watch=watch),
        )
        self._refreshed = False

    def refresh(self) -> ScanReport:
        """Bring documents and index up to date with the disk. Never raises."""
        started = time.perf_counter()
        tally = _Tally()
        for shard in self._shards:
            try:
                shard.refresh(tally)
            except Exception as error:  # a broken root must not break a turn
                _log.error(f"memory refresh of {shard.root_text} failed: {error!r}")
                shard.close()
        self._refreshed = True
        return ScanReport(
            docs=sum(len(shard.by_id) for shard in self._shards),
            reparsed=tally.reparsed,
            removed=tally.removed,
            full_walks=tally.full_walks,
            warnings=[warning for shard in self._shards for warning in shard.warnings()],
            duration_ms=(time.perf_counter() - started) * 1000,
            reindex_ms=tally.reindex_seconds * 1000,
            scanned_at=self._clock(),
        )

    def _ensure_refreshed(self) -> None:
        if not self._refreshed:
            self.refresh()

    def docs(self) -> list[MemoryDoc]:
        """Every memory: project first, then user; each by mtime desc, file name, path."""
        self._ensure_refreshed()
        return [shard.doc(relative) for shard in self._shards for relative in shard.ordered()]

    def recent(
        self, *, limit: int, exclude: Callable[[MemoryDoc], bool] | None = None
    ) -> list[MemoryDoc]:
        """The ``limit`` most recently modified memories, in :meth:`docs` order among ties.

        Cheaper than :meth:`docs` on a cold store: only the documents returned are built.
        """
        self._ensure_refreshed()
        streams = [
            ((-shard.record_at(relative).mtime, index, position, relative)
             for position, relative in enumerate(shard.ordered()))
            for index, shard in enumerate(self._shards)
        ]  # fmt: skip
        chosen: list[MemoryDoc] = []
        for _, index, _, relative in heapq.merge(*streams):
            if len(chosen) >= limit:
                break
            doc = self._shards[index].doc(relative)
            if exclude is None or not exclude(doc):
                chosen.append(doc)
        return chosen

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
        terms = query_tokens(query)
        shards = self._shards

        def accept(shard: int, doc_id: int) -> bool:
            return exclude is None or not exclude(shards[shard].doc(shards[shard].by_id[doc_id]))

        def order_key(shard: int, doc_id: int) -> Hashable:
            relative = shards[shard].by_id[doc_id]
            mtime = shards[shard].record_at(relative).mtime
            return (-mtime, shard, _file_name(relative), relative)

        bonus: Callable[[int, int], float] | None = None
        if self._scorer.type_bonus > 0:
            weight = self._scorer.type_bonus

            def bonus(shard: int, doc_id: int) -> float:
                memory_type = shards[shard].record(doc_id).type
                return weight * _type_keyword_hits(terms, memory_type)  # type: ignore[arg-type]

        hits = search(
            self._indexes(),
            terms,
            limit=limit,
            accept=accept,
            order_key=order_key,
            bonus=bonus,
            bonus_cap=self._scorer.type_bonus * TYPE_BONUS_CAP,
        )
        return [
            ScoredDoc(shards[hit.shard].doc(shards[hit.shard].by_id[hit.doc_id]), hit.score)
            for hit in hits
        ]

    def _indexes(self) -> list[LexicalIndex]:
        return [shard.cache.index for shard in self._shards]

    def get(self, path: Path) -> MemoryDoc | None:
        """The memory stored at ``path`` (absolute), or None."""
        self._ensure_refreshed()
        target = os.path.abspath(path)
        for shard in self._shards:
            if shard.root is None or not target.startswith(shard.root_text + os.sep):
                continue
            relative = Path(os.path.relpath(target, shard.root_text)).as_posix()
            if isinstance(shard.cache.records.get(relative), DocRecord):
                return shard.doc(relative)
        return None

    def rebuild_index_files(self) -> None:
        """Regenerate each existing root's ``MEMORY.md`` (atomically) from the current docs."""
        self.refresh()
        for shard in self._shards:
            if shard.root is None or not os.path.isdir(shard.root_text):
                continue
            docs = [shard.doc(relative) for relative in shard.ordered()]
            try:
                write_index(shard.root, docs)
            except OSError as error:
                _log.warning(f"{shard.root_text}: MEMORY.md not written: {error}")

    def save(self) -> None:
        """Persist each root's parse cache and index (atomically) if they changed."""
        for shard in self._shards:
            shard.save()

    def close(self) -> None:
        """Stop watching the roots (a later refresh walks them again)."""
        for shard in self._shards:
            shard.close()
