"""The parse cache of one memory root, and its persisted form: a snapshot plus a journal.

Each file under a root has a record keyed by its relative path and holding the file's stat key
``(mtime_ns, size, inode, ctime_ns)``: a :class:`DocRecord` for a memory (its parsed fields and
its slot in the lexical index), a :class:`SkipRecord` for a file that is not one (the reason, so
its warning is listed without reading the file again; see :mod:`~cairn.memory.store.records`).
A refresh re-reads only files whose stat key changed.

On disk (``recall-index/`` of the root's state folder), three files per root:

- ``<scope>.bin``, the *snapshot*: a *head* (one ``marshal`` payload checked by a CRC-32: the
  records column by column, i.e. paths, stat keys, slots, mtimes, types, and the root's
  :class:`~cairn.memory.store.lexical_index.LexicalIndex` but for its posting lists), then the
  posting lists as raw arrays (a :class:`~cairn.memory.store.lexical_index.PostingArea`, most of
  the file). Loading reads the head (a few C-level copies, no per-memory object until a memory
  is used) and leaves the lists on disk: a query reads the lists of its terms, each checked
  against its own CRC-32, and the whole area is checked once off the first query's path;
- ``<scope>.<generation>.txt``: the records' texts (title, description, body), apart from the
  snapshot so that opening a large memory maps them instead of reading them: a record's texts
  are read, and checked against their own CRC-32, the first time that record is used;
- ``<scope>.jnl``, the *journal* (:mod:`~cairn.memory.store.journal`): one entry per memory
  written, changed or removed since the snapshot, each carrying the new record with its term
  weights (and the terms of the version it replaces), so a write appends a few kilobytes instead
  of rewriting the snapshot. Loading replays it onto the snapshot (a change to a posting list
  still on disk is noted, and made when that list is first read); once it has grown, it is
  compacted into a new snapshot (:func:`compact`, in the background for a large memory).

Any problem (a file missing, damaged or truncated, another format, Python, scorer or root) means
"no cache" for that root, with one warning, and the store rebuilds it from the memory files; a
torn journal tail (a writer killed mid-append) loses only the entries past it, which the store's
stat check finds again. The memory files stay the truth throughout: the cache only saves reading
and tokenizing them again.
"""

from __future__ import annotations

import atexit
import contextlib
import marshal
import os
import sys
import threading
import time
import weakref
import zlib
from array import array
from collections.abc import Callable, Iterable
from dataclasses import field
from pathlib import Path
from typing import IO, Any

from cairn.debug_log import get_logger
from cairn.memory.store.journal import (
    GENERATION_BYTES,
    Journal,
    frame,
    index_lock,
    new_generation,
    read_generation,
    sweep_temp_files,
    temp_path,
)
from cairn.memory.store.lexical_index import LexicalIndex
from cairn.memory.store.postings import posting_checksums
from cairn.memory.store.records import (
    DamagedIndex,
    DocRecord,
    Record,
    RecordTable,
    SkipRecord,
    StatKey,
    Texts,
)
from cairn.memory.store.tokenizer import tokenize
from cairn.values import Value

__all__ = [
    "CACHE_FORMAT",
    "COMPACT_ENTRIES",
    "COMPACT_WAIT_SECONDS",
    "DamagedIndex",
    "DocRecord",
    "Record",
    "RecordTable",
    "ShardCache",
    "SkipRecord",
    "StatKey",
    "append_changes",
    "cache_header",
    "change_entry",
    "compact",
    "install_snapshot",
    "load_cache",
    "save_cache",
    "write_snapshot_files",
]

CACHE_FORMAT = 6  # bump when the layout below changes (5: texts apart, journal; 6: lists apart)
COMPACT_ENTRIES = 256  # journal entries replayed at most before a compaction folds them in
COMPACT_BYTES = 8 * 1024 * 1024  # ... or journal bytes
COMPACT_WAIT_SECONDS = 10.0  # a closing store, or an exiting process, waits this long at most
# for its background compactions (see wait_at_exit)
_compactors: weakref.WeakSet[threading.Thread] = weakref.WeakSet()
_MAGIC = "cairn-recall-index"
_FILE_PREFIX = b"cairn-recall-index\n"  # then the generation, the head's CRC-32 and length,
_HEAD_FIELDS = 12  # ... (4 + 8 bytes), the head (marshal), then the posting lists (raw arrays)
_TEXT_PREFIX = b"cairn-recall-texts\n"  # then the generation, then the texts
_JOURNAL_MAGIC = b"cairn-recall-index"
_MARSHAL_VERSION = 4
_RUNTIME = (
    sys.implementation.cache_tag,
    sys.byteorder,
    array("i").itemsize,
    array("q").itemsize,
    array("d").itemsize,
)  # marshal and the raw arrays are only portable within one runtime
_OP_DOC, _OP_SKIP, _OP_GONE = "d", "s", "x"  # journal entries
_log = get_logger("MEMORY")


