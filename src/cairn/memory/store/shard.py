"""One memory root of the store: its parse cache and lexical index, kept current with the disk.

A :class:`Shard` is what :class:`~cairn.memory.store.memory_store.MemoryStore` holds per root
(project, then user): the records of its files (:mod:`~cairn.memory.store.cache`), the lexical
index over them, the watcher that says which files changed, the saved index it loaded and the
journal entries it owes it, and the documents built lazily from the records. The store ranks and
lists across shards; a shard refreshes, indexes and saves one root.
"""

from __future__ import annotations

import operator
import os
import threading
import time
from bisect import bisect_left, insort
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc, MemoryScope, MemoryType
from cairn.memory.store.bulk import Stop, build_snapshot, check_stop
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
    wait_at_exit,
)
from cairn.memory.store.find_walk import listing_keys
from cairn.memory.store.folders import compare_folders, scan_folders, usable_folders, write_folders
from cairn.memory.store.journal import sweep_temp_files
from cairn.memory.store.parse import ParseSkip, parse_memory_file
from cairn.memory.store.postings import PostingArea
from cairn.memory.store.scan import (
    Walk,
    is_memory_name,
    list_names,
    stat_file,
    stat_key,
    walk_root,
)
from cairn.memory.store.scorer import ScorerConfig, term_weights
from cairn.memory.store.seen import Seen, listing_changes, write_seen
from cairn.memory.store.tokenizer import tokenize
from cairn.memory.store.walker import Walker
from cairn.memory.store.watch import TreeWatcher, open_watcher
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.memory.store.vectors import VectorTable

__all__ = ["Shard", "Tally", "VectorJob", "file_name"]

_INLINE_COMPACT_BYTES = 4 * 1024 * 1024  # a snapshot this small is compacted in the writer
_ROOT_SYMLINK = "project memory root skipped (it is a symlink)"
_log = get_logger("MEMORY")


class Tally(Value, frozen=False):
    reparsed: int = 0
    removed: int = 0
    full_walks: int = 0
    reindex_seconds: float = 0.0


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


def file_name(relative: str) -> str:
    return relative.rsplit("/", 1)[-1]


