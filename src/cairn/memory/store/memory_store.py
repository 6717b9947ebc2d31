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

import contextlib
import heapq
import os
import time
from collections.abc import Callable, Collection, Iterable, Iterator, Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Protocol, TypeVar, overload

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc
from cairn.memory.paths import MemoryRoots, index_paths
from cairn.memory.store.bulk import BULK_MIN_FILES, IndexingStopped, Stop, default_workers
from cairn.memory.store.cache import COMPACT_WAIT_SECONDS, DamagedIndex, DocRecord
from cairn.memory.store.index_file import MAX_INDEX_LINES, write_index
from cairn.memory.store.lexical_index import search
from cairn.memory.store.scan import is_memory_name, stat_file, stat_key
from cairn.memory.store.scorer import DEFAULT_SCORER, ScorerConfig
from cairn.memory.store.shard import Shard, Tally, VectorJob, file_name
from cairn.memory.store.tokenizer import load_stemmer, query_tokens
from cairn.values import Value

if TYPE_CHECKING:
    import numpy as np

    from cairn.memory.store.embedding import EmbeddingModel

__all__ = ["MemoryStore", "ScanReport", "ScoredDoc", "VectorJob", "VectorSync"]

_T = TypeVar("_T")
_FIRST_PAGE = 200  # memories a listing yields before it sorts all of a root's (a CLI page)
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


class VectorSync(Protocol):
    """Vectors shared between processes (the PostgreSQL backend's table); blocking calls."""

    def fetch(
        self, scope: str, model: str, dim: int, wanted: Mapping[str, bytes]
    ) -> list[tuple[str, bytes, np.ndarray]]: ...

    def store(
        self, scope: str, model: str, rows: Sequence[tuple[str, bytes, np.ndarray]]
    ) -> None: ...

    def close(self) -> None: ...