class ShardCache(Value, frozen=False):
    records: RecordTable = field(default_factory=RecordTable)
    index: LexicalIndex = field(default_factory=LexicalIndex)
    generation: str = ""  # of the snapshot it was loaded from ("" : none)
    journal_entries: int = 0  # journal entries replayed onto the snapshot
    journal_bytes: int = 0
    journal_damaged: bool = False  # the journal had a torn or damaged tail
    journal_relatives: list[str] = field(default_factory=list)  # what each replayed entry named


# --- the journal's entries ------------------------------------------------------------------


def change_entry(
    relative: str,
    record: Record | None,
    weights: dict[str, int] | None,
    old_key: StatKey | None,
    old_terms: Iterable[str] | None,
) -> bytes:
    """One journal entry: ``relative`` is now ``record`` (None: gone); the version it replaces
    had ``old_key`` and was indexed under ``old_terms``."""
    old = (old_key, "\0".join(old_terms) if old_terms is not None else None)
    if isinstance(record, DocRecord):
        assert weights is not None
        terms = list(weights)
        entry: tuple[Any, ...] = (
            _OP_DOC, relative, record.stat_key, record.type, record.title, record.description,
            record.body, record.mtime, record.size, record.symlink, "\0".join(terms),
            bytes(weights[term] for term in terms), *old,
        )  # fmt: skip
    elif isinstance(record, SkipRecord):
        entry = (_OP_SKIP, relative, record.stat_key, record.reason, record.detail, *old)
    else:
        entry = (_OP_GONE, relative, *old)
    return marshal.dumps(entry, _MARSHAL_VERSION)


def _apply(cache: ShardCache, payload: bytes) -> None:
    entry = marshal.loads(payload)  # noqa: S302 - our own file, checksummed
    op, relative = entry[0], entry[1]
    cache.journal_relatives.append(relative)
    old_key, old_terms = entry[-2], entry[-1]
    records, index = cache.records, cache.index
    current = records.get(relative)
    if isinstance(current, DocRecord):
        if old_terms is not None and tuple(old_key or ()) == current.stat_key:
            terms: Iterable[str] = old_terms.split("\0") if old_terms else []
        else:  # the entry was written against another version: read this one's terms
            terms = {*tokenize(current.title), *tokenize(current.description),
                     *tokenize(current.body)}  # fmt: skip
        index.remove(current.slot, terms)
    if current is not None:
        records.pop(relative)
    if op == _OP_DOC:
        (key, kind, title, description, body, mtime, size, symlink, joined, weights) = entry[2:12]
        terms_list = joined.split("\0") if joined else []
        slot = index.add(dict(zip(terms_list, weights, strict=True)))
        records.put(relative, DocRecord(tuple(key), slot, kind, title, description, body,
                                        mtime, size, bool(symlink)))  # fmt: skip
    elif op == _OP_SKIP:
        records.put(relative, SkipRecord(tuple(entry[2]), entry[3], entry[4]))


# --- files --------------------------------------------------------------------------------


def _header(root: str, scope: str, fingerprint: str) -> tuple[Any, ...]:
    return (_MAGIC, CACHE_FORMAT, _RUNTIME, fingerprint, root, scope)


def texts_path(path: Path, generation: str) -> Path:
    return path.with_name(f"{path.stem}.{generation}.txt")


def _journal(path: Path) -> Journal:
    return Journal(path.with_suffix(".jnl"), _JOURNAL_MAGIC)