class Shard:
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
        check_postings: bool = True,
        trust_saved: bool = False,
    ) -> None:
        self.scope = scope
        self.check_postings = check_postings  # the saved lists as a whole, beside the walk
        self.trust_saved = trust_saved  # a saved index checked by its folders (see folders.py)
        self.folder_checked = False  # ... as it was: each memory served is checked first
        self.served_ok: set[str] = set()  # memories checked so (this process)
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
        self.walker: Walker | None = None  # a provisional refresh's walk, still to be applied
        self.snapshot_wanted = False  # no usable snapshot on disk: the next save writes one
        # What changed since the last save, for the journal: relative path -> (stat key and
        # terms of the version on disk, the new version's term weights or None)
        self.pending: dict[str, tuple[StatKey | None, set[str] | None]] = {}
        self.pending_weights: dict[str, dict[str, int]] = {}
        self.compactor: threading.Thread | None = None
        self.order: list[tuple[float, str, str]] | None = None  # docs() order, kept sorted
        self.skip_messages: list[str] | None = None  # warnings of skipped files (cached)
        self.vectors: VectorTable | None = None  # loaded on the refined path only
        # The saved index the records were loaded from (snapshot generation, journal entries
        # replayed; None: unknown), and every memory changed since: see seen.py
        self.seen_base: tuple[str, int] | None = None
        self.touched: set[str] = set()

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
        sweep_temp_files(self.cache_path.parent)  # (what killed writers left: see journal.py)
        cached = load_cache(
            self.cache_path,
            root=self.root_text,
            scope=self.scope,
            fingerprint=self.scorer.fingerprint(),
            verify=False,  # the posting lists are checked with the files (see refresh)
        )
        if cached is None:
            self.snapshot_wanted = True
        else:
            self.cache = cached
            self.snapshot_wanted = needs_compaction(cached)
            self._loaded_as_saved()

    def _loaded_as_saved(self) -> None:
        """The records are now the saved index's (what a check's seen file is relative to)."""
        cache = self.cache
        damaged = cache.journal_damaged
        self.seen_base = None if damaged else (cache.generation, cache.journal_entries)
        self.touched.clear()

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
            self._loaded_as_saved()

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
        wait_at_exit(self.compactor)
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

    def start_check(self, tally: Tally) -> None:
        """Start the stat walk that checks the saved index against the files, before the index
        is loaded: it runs in a thread (system calls, the GIL released) while this root's index
        and the other root's load."""
        if self.root is None or self.loaded or self.walker is not None:
            return
        if self.trust_saved and self.cache_path is not None and self.cache_path.exists():
            return  # its folders are checked once it is loaded
        if os.path.isdir(self.root_text):
            self._start_walker(tally)

    def _start_walker(self, tally: Tally) -> None:
        tally.full_walks += 1
        saved = self.cache_path is not None and (
            bool(self.cache.generation) if self.loaded else self.cache_path.exists()
        )  # (find's walk pays only against a saved index: a first scan wants every stat)
        self.walker = Walker(self.root_text, self._watcher_for_walk(), self._area,
                             self.cache_path if saved else None)  # fmt: skip

    def refresh(self, tally: Tally, *, provisional: bool = False, stop: Stop | None = None) -> None:
        if self.root is None:
            return
        if not self.loaded:
            if not provisional:
                self.start_check(tally)
            self.load()
        if not self._root_usable():
            self._drop_all(tally)
            return
        if self.walker is not None:
            if provisional and not self.walker.done():
                return  # still checking the saved index against the files
            walker, self.walker = self.walker, None
            area = self._area()
            if area is not None and not walker.done():
                area.verify()  # here, while the walk runs, rather than after it in its thread
            walk = walker.result()
            if not walker.area_ok or (area is not None and not area.verify()):
                raise DamagedIndex("the saved posting lists are damaged")
            self._apply_walk(walk, tally, walker.seen)
            return
        if self.watcher is not None and self.walked:
            changes = self.watcher.drain()
            if not changes.rescan:
                self._restat({*changes.files, *self.records.symlinks}, tally)
                return
        if provisional and self.cache.generation and len(self.records) and not self.walked:
            self._start_walker(tally)
            return
        if self.trust_saved and self.cache.generation and not self.walked and not provisional:
            self._check_folders(tally)
            return
        area = self._area()
        if area is not None and not self.walked and not area.verify():
            raise DamagedIndex("the saved posting lists are damaged")
        self._full_walk(tally, stop)

    def _area(self) -> PostingArea | None:
        """The saved posting lists still on disk, to be checked as a whole (by a walker once it
        has walked): None when there are none, or when only each list read is checked."""
        return self.cache.index.area if self.check_postings else None

    def _root_usable(self) -> bool:
        if self.scope == "project" and os.path.islink(self.root_text):
            warning = f"{self.root_text}: {_ROOT_SYMLINK}"
            if warning not in self.folder_warnings:
                _log.warning(warning)
            self.folder_warnings = [warning]
            return False
        self.folder_warnings = [w for w in self.folder_warnings if not w.endswith(_ROOT_SYMLINK)]
        return os.path.isdir(self.root_text)

    def _drop_all(self, tally: Tally) -> None:
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

    def _full_walk(self, tally: Tally, stop: Stop | None = None) -> None:
        tally.full_walks += 1
        self._apply_walk(walk_root(self.root_text, self._watcher_for_walk()), tally, stop=stop)

    def _apply_walk(
        self, walk: Walk, tally: Tally, seen: Seen | None = None, stop: Stop | None = None
    ) -> None:
        self.walked = True
        for warning in walk.warnings:
            if warning not in self.folder_warnings:
                _log.warning(warning)
        self.folder_warnings = walk.warnings
        if walk.listing is not None:
            self._apply_listing(walk, walk.listing, seen, tally)
            return
        known = self.records.keys
        if walk.keys == known:
            return  # the usual case: nothing changed, decided in one C-level comparison
        if not known and len(walk.keys) >= self.bulk_files and self._bulk_build(walk, tally, stop):
            return
        for relative in known.keys() - walk.keys.keys():
            self._remove(relative, tally)
        for relative, key in walk.keys.items():
            if known.get(relative) != key:
                check_stop(stop)
                self._update(relative, walk.infos[relative], relative in walk.symlinks, tally)

    def _apply_listing(self, walk: Walk, listing: bytes, seen: Seen | None, tally: Tally) -> None:
        """Apply ``find``'s walk: against what the last check saw (``seen``) when it was made
        on the saved index these records were loaded from, else against every record. The
        files that differ are stat-ed again from here and read when changed (as after an
        inotify event); what this check saw is then kept for the next one."""
        base, others = self.seen_base, set(walk.keys)  # (walk.keys: the symlinks)
        changes = None
        if (
            seen is not None
            and base is not None
            and (seen.generation, base[1]) == (base[0], max(base[1], seen.entries))
        ):  # the same snapshot, and no fewer journal entries replayed
            changes = listing_changes(seen.listing, listing)
            others.update(seen.changed, self.cache.journal_relatives[seen.entries :],
                          self.touched, self.records.symlinks)  # fmt: skip
        if changes is None:
            keys = listing_keys(listing)
            if keys is None:
                self._full_walk(tally)
                return
            keys.update(walk.keys)
            known = self.records.keys
            if (
                not known
                and len(keys) >= self.bulk_files
                and self._bulk_build(Walk(keys=keys), tally)
            ):
                return
            changes = dict.fromkeys(known.keys() - keys.keys())
            changes.update((relative, key) for relative, key in keys.items()
                           if known.get(relative) != key)  # fmt: skip
        for relative, key in changes.items():
            if key is None:
                if relative in self.records:
                    self._remove(relative, tally)
            elif self.records.stat_key(relative) != key:
                others.add(relative)
        self._restat(others, tally)
        self._remember_seen(listing, seen, {*changes, *others})

    def _remember_seen(self, listing: bytes, seen: Seen | None, examined: set[str]) -> None:
        base = self.seen_base
        if base is None or self.cache_path is None:
            return
        changed = self.touched | examined
        if (
            seen is not None
            and (seen.generation, seen.entries) == base
            and (seen.changed == changed and seen.listing == listing)
        ):
            return
        write_seen(self.cache_path, self.root_text, *base, sorted(changed), listing)

    def _bulk_build(self, walk: Walk, tally: Tally, stop: Stop | None = None) -> bool:
        """The first scan of a large root, into a new saved index (see
        :mod:`~cairn.memory.store.bulk`); False when it cannot be saved (then file by file)."""
        path = self.cache_path
        if path is None:
            return False
        started = time.perf_counter()
        relatives = sorted(walk.keys)
        built = build_snapshot(path, root=self.root_text, scope=self.scope, relatives=relatives,
                               scorer=self.scorer, workers=self.workers, stop=stop)  # fmt: skip
        loaded = self._load_built(path) if built else None
        if loaded is None:
            return False
        self.cache = loaded
        self.docs.clear()
        self.order = None
        self.skip_messages = None
        self._clear_pending()
        self.snapshot_wanted = False
        self._loaded_as_saved()
        tally.reparsed += len(relatives)
        tally.reindex_seconds += time.perf_counter() - started
        return True

    def _load_built(self, path: Path) -> ShardCache | None:
        return load_cache(path, root=self.root_text, scope=self.scope,
                          fingerprint=self.scorer.fingerprint())  # fmt: skip

    def _restat(self, candidates: set[str], tally: Tally) -> None:
        records = self.records  # (looked up one by one: no table of every stat key built)
        for relative in candidates:
            if not is_memory_name(file_name(relative)):
                continue
            found = stat_file(self.root_text, relative)
            if found is None:
                if relative in records:
                    self._remove(relative, tally)
            elif records.stat_key(relative) != stat_key(found[0]):
                self._update(relative, found[0], found[1], tally)

    # --- the saved index trusted: its folders checked, and each memory served ---------

    def _check_folders(self, tally: Tally) -> None:
        """The saved index reconciled with the folders changed since the last such check
        (:mod:`~cairn.memory.store.folders`); once a process (then what it changed itself)."""
        assert self.cache_path is not None
        if not self._root_usable():
            self._drop_all(tally)
            return
        others = {*self.touched, *self.records.symlinks}
        if self.folder_checked:
            self._restat(others, tally)
            return
        base = self.seen_base
        kept = usable_folders(self.cache_path, self.root_text, base)
        if kept is not None:
            others.update(kept.changed, self.cache.journal_relatives[kept.entries :])
        scan = scan_folders(self.root_text, None if kept is None else kept.keys)
        for warning in scan.warnings:
            if warning not in self.folder_warnings:
                _log.warning(warning)
        self.folder_warnings = scan.warnings
        gone, changed = compare_folders(scan, kept, self.records)
        for relative in gone:
            self._remove(relative, tally)
        self._restat(others | changed, tally)
        self.folder_checked = True
        if base is not None and not scan.warnings and (
            kept is None or kept.keys != scan.keys or kept.changed != self.touched
        ):  # fmt: skip
            write_folders(self.cache_path, self.root_text, *base, self.touched, scan)

    # --- listing without the full check ------------------------------------------------

    def open_for_listing(self, tally: Tally) -> None:
        """The saved index, reconciled with the root's file names instead of a stat of every
        file: a file added since it was saved is read, one removed is dropped. A listing then
        checks each memory with :meth:`listed` just before it shows it. Without a saved index,
        an ordinary refresh (the first scan)."""
        if self.root is None:
            return
        if not self.loaded:
            self.load()
        if not self.cache.generation or self.walked or self.walker is not None:
            self.refresh(tally)
            return
        if not self._root_usable():
            self._drop_all(tally)
            return
        names, warnings = list_names(self.root_text)
        for warning in warnings:
            if warning not in self.folder_warnings:
                _log.warning(warning)
        self.folder_warnings = warnings
        known = set(self.records.relatives())
        for relative in known - names:
            self._remove(relative, tally)
        for relative in sorted({*(names - known), *self.records.skips}):
            found = stat_file(self.root_text, relative)
            if found is None:
                if relative in self.records:
                    self._remove(relative, tally)
            elif self.records.stat_key(relative) != stat_key(found[0]):
                self._update(relative, found[0], found[1], tally)

    def listed(self, relative: str, tally: Tally) -> MemoryDoc | None:
        """The memory at ``relative`` when its file still is what its record says, read again
        when it changed; None when it is gone or no longer a memory (its record dropped)."""
        found = stat_file(self.root_text, relative)
        if found is None:
            if relative in self.records:
                self._remove(relative, tally)
            return None
        if self.records.stat_key(relative) != stat_key(found[0]):
            self._update(relative, found[0], found[1], tally)
        return self.doc(relative) if isinstance(self.records.get(relative), DocRecord) else None

    # --- applying changes ---------------------------------------------------------------

    def _unindex(self, relative: str) -> None:
        self.touched.add(relative)
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

    def _remove(self, relative: str, tally: Tally) -> None:
        self._unindex(relative)
        tally.removed += 1

    def _update(self, relative: str, info: os.stat_result, symlink: bool, tally: Tally) -> None:
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
            insort(self.order, (-mtime, file_name(relative), relative))

    def _unorder(self, relative: str, mtime: float) -> None:
        if self.order is not None:
            entry = (-mtime, file_name(relative), relative)
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
            relatives, mtimes = self.records.doc_columns()
            names = [relative.rpartition("/")[2] for relative in relatives]
            documents = list(zip(map(operator.neg, mtimes), names, relatives, strict=True))
            documents.sort()
            self.order = documents
        return self.order

    def newest(self, limit: int) -> list[tuple[float, str, str]]:
        """The first ``limit`` entries of :meth:`ordered`, without sorting every memory when
        they are not sorted yet (Forget's newest memories in a new process)."""
        if self.order is not None or limit >= len(self.records.by_slot):
            return self.ordered()[:limit]
        if limit <= 0:
            return []
        chosen = [
            (-mtime, file_name(relative), relative)
            for mtime, relative in self.records.newest_docs(limit)
        ]
        chosen.sort()
        return chosen[:limit]

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
        self.seen_base = None
        self.touched.clear()
        self.folder_checked = False
        self.served_ok.clear()

    def close(self) -> None:
        if self.watcher is not None:
            self.watcher.close()
            self.watcher = None
        self.walked = False
        self.walker = None
        self.folder_checked = False  # (a later refresh checks the folders again)
        self.served_ok.clear()