def _default_cache_paths(roots: MemoryRoots, cache_dir: Path | None) -> tuple[Path, Path]:
    if cache_dir is not None:
        return cache_dir / "project.bin", cache_dir / "user.bin"
    return index_paths(roots)


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
        check_postings: bool = True,
        trust_saved: bool = False,
    ) -> None:
        """``watch=False`` stat-walks every root on every refresh instead of using inotify;
        ``before_refresh`` runs first at each refresh (a database backend catching up). A first
        scan of ``bulk_files`` files or more reads them in ``workers`` processes (default: one
        per core, at most 4) straight into a new saved index. ``check_postings=False`` (a
        command that reads few lists: ``cairn memory search``, ``show``, ``forget``): a saved
        index's posting lists are not checked as a whole beside the check of the files (37 MB
        at 100,000 memories), only each list as it is read, which is all that a read relies on
        (a write notes its changes to a list it has not read; a compaction checks every list
        before it rewrites them); damage in a list nothing read is found by the next process
        that checks them all (a session). ``trust_saved`` (the same commands): a saved index is
        checked against its folders' stat instead of every file's, and each memory a method
        returns is checked (``stat``, read again when it changed) before it is returned
        (:mod:`~cairn.memory.store.folders`)."""
        project_cache, user_cache = _default_cache_paths(roots, cache_dir)
        self.roots = roots
        self._clock = clock
        self._scorer = scorer
        options = {
            "scorer": scorer,
            "watch": watch,
            "bulk_files": bulk_files,
            "workers": default_workers() if workers is None else workers,
            "check_postings": check_postings,
            "trust_saved": trust_saved,
        }
        self._shards = (
            Shard("project", roots.project, project_cache, **options),  # type: ignore[arg-type]
            Shard("user", roots.user, user_cache, **options),  # type: ignore[arg-type]
        )
        self._refreshed = self._scan_stopped = False  # (a first scan stopped: nothing to save)
        self._trust_saved = trust_saved
        self._before_refresh = before_refresh
        self.vector_sync: VectorSync | None = None  # vectors shared by a database backend

    def refresh(self, *, provisional: bool = False, stop: Stop | None = None) -> ScanReport:
        """Bring documents and index up to date with the disk. Never raises but
        :class:`~cairn.memory.store.bulk.IndexingStopped`.

        ``provisional`` (Recall's fast phase, the warm-up before the first prompt): a saved
        index just loaded is served at once and checked against the files in a thread; what
        that check finds is applied by a later refresh, and until then a memory whose file
        changed or vanished is left out of :meth:`rank` and :meth:`recent` rather than served
        from the saved copy. Any other refresh waits for the check.

        ``stop`` (the warm-up of a process that may close first): a first scan (no saved index)
        looks at it between files and raises ``IndexingStopped`` once it is set; every shard is
        then reset and :meth:`save` saves nothing (nothing half-built) until a refresh ends.
        """
        started = time.perf_counter()
        tally = Tally()
        self._catch_up()
        if not provisional:  # every root's walk starts now (the user's while the project's loads)
            for shard in self._shards:
                with contextlib.suppress(Exception):  # (met again, and logged, by its refresh)
                    shard.start_check(tally)
        for shard in self._shards:
            try:
                shard.refresh(tally, provisional=provisional, stop=stop)
            except IndexingStopped:
                for each in self._shards:
                    each.close()
                    each.reset()
                self._refreshed, self._scan_stopped = False, True
                raise
            except DamagedIndex as error:
                self._rebuild(shard, error)
                shard.refresh(tally)
            except Exception as error:  # a broken root must not break a turn
                _log.error(f"memory refresh of {shard.root_text} failed: {error!r}")
                shard.close()
        self._refreshed, self._scan_stopped = True, False
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

    def _catch_up(self) -> None:
        if self._before_refresh is not None:
            try:
                self._before_refresh()
            except Exception as error:  # the files as they are, then
                _log.warning(f"memory catch-up before reading failed: {error!r}")

    def _rebuild(self, shard: Shard, error: DamagedIndex) -> None:
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
                if shard.records.damaged or shard.cache.index.damaged:
                    self._rebuild(shard, error)
            self.refresh()
            return action()

    def warm(self, stop: Stop | None = None) -> ScanReport:
        """A provisional :meth:`refresh`, then load the stemmer when there is something to
        rank, for a front end that can do this before the first prompt (off the event loop).
        ``regex`` (~15 ms) is left to the first non-ASCII text: an English prompt never needs it.
        ``stop``: see :meth:`refresh` (``IndexingStopped``: nothing was indexed)."""
        report = self.refresh(provisional=True, stop=stop)
        if report.docs:
            load_stemmer()
        return report

    def _ensure_refreshed(self) -> None:
        if not self._refreshed:
            self.refresh()

    def _live(self, shard: Shard, relative: str) -> bool:
        """Whether a memory of a provisional shard still is what its saved record says."""
        if not shard.provisional:
            return True
        found = stat_file(shard.root_text, relative)
        return found is not None and stat_key(found[0]) == shard.records.stat_key(relative)

    def docs(self) -> list[MemoryDoc]:
        """Every memory: project first, then user; each by mtime desc, file name, path."""
        self._ensure_refreshed()
        return self._guarded(lambda: list(self._served_in_order()))

    def _served_in_order(self) -> Iterator[MemoryDoc]:
        tally = Tally()
        for shard in self._shards:
            for entry in list(shard.ordered()):
                doc = _served(shard, entry[2], tally)
                if doc is not None:
                    yield doc

    def count(self) -> int:
        """How many memories there are (no document is built)."""
        self._ensure_refreshed()
        return sum(len(shard.records.by_slot) for shard in self._shards)

    def iter_docs(self) -> Iterator[MemoryDoc]:
        """:meth:`docs`, one at a time (a long listing starts without building them all)."""
        self._ensure_refreshed()
        yield from self._served_in_order()

    def listing(self) -> tuple[int, Iterator[MemoryDoc]]:
        """How many memories there are and :meth:`docs`, one at a time, for a long listing that
        starts at once: served from the saved index without first checking every file against
        it. The roots' folders are listed (by name) first, so a file added or removed since the
        index was saved is found; each memory's file is then checked just before it is yielded
        (re-read when it changed, left out when it is gone). The one gap: a memory edited in
        place whose date changed is yielded at the position of its old date."""
        if self._refreshed:
            return self.count(), self.iter_docs()
        tally = self._open_for_listing()
        return sum(len(shard.records.by_slot) for shard in self._shards), self._listed(tally)

    def _open_for_listing(self) -> Tally:
        """Each shard's saved index reconciled with its root's file names
        (:meth:`Shard.open_for_listing`), not with a stat of every file."""
        self._catch_up()
        tally = Tally()
        for shard in self._shards:
            try:
                shard.open_for_listing(tally)
            except DamagedIndex as error:
                self._rebuild(shard, error)
                shard.refresh(tally)
            except Exception as error:  # as refresh(): a broken root lists nothing
                _log.error(f"memory listing of {shard.root_text} failed: {error!r}")
                shard.close()
        return tally

    def _listed(self, tally: Tally) -> Iterator[MemoryDoc]:
        """Each shard's memories in :meth:`docs` order, each checked just before it is
        yielded: the first page found without sorting them all (a listing that stops there
        sorts nothing), then the others in their order as it was before the page (a memory
        the page re-read is not yielded again; only the page's own memories were checked)."""
        for shard in self._shards:
            page = shard.newest(_FIRST_PAGE)
            for _, _, relative in page:
                doc = shard.listed(relative, tally)
                if doc is not None:
                    yield doc
            if len(page) < _FIRST_PAGE:
                continue
            shown = {relative for _, _, relative in page}
            for _, _, relative in list(shard.ordered()):
                if relative not in shown and (doc := shard.listed(relative, tally)) is not None:
                    yield doc

    def recent(
        self, *, limit: int, exclude: Callable[[MemoryDoc], bool] | None = None
    ) -> list[MemoryDoc]:
        """The ``limit`` most recently modified memories, in :meth:`docs` order among ties.

        Cheaper than :meth:`docs` on a cold store: only the documents returned are built.
        """
        self._ensure_refreshed()
        return self._guarded(lambda: self._recent(limit, exclude))

    def _recent(self, limit: int, exclude: Callable[[MemoryDoc], bool] | None) -> list[MemoryDoc]:
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

        stale: list[tuple[Shard, str]] = []  # served from a trusted index, changed on disk

        def accept(shard: int, slot: int) -> bool:
            relative = shards[shard].relative_of(slot)
            if not self._live(shards[shard], relative):
                return False
            if not _unchanged(shards[shard], relative):
                stale.append((shards[shard], relative))
                return False
            return exclude is None or not exclude(shards[shard].doc(relative))

        def order_key(shard: int, slot: int) -> tuple[float, int, str, str]:
            relative = shards[shard].relative_of(slot)
            mtime = shards[shard].records.mtime(relative)
            return (-mtime, shard, file_name(relative), relative)

        terms = query_tokens(query)
        while True:
            hits = search([shard.cache.index for shard in shards], terms, limit=limit,
                          accept=accept, order_key=order_key)  # fmt: skip
            if not stale:
                break
            tally = Tally()  # read again, then ranked again on what they say now
            for shard, relative in stale:
                _served(shard, relative, tally)
            stale.clear()
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
        return list(self.nearest(vector, limit=limit, exclude=exclude)[0])

    def nearest(
        self,
        vector: np.ndarray,
        *,
        limit: int,
        exclude: Callable[[MemoryDoc], bool] | None = None,
    ) -> tuple[Sequence[MemoryDoc], np.ndarray]:
        """:meth:`similar`, and the vector of each memory it returns (one row each). Without
        ``exclude``, a document is only built when the caller reads it from the sequence."""
        import numpy as np

        from cairn.memory.store.vectors import rank_rows

        tables = [(index, shard.vectors) for index, shard in enumerate(self._shards)
                  if shard.vectors is not None and len(shard.vectors)]  # fmt: skip
        if limit <= 0 or not tables:
            return _Docs(self._shards, []), np.empty((0, len(vector)), dtype=np.float32)
        # every used row of every root, with its root and its score: one product a root
        parts = [(index, *table.used_scores(vector)) for index, table in tables]
        owner = np.concatenate([np.full(len(used), index) for index, used, _ in parts])
        row = np.concatenate([used for _, used, _ in parts])
        score = np.concatenate([scores for _, _, scores in parts])
        names = {index: table.names for index, table in tables}

        def key(at: int) -> tuple[int, str]:
            index = int(owner[at])
            return index, names[index][int(row[at])] or ""

        kept: list[int] = []  # positions in the concatenation, best first
        refs: list[tuple[int, str]] = []
        wanted = limit
        while True:
            order = rank_rows(score, wanted, key)
            kept, refs = [], []
            for at, index, number in zip(order.tolist(), owner[order].tolist(),
                                         row[order].tolist(), strict=True):  # fmt: skip
                shard, relative = self._shards[index], names[index][number]
                if relative is None:
                    continue
                alive = relative in shard.docs  # a built document is a live one
                if not alive and not isinstance(shard.records.get(relative), DocRecord):
                    continue  # removed since its vector was computed
                if exclude is None or not exclude(shard.doc(relative)):
                    kept.append(at)
                    refs.append((index, relative))
                    if len(kept) == limit:
                        break
            if len(kept) == limit or wanted >= len(score):
                break
            wanted *= 4
        taken = np.array(kept, dtype=np.intp)
        matrix = np.empty((len(kept), len(vector)), dtype=np.float32)
        for index, table in tables:
            mine = np.flatnonzero(owner[taken] == index)
            if mine.size:
                matrix[mine] = table.matrix[row[taken[mine]]]
        return _Docs(self._shards, refs), matrix

    def get(self, path: Path) -> MemoryDoc | None:
        """The memory stored at ``path`` (absolute), or None."""
        self._ensure_refreshed()
        return self._guarded(lambda: self._get(path))

    def _get(self, path: Path) -> MemoryDoc | None:
        for shard, relative in self._locate(path):
            if isinstance(shard.records.get(relative), DocRecord):
                found = _served(shard, relative, Tally())
                if found is not None:
                    return found
        return None

    def find(self, reference: str) -> list[MemoryDoc]:
        """Memories named by ``reference``: a path (absolute, ``scope:relative`` or relative to
        a root), looked up directly, else a title: an exact title wins, otherwise the titles
        containing ``reference`` (any case).

        Current with the disk. A path is looked up without checking every file: on a store not
        yet refreshed the saved index is opened as for :meth:`listing` and only the named file
        is checked (read again when it changed, not found when it is gone); only a title needs
        every memory, so only the title look-up refreshes the whole store (and then builds only
        the memories whose texts hold ``reference``: :meth:`docs_containing`)."""
        wanted = reference.strip()
        if not wanted:
            return []
        if not is_memory_name(os.path.basename(wanted)):
            found = []  # no memory's path: a title
        elif self._refreshed or self._trust_saved:
            self.refresh()
            found = self._guarded(lambda: self._find_paths(wanted, self._get))
        else:
            tally = self._open_for_listing()
            found = self._guarded(
                lambda: self._find_paths(wanted, lambda path: self._checked(path, tally))
            )
        if found:
            return found
        self.refresh()
        needle = wanted.casefold()
        titled = [doc for doc in self.docs_containing(wanted) if needle in doc.title.casefold()]
        exact = [doc for doc in titled if doc.title.casefold() == needle]
        return exact or titled

    def docs_containing(self, *texts: str, newest: int = 0) -> list[MemoryDoc]:
        """In :meth:`docs` order, the memories that contain each of ``texts`` ignoring case
        (:meth:`str.casefold`; each within the title, the description or the body; the first
        the rarest, ideally), and each root's ``newest`` most recently modified memories. Only
        those documents are built: the saved texts are searched in bulk (a title or a request
        looked up among 100,000 memories)."""
        self._ensure_refreshed()
        needles = [text.casefold() for text in texts if text]
        return self._guarded(lambda: self._containing(needles, newest))

    def _containing(self, needles: list[str], newest: int) -> list[MemoryDoc]:
        docs: list[MemoryDoc] = []
        for shard in self._shards:
            found = (
                shard.records.containing(needles)
                if needles
                else set(shard.records.by_slot.values())
            )
            tally = Tally()  # (each memory as it is now when the index is trusted)
            chosen = [relative for relative in found
                      if (doc := _served(shard, relative, tally)) is not None
                      and _holds(doc, needles)]  # fmt: skip
            if newest:
                chosen += [entry[2] for entry in shard.newest(newest)
                           if _served(shard, entry[2], tally) is not None]  # fmt: skip
            order = sorted(
                {
                    (-shard.records.mtime(relative), file_name(relative), relative)
                    for relative in chosen
                }
            )
            docs += [shard.doc(relative) for _, _, relative in order]
        return docs

    def _find_paths(self, wanted: str, get: Callable[[Path], MemoryDoc | None]) -> list[MemoryDoc]:
        scope, colon, rest = wanted.partition(":")
        found: list[MemoryDoc] = []
        for shard in self._shards:
            if shard.root is None:
                continue
            named = [shard.root / rest] if colon and scope == shard.scope else []
            for path in (*named, shard.root / wanted):  # (an absolute ``wanted`` stays itself)
                doc = get(path)
                if doc is not None and doc not in found:
                    found.append(doc)
        return found

    def _checked(self, path: Path, tally: Tally) -> MemoryDoc | None:
        """:meth:`_get` on shards opened for listing: the file at ``path`` checked first."""
        for shard, relative in self._locate(path):
            if shard.records.get(relative) is not None:  # else not a memory file (any more)
                doc = shard.listed(relative, tally)
                if doc is not None:
                    return doc
        return None

    def _locate(self, path: Path) -> Iterator[tuple[Shard, str]]:
        """The shards whose root holds ``path``, with its path relative to that root."""
        target = os.path.abspath(path)
        for shard in self._shards:
            if shard.root is not None and target.startswith(shard.root_text + os.sep):
                yield shard, Path(os.path.relpath(target, shard.root_text)).as_posix()

    def changed_on_disk(self, labels: Iterable[str]) -> set[str]:
        """Of ``labels`` (``scope:relative``), those whose file is no longer what this store
        read (gone, or its stat key is not its record's): Forget's check, under the lock, that
        a file is still what its plan was made from."""
        changed: set[str] = set()
        for label in labels:
            scope, _, relative = label.partition(":")
            for shard in self._shards:
                if shard.scope == scope and shard.root is not None and not _as_recorded(
                    shard, relative
                ):
                    changed.add(label)
        return changed

    def note_changed(self, labels: Iterable[str]) -> None:
        """Files this process changed outside the store (``scope:relative``, as Forget and
        restore report them): the next refresh re-stats them, whatever else it checks."""
        for label in labels:
            scope, _, relative = label.partition(":")
            for shard in self._shards:
                if shard.scope == scope:
                    shard.touched.add(relative)

    def rebuild_index_files(self, scopes: Collection[str] | None = None) -> None:
        """Regenerate each existing root's ``MEMORY.md`` (atomically) from the current docs, or
        only the roots of ``scopes`` (those a change touched): only the newest memories make
        its lines, so only they are read, and they are found without sorting every memory."""
        self.refresh()
        self._guarded(lambda: self._write_index_files(scopes))

    def _write_index_files(self, scopes: Collection[str] | None) -> None:
        for shard in self._shards:
            if shard.root is None or not os.path.isdir(shard.root_text):
                continue
            if scopes is not None and shard.scope not in scopes:
                continue
            newest = shard.newest(MAX_INDEX_LINES)
            tally = Tally()  # (a trusted index: each line's memory checked; again if one changed)
            while [_served(shard, entry[2], tally) for entry in newest] and (
                tally.reparsed or tally.removed
            ):
                newest, tally = shard.newest(MAX_INDEX_LINES), Tally()
            docs = [shard.doc(entry[2]) for entry in newest]
            try:
                write_index(shard.root, docs, total=len(shard.records.by_slot))
            except OSError as error:
                _log.warning(f"{shard.root_text}: MEMORY.md not written: {error}")

    def save(self) -> None:
        """Persist each root's parse cache and index (atomically) if they changed."""
        for shard in self._shards if not self._scan_stopped else ():
            shard.save()

    def close(self) -> None:
        """Stop watching the roots (a later refresh walks them again); wait for a compaction
        of the saved index that is under way, up to :data:`COMPACT_WAIT_SECONDS` in all (one
        cut short by the process's exit leaves temp files, which the next load sweeps: the
        journal it was folding stays, and is folded again later)."""
        deadline = time.monotonic() + COMPACT_WAIT_SECONDS
        for shard in self._shards:
            shard.close()
            if shard.compactor is not None:
                shard.compactor.join(max(deadline - time.monotonic(), 0))