def _decode(path: Path, header: tuple[Any, ...], *, verify: bool = True) -> ShardCache:
    """The snapshot at ``path``: its head (records and term tables) read and checked now, its
    posting lists left on disk (each checked when read; all of them now when ``verify``)."""
    source = Texts.open(path)
    start = len(_FILE_PREFIX) + GENERATION_BYTES
    lead = source.read(0, start + _HEAD_FIELDS)
    if not lead.startswith(_FILE_PREFIX) or len(lead) < start + _HEAD_FIELDS:
        raise ValueError("not a recall index file")
    generation = lead[len(_FILE_PREFIX) : start].decode("ascii")
    crc = int.from_bytes(lead[start : start + 4], "big")
    head_end = start + _HEAD_FIELDS + int.from_bytes(lead[start + 4 : start + _HEAD_FIELDS], "big")
    if head_end > source.size:
        raise ValueError("truncated")
    head = source.read(start + _HEAD_FIELDS, head_end)
    if len(head) != head_end - start - _HEAD_FIELDS or zlib.crc32(head) != crc:
        raise ValueError("checksum mismatch")
    saved_header, record_state, index_head = marshal.loads(head)  # noqa: S302 - our file
    del head
    if saved_header != header:
        raise ValueError("written by another format, runtime, scorer or root")
    index = LexicalIndex.from_area(index_head, source.read, head_end)
    area = index.area
    if area is not None and source.size != area.end:
        raise ValueError("truncated or grown since it was written")
    if verify and area is not None and not area.verify():
        raise ValueError("posting lists checksum mismatch")
    texts_file = texts_path(path, generation)
    try:
        texts = Texts.open(texts_file)
    except FileNotFoundError:
        raise ValueError(f"its texts file {texts_file.name} is missing") from None
    base = len(_TEXT_PREFIX) + GENERATION_BYTES
    if texts.read(0, base) != _TEXT_PREFIX + generation.encode("ascii"):
        raise ValueError(f"{texts_file.name} is not its texts file")
    records = RecordTable.from_state(record_state, texts, base)
    if len(records.by_slot) != index.doc_count:
        raise ValueError("records and index disagree")
    return ShardCache(records=records, index=index, generation=generation)


def load_cache(
    path: Path, *, root: str, scope: str, fingerprint: str, verify: bool = True
) -> ShardCache | None:
    """The saved cache of ``root`` (snapshot and journal), or None when there is none or it
    cannot be used (then with one warning). Without ``verify`` the posting lists are checked
    one by one as they are read, and as a whole by the caller's :meth:`PostingArea.verify`."""
    if not path.exists():
        return None
    try:
        cache = _decode(path, _header(root, scope, fingerprint), verify=verify)
    except FileNotFoundError:
        return None
    except Exception as error:  # any damage at all means "rebuild"
        _log.warning(
            f"recall index {path} not usable ({type(error).__name__}: {error}); rebuilding it "
            "from the memory files"
        )
        return None
    journal = _journal(path).read(cache.generation)
    if journal is None:
        return cache  # a journal of an older snapshot: its entries are in this one
    try:
        for payload in journal.entries:
            _apply(cache, payload)
    except Exception as error:  # an entry that does not apply: the snapshot alone, rebuilt
        _log.warning(
            f"recall index journal {_journal(path).path} not usable ({type(error).__name__}: "
            f"{error}); rebuilding the index from the memory files"
        )
        return None
    cache.journal_entries = len(journal.entries)
    cache.journal_bytes = journal.size
    if journal.damaged:
        cache.journal_damaged = True
        _log.warning(
            f"recall index journal {_journal(path).path}: a damaged or torn entry after "
            f"{len(journal.entries)} good ones; the files it named are read again"
        )
    return cache


def append_changes(path: Path, payloads: list[bytes]) -> int | None:
    """Append journal entries to the saved cache at ``path``; the journal's size afterwards, or
    None when there is no snapshot to append to (then save one) or the folder is not writable."""
    try:
        with index_lock(path):
            generation = read_generation(path, _FILE_PREFIX)
            if generation is None:
                return None
            return _journal(path).append(payloads, generation)
    except OSError as error:
        _log.debug(f"recall index journal {path} not written: {error}")
        return None


def needs_compaction(cache: ShardCache) -> bool:
    return (
        cache.journal_damaged
        or cache.journal_entries > COMPACT_ENTRIES
        or cache.journal_bytes > COMPACT_BYTES
    )


def cache_header(root: str, scope: str, fingerprint: str) -> tuple[Any, ...]:
    return _header(root, scope, fingerprint)


def write_snapshot_files(
    path: Path,
    header: tuple[Any, ...],
    generation: str,
    write_records: Callable[[IO[bytes]], tuple[Any, ...]],
    index_state: Callable[[], Any],
) -> tuple[Path, Path]:
    """The new snapshot and texts files under temp names (swapped in by the caller, the index
    lock held): ``write_records`` writes the texts and returns the record columns."""
    texts = texts_path(path, generation)
    temp_texts = temp_path(texts, generation)
    try:
        with temp_texts.open("wb") as handle:
            handle.write(_TEXT_PREFIX + generation.encode("ascii"))
            record_state = write_records(handle)
    except BaseException:  # (a build stopped, a worker failed): nothing left behind
        with contextlib.suppress(OSError):
            temp_texts.unlink()
        raise
    count, used, terms, ends, slots, weights = index_state()
    crcs, area_crc = posting_checksums(ends, slots, weights)
    total = len(weights)
    head = marshal.dumps(
        (header, record_state, (count, used, terms, ends, crcs, total, area_crc)),
        _MARSHAL_VERSION,
    )
    temp = temp_path(path, generation)
    lead = (
        _FILE_PREFIX + generation.encode("ascii") + zlib.crc32(head).to_bytes(4, "big")
        + len(head).to_bytes(_HEAD_FIELDS - 4, "big")
    )  # fmt: skip
    with temp.open("wb") as handle:  # (a temp name already: renamed in by the caller)
        for piece in (lead, head, slots, weights):
            handle.write(piece)
    return temp_texts, temp


