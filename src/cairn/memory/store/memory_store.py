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
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.cache import (
    DocRecord,
    RecordTable,
    ShardCache,
    SkipRecord,
    load_cache,
    save_cache,
)
from cairn.memory.store.index_file import write_index
from cairn.memory.store.lexical_index import search
from cairn.memory.store.parse import ParseSkip, parse_memory_file
from cairn.memory.store.scan import is_memory_name, stat_file, stat_key, walk_root
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
        self.docs: dict[str, MemoryDoc] = {}  # built on first use
        self.folder_warnings: list[str] = []
        self.watcher: TreeWatcher | None = None
        self.loaded = False
        self.walked = False  # a full walk registered watches on every folder
        self.dirty = False  # changed since loaded or saved
        self.order: list[str] | None = None  # relative paths in docs() order
        self.skip_messages: list[str] | None = None  # warnings of skipped files (cached)
        self.vectors: VectorTable | None = None  # loaded on the refined path only

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
            self.dirty = True
        else:
            self.cache = cached

    def save(self) -> None:
        self.save_vectors()
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
                self._restat({*changes.files, *self.records.symlinks}, tally)
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
        known = self.records.keys
        if walk.keys == known:
            return  # the usual case: nothing changed, decided in one C-level comparison
        for relative in known.keys() - walk.keys.keys():
            self._remove(relative, tally)
        for relative, key in walk.keys.items():
            if known.get(relative) != key:
                self._update(relative, walk.infos[relative], relative in walk.symlinks, tally)

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
        if isinstance(record, DocRecord):
            self.cache.index.remove(record.slot, _terms_of(record))
        self.dirty = True
        self.order = None
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
            self.docs[relative] = parsed
        tally.reparsed += 1
        tally.reindex_seconds += time.perf_counter() - started

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

    def ordered(self) -> list[str]:
        """Relative paths of the documents: mtime descending, then file name, then path."""
        if self.order is None:
            documents = [
                (-mtime, _file_name(relative), relative)
                for relative, mtime in self.records.doc_mtimes()
            ]
            documents.sort()
            self.order = [relative for _, _, relative in documents]
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
        before_refresh: Callable[[], None] | None = None,
    ) -> None:
        """``watch=False`` stat-walks every root on every refresh instead of using inotify;
        ``before_refresh`` runs first at each refresh (a database backend catching up)."""
        project_cache, user_cache = _default_cache_paths(roots, cache_dir)
        self.roots = roots
        self._clock = clock
        self._scorer = scorer
        self._shards = (
            _Shard("project", roots.project, project_cache, scorer=scorer, watch=watch),
            _Shard("user", roots.user, user_cache, scorer=scorer, watch=watch),
        )
        self._refreshed = False
        self._before_refresh = before_refresh
        self.vector_sync: VectorSync | None = None  # vectors shared by a database backend

    def refresh(self) -> ScanReport:
        """Bring documents and index up to date with the disk. Never raises."""
        started = time.perf_counter()
        tally = _Tally()
        if self._before_refresh is not None:
            try:
                self._before_refresh()
            except Exception as error:  # the files as they are, then
                _log.warning(f"memory catch-up before reading failed: {error!r}")
        for shard in self._shards:
            try:
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

    def warm(self) -> ScanReport:
        """:meth:`refresh`, then load what ranking a query needs when there is something to
        rank, for a front end that can do this before the first prompt (off the event loop)."""
        report = self.refresh()
        if report.docs:
            load_tokenizer()
        return report

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
        streams = [self._by_recency(index) for index in range(len(self._shards))]
        chosen: list[MemoryDoc] = []
        for _, index, _, relative in heapq.merge(*streams):
            if len(chosen) >= limit:
                break
            doc = self._shards[index].doc(relative)
            if exclude is None or not exclude(doc):
                chosen.append(doc)
        return chosen

    def _by_recency(self, index: int) -> Iterator[tuple[float, int, int, str]]:
        shard = self._shards[index]
        for position, relative in enumerate(shard.ordered()):
            yield -shard.records.mtime(relative), index, position, relative

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
        shards = self._shards
        if not any(shard.records.by_slot for shard in shards):
            return []  # nothing to rank (and no query to tokenize)

        def accept(shard: int, slot: int) -> bool:
            return exclude is None or not exclude(
                shards[shard].doc(shards[shard].relative_of(slot))
            )

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
        target = os.path.abspath(path)
        for shard in self._shards:
            if shard.root is None or not target.startswith(shard.root_text + os.sep):
                continue
            relative = Path(os.path.relpath(target, shard.root_text)).as_posix()
            if isinstance(shard.records.get(relative), DocRecord):
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
