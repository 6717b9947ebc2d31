"""The parse cache of one memory root, and its persisted form.

Each file under a root has a record keyed by its relative path and holding the file's stat key
``(mtime_ns, size, inode, ctime_ns)``: a :class:`DocRecord` for a memory (its parsed fields and
its slot in the lexical index), a :class:`SkipRecord` for a file that is not one (the reason, so
its warning is listed without reading the file again). A refresh re-reads only files whose stat
key changed.

The records and the root's :class:`~cairn.memory.store.lexical_index.LexicalIndex` are saved
together in one ``marshal`` file, written atomically and checked by a CRC-32, so a new process
starts from them instead of parsing and indexing every file. Records are saved column by column
(paths, stat keys, slots, mtimes, one UTF-8 blob of texts) so that loading is a few C-level copies:
a record's text becomes Python strings only when that record is first used. Any problem with the
file (missing, damaged, another format, Python or scorer version, another root) means "no cache":
the store then rebuilds, logging one debug line."""

from __future__ import annotations

import marshal
import mmap
import sys
import zlib
from array import array
from collections.abc import Iterator
from dataclasses import field
from pathlib import Path
from typing import Any, NamedTuple

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes
from cairn.memory.store.lexical_index import LexicalIndex
from cairn.values import Value

__all__ = [
    "CACHE_FORMAT",
    "DocRecord",
    "Record",
    "RecordTable",
    "ShardCache",
    "SkipRecord",
    "StatKey",
    "load_cache",
    "save_cache",
]

CACHE_FORMAT = 4  # bump when the layout below changes
_MAGIC = "cairn-recall-index"
_FILE_PREFIX = b"cairn-recall-index\n"  # then a CRC-32 of the rest, then the marshal payload
_MARSHAL_VERSION = 4
_RUNTIME = (
    sys.implementation.cache_tag,
    sys.byteorder,
    array("i").itemsize,
    array("q").itemsize,
    array("d").itemsize,
)  # marshal and the raw arrays are only portable within one runtime
_SKIP_SLOT = -1  # the slot column of a skipped file
_TEXTS_PER_RECORD = 3  # title, description, body (a skip: detail, "", "")
_log = get_logger("MEMORY")

StatKey = tuple[int, int, int, int]  # (st_mtime_ns, st_size, st_ino, st_ctime_ns)


class DocRecord(NamedTuple):
    stat_key: StatKey
    slot: int  # the document's slot in the root's lexical index
    type: str
    title: str
    description: str
    body: str
    mtime: float
    size: int
    symlink: bool  # a symlink inside the root: re-stat on every refresh


class SkipRecord(NamedTuple):
    stat_key: StatKey
    reason: str
    detail: str


Record = DocRecord | SkipRecord


class _Columns(Value, frozen=False):
    """A loaded table, column by column; row i belongs to relatives[i]."""

    relatives: list[str]
    keys: array  # 4 per row
    slots: array
    mtimes: array
    sizes: array
    symlinks: bytes
    kinds: list[str]  # memory type, or skip reason
    text_ends: array  # 3 per row: end offsets in text
    text: bytes

    def text_at(self, row: int, part: int) -> str:
        at = row * _TEXTS_PER_RECORD + part
        start = self.text_ends[at - 1] if at else 0
        return self.text[start : self.text_ends[at]].decode("utf-8", "surrogatepass")

    def record(self, row: int) -> Record:
        base = row * 4
        key: StatKey = (
            self.keys[base], self.keys[base + 1], self.keys[base + 2], self.keys[base + 3]
        )  # fmt: skip
        if self.slots[row] == _SKIP_SLOT:
            return SkipRecord(key, self.kinds[row], self.text_at(row, 0))
        return DocRecord(
            key, self.slots[row], self.kinds[row], self.text_at(row, 0), self.text_at(row, 1),
            self.text_at(row, 2), self.mtimes[row], self.sizes[row], bool(self.symlinks[row]),
        )  # fmt: skip