def _write_snapshot(
    path: Path, cache: ShardCache, header: tuple[Any, ...], generation: str
) -> tuple[Path, Path]:
    return write_snapshot_files(
        path, header, generation, cache.records.to_state, cache.index.to_state
    )


def install_snapshot(path: Path, generation: str, temps: tuple[Path, Path]) -> bool:
    """Swap written snapshot files in (the journal starts over); False when it failed."""
    try:
        with index_lock(path):
            _swap_in(path, generation, temps, b"")
    except OSError as error:
        _discard(temps)
        _log.debug(f"recall index {path} not saved: {error}")
        return False
    return True


def _swap_in(path: Path, generation: str, temps: tuple[Path, Path], tail: bytes) -> None:
    """Rename a written snapshot into place (the index lock held) and start its journal."""
    temp_texts, temp = temps
    os.replace(temp_texts, texts_path(path, generation))
    os.replace(temp, path)
    _journal(path).reset(generation, tail)
    keep = texts_path(path, generation).name
    for old in path.parent.glob(f"{path.stem}.*.txt"):
        if old.name != keep:
            with contextlib.suppress(OSError):
                old.unlink()


def _discard(temps: tuple[Path, Path]) -> None:
    for temp in temps:
        with contextlib.suppress(OSError):
            temp.unlink()


def save_cache(path: Path, cache: ShardCache, *, root: str, scope: str, fingerprint: str) -> bool:
    """Write ``cache`` as a new snapshot (its journal starts over); False (logged) when the
    folder is not writable."""
    generation = new_generation()
    temps: tuple[Path, Path] | None = None
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        sweep_temp_files(path.parent)
        temps = _write_snapshot(path, cache, _header(root, scope, fingerprint), generation)
        with index_lock(path):
            _swap_in(path, generation, temps, b"")
    except (OSError, DamagedIndex) as error:  # (damage: the store rebuilds at its next use)
        if temps is not None:
            _discard(temps)
        _log.debug(f"recall index {path} not saved: {error}")
        return False
    cache.generation = generation
    cache.journal_entries = cache.journal_bytes = 0
    cache.journal_damaged = False
    return True


def compact(path: Path, *, root: str, scope: str, fingerprint: str) -> bool:
    """Fold the journal at ``path`` into a new snapshot, from the files alone (any thread or
    process may run it; the live store is not touched). Entries appended meanwhile are kept in
    the new journal. False when there was nothing to compact or it could not be done."""
    header = _header(root, scope, fingerprint)
    try:
        cache = _decode(path, header)
    except Exception:  # no usable snapshot: the live store saves a whole one instead
        return False
    journal = _journal(path)
    read = journal.read(cache.generation)
    if read is None or not read.entries:
        return False
    for payload in read.entries:
        _apply(cache, payload)
    generation = new_generation()
    temps: tuple[Path, Path] | None = None
    try:
        sweep_temp_files(path.parent)
        temps = _write_snapshot(path, cache, header, generation)
        with index_lock(path):
            if read_generation(path, _FILE_PREFIX) != cache.generation:
                _discard(temps)  # another process compacted meanwhile
                return False
            later = journal.read(cache.generation, start=read.end)
            tail = b"".join(frame(p) for p in later.entries) if later is not None else b""
            _swap_in(path, generation, temps, tail)
    except (OSError, DamagedIndex) as error:
        if temps is not None:
            _discard(temps)
        _log.debug(f"recall index {path} not compacted: {error}")
        return False
    return True


def wait_at_exit(compactor: threading.Thread) -> None:
    """Have the interpreter's exit wait for ``compactor`` (a daemon: it must not keep a process
    that is not exiting), up to :data:`COMPACT_WAIT_SECONDS` for all of them: a short-lived
    process (``cairn memory forget``) that never closes its store would otherwise end it
    mid-write. One cut short leaves temp files, which the next load sweeps."""
    if not _compactors:
        atexit.register(_wait_for_compactors)
    _compactors.add(compactor)


def _wait_for_compactors() -> None:
    deadline = time.monotonic() + COMPACT_WAIT_SECONDS
    for compactor in list(_compactors):
        compactor.join(max(deadline - time.monotonic(), 0))