def _unchanged(shard: Shard, relative: str) -> bool:
    """Whether a memory about to be served is what its record says (always, unless ``shard``
    trusts its saved index: then a ``stat``, once a process)."""
    if not shard.folder_checked or relative in shard.served_ok:
        return True
    if not _as_recorded(shard, relative):
        return False  # (_served reads it again)
    shard.served_ok.add(relative)
    return True


def _as_recorded(shard: Shard, relative: str) -> bool:
    """Whether the file at ``relative`` is there with the stat key of its record."""
    found = stat_file(shard.root_text, relative)
    return found is not None and shard.records.stat_key(relative) == stat_key(found[0])


def _served(shard: Shard, relative: str, tally: Tally) -> MemoryDoc | None:
    """The memory at ``relative`` as its file is now (read again when it changed; None when
    gone) when ``shard`` trusts its saved index (a ``stat``, once a process)."""
    if shard.folder_checked and relative not in shard.served_ok:
        shard.served_ok.add(relative)
        return shard.listed(relative, tally)
    return shard.doc(relative) if isinstance(shard.records.get(relative), DocRecord) else None


def _holds(doc: MemoryDoc, needles: Sequence[str]) -> bool:
    """Whether each of ``needles`` (casefolded) is in ``doc``'s title, description or body."""
    texts = [text.casefold() for text in (doc.title, doc.description, doc.body)]
    return all(any(needle in text for text in texts) for needle in needles)


class _Docs(Sequence[MemoryDoc]):
    """Documents by (shard, relative path), each built when it is first read."""

    def __init__(self, shards: Sequence[Shard], refs: list[tuple[int, str]]) -> None:
        self._shards = shards
        self._refs = refs

    def __len__(self) -> int:
        return len(self._refs)

    @overload
    def __getitem__(self, item: int) -> MemoryDoc: ...
    @overload
    def __getitem__(self, item: slice) -> list[MemoryDoc]: ...
    def __getitem__(self, item: int | slice) -> MemoryDoc | list[MemoryDoc]:
        if isinstance(item, slice):
            return [self._shards[index].doc(relative) for index, relative in self._refs[item]]
        index, relative = self._refs[item]
        return self._shards[index].doc(relative)