class RecordTable:
    """Relative path -> record for one root, with the lookups the store needs kept current."""

    def __init__(self) -> None:
        self.keys: dict[str, StatKey] = {}  # every record's stat key
        self.by_slot: dict[int, str] = {}  # slot -> relative path, for memories
        self.symlinks: set[str] = set()
        self.skips: set[str] = set()  # relative paths of skipped files
        self._records: dict[str, Record] = {}
        self._rows: dict[str, int] = {}  # loaded rows not yet turned into records
        self._columns: _Columns | None = None

    def __len__(self) -> int:
        return len(self.keys)

    def get(self, relative: str) -> Record | None:
        found = self._records.get(relative)
        if found is not None:
            return found
        row = self._rows.pop(relative, None)
        if row is None or self._columns is None:
            return None
        found = self._records[relative] = self._columns.record(row)
        return found

    def put(self, relative: str, record: Record) -> None:
        self.pop(relative)
        self._records[relative] = record
        self.keys[relative] = record.stat_key
        if isinstance(record, DocRecord):
            self.by_slot[record.slot] = relative
            if record.symlink:
                self.symlinks.add(relative)
        else:
            self.skips.add(relative)

    def pop(self, relative: str) -> Record | None:
        found = self.get(relative)
        self._records.pop(relative, None)
        self.keys.pop(relative, None)
        self.symlinks.discard(relative)
        self.skips.discard(relative)
        if isinstance(found, DocRecord):
            self.by_slot.pop(found.slot, None)
        return found

    def items(self) -> Iterator[tuple[str, Record]]:
        for relative in list(self.keys):
            found = self.get(relative)
            assert found is not None
            yield relative, found

    def mtime(self, relative: str) -> float:
        """A memory's mtime, without building its record."""
        row = self._rows.get(relative)
        if row is not None and self._columns is not None:
            return self._columns.mtimes[row]
        found = self._records[relative]
        assert isinstance(found, DocRecord)
        return found.mtime

    def doc_mtimes(self) -> Iterator[tuple[str, float]]:
        """(relative path, mtime) of every memory, without building records."""
        for relative in self.by_slot.values():
            yield relative, self.mtime(relative)

    def skipped(self) -> Iterator[tuple[str, SkipRecord]]:
        for relative in sorted(self.skips):
            found = self.get(relative)
            assert isinstance(found, SkipRecord)
            yield relative, found

    # --- persistence --------------------------------------------------------------------

    def to_state(self) -> tuple[Any, ...]:
        relatives = list(self.keys)
        keys, slots, mtimes, sizes = array("q"), array("i"), array("d"), array("q")
        symlinks = bytearray()
        kinds: list[str] = []
        texts: list[bytes] = []
        ends = array("q")
        total = 0
        for relative in relatives:
            found = self.get(relative)
            assert found is not None
            keys.extend(found.stat_key)
            if isinstance(found, DocRecord):
                slots.append(found.slot)
                mtimes.append(found.mtime)
                sizes.append(found.size)
                symlinks.append(found.symlink)
                kinds.append(found.type)
                parts = (found.title, found.description, found.body)
            else:
                slots.append(_SKIP_SLOT)
                mtimes.append(0.0)
                sizes.append(0)
                symlinks.append(0)
                kinds.append(found.reason)
                parts = (found.detail, "", "")
            for part in parts:
                encoded = part.encode("utf-8", "surrogatepass")
                texts.append(encoded)
                total += len(encoded)
                ends.append(total)
        return ("\0".join(relatives), keys.tobytes(), slots.tobytes(), mtimes.tobytes(),
                sizes.tobytes(), bytes(symlinks), "\0".join(kinds), ends.tobytes(),
                b"".join(texts))  # fmt: skip

    @classmethod
    def from_state(cls, state: tuple[Any, ...]) -> RecordTable:
        """The table :meth:`to_state` saved. Raises ValueError when the state is inconsistent."""
        joined, key_bytes, slot_bytes, mtime_bytes, size_bytes, symlinks, kinds, ends, text = state
        relatives = joined.split("\0") if joined else []
        columns = _Columns(
            relatives=relatives,
            keys=_array("q", key_bytes),
            slots=_array("i", slot_bytes),
            mtimes=_array("d", mtime_bytes),
            sizes=_array("q", size_bytes),
            symlinks=bytes(symlinks),
            kinds=kinds.split("\0") if kinds else [],
            text_ends=_array("q", ends),
            text=bytes(text),
        )
        rows = len(relatives)
        sizes = (len(columns.keys) // 4, len(columns.slots), len(columns.mtimes),
                 len(columns.sizes), len(columns.symlinks), len(columns.kinds),
                 len(columns.text_ends) // _TEXTS_PER_RECORD)  # fmt: skip
        if any(size != rows for size in sizes) or (rows and columns.text_ends[-1] != len(text)):
            raise ValueError("record table: columns of different lengths")
        table = cls()
        table._columns = columns
        table._rows = dict(zip(relatives, range(rows), strict=True))
        keys = columns.keys
        table.keys = dict(zip(relatives, zip(*[iter(keys)] * 4, strict=True), strict=True))
        table.by_slot = dict(zip(columns.slots, relatives, strict=True))  # C-level, then fix up
        table.by_slot.pop(_SKIP_SLOT, None)
        skipped = columns.slots.count(_SKIP_SLOT)
        if len(table.by_slot) != rows - skipped:
            raise ValueError("record table: two memories share a slot")
        if skipped:
            table.skips = {
                relatives[row] for row in range(rows) if columns.slots[row] == _SKIP_SLOT
            }
        at = columns.symlinks.find(1)
        while at >= 0:
            table.symlinks.add(relatives[at])
            at = columns.symlinks.find(1, at + 1)
        return table


def _array(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    return values


class ShardCache(Value, frozen=False):
    records: RecordTable = field(default_factory=RecordTable)
    index: LexicalIndex = field(default_factory=LexicalIndex)


def _header(root: str, scope: str, fingerprint: str) -> tuple[Any, ...]:
    return (_MAGIC, CACHE_FORMAT, _RUNTIME, fingerprint, root, scope)


def _decode(data: memoryview, header: tuple[Any, ...]) -> ShardCache:
    start = len(_FILE_PREFIX)
    if data[:start] != _FILE_PREFIX:
        raise ValueError("not a recall index file")
    with data[start + 4 :] as body:
        if zlib.crc32(body) != int.from_bytes(data[start : start + 4], "big"):
            raise ValueError("checksum mismatch")
        saved_header, record_state, index_state = marshal.loads(body)  # noqa: S302 - our file
    if saved_header != header:
        raise ValueError("written by another format, runtime, scorer or root")
    records = RecordTable.from_state(record_state)
    index = LexicalIndex.from_state(index_state)
    if len(records.by_slot) != index.doc_count:
        raise ValueError("records and index disagree")
    return ShardCache(records=records, index=index)


def load_cache(path: Path, *, root: str, scope: str, fingerprint: str) -> ShardCache | None:
    """The saved cache of ``root``, or None (with one debug line) when it cannot be used."""
    try:
        handle = path.open("rb")
    except FileNotFoundError:
        return None
    except OSError as error:
        _log.debug(f"recall index {path} unreadable ({error}); rebuilding")
        return None
    try:
        # Mapped, not read: the file is checked and decoded without a copy of it in memory.
        with (
            handle,
            mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ) as mapped,
            memoryview(mapped) as data,
        ):
            return _decode(data, _header(root, scope, fingerprint))
    except Exception as error:  # any damage at all means "rebuild"
        _log.debug(f"recall index {path} not usable ({type(error).__name__}: {error}); rebuilding")
        return None


def save_cache(path: Path, cache: ShardCache, *, root: str, scope: str, fingerprint: str) -> bool:
    """Write the cache atomically; False (logged) when the folder is not writable."""
    payload = (_header(root, scope, fingerprint), cache.records.to_state(), cache.index.to_state())
    body = marshal.dumps(payload, _MARSHAL_VERSION)
    data = _FILE_PREFIX + zlib.crc32(body).to_bytes(4, "big") + body
    try:
        atomic_write_bytes(path, data, durable=False)
    except OSError as error:
        _log.debug(f"recall index {path} not saved: {error}")
        return False
    return True
