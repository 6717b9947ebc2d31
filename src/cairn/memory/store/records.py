"""The records of one memory root's files, column by column: what the saved index holds per file.

Each file under a root has a record keyed by its relative path and holding the file's stat key
``(mtime_ns, size, inode, ctime_ns)``: a :class:`DocRecord` for a memory (its parsed fields and
its slot in the lexical index), a :class:`SkipRecord` for a file that is not one (the reason, so
its warning is listed without reading the file again). A :class:`RecordTable` keeps the records
of a loaded snapshot in flat columns (paths, stat keys, slots, mtimes, types) and builds a record
only when it is used; its texts (title, description, body) stay in the snapshot's texts file and
are read, and checked against their own CRC-32, the first time. Records changed since the load
live in a small dictionary over the columns. :mod:`~cairn.memory.store.cache` saves and loads
the table.
"""

from __future__ import annotations

import heapq
import math
import os
import weakref
import zlib
from array import array
from bisect import bisect_right
from collections.abc import Collection, Iterator, Sequence
from pathlib import Path
from typing import IO, Any, NamedTuple

from cairn.values import Value

__all__ = ["DamagedIndex", "DocRecord", "Record", "RecordTable", "SkipRecord", "StatKey", "Texts"]

_SKIP_SLOT = -1  # the slot column of a skipped file
_TEXTS_PER_RECORD = 3  # title, description, body (a skip: detail, "", "")
_SCAN_BYTES = 4 * 1024 * 1024  # texts read at once when every record's texts are searched
_COMMON_SHARE = 16  # a word without letters held by over 1/16 of the rows searched: common
_CASELESS_MIN = 3  # characters of such a word at least, to search the texts for it

StatKey = tuple[int, int, int, int]  # (st_mtime_ns, st_size, st_ino, st_ctime_ns)


class DamagedIndex(ValueError):
    """A saved record's texts do not check out (the texts file was damaged after loading)."""


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


class Texts:
    """The texts of a saved table: a file read record by record (never mapped: a file
    truncated under a mapping would crash the process), or bytes in memory."""

    def __init__(self, source: bytes | int, size: int) -> None:
        self._source = source  # bytes, or an open descriptor (closed with this object)
        self.size = size
        if isinstance(source, int):
            self._closer = weakref.finalize(self, os.close, source)

    @classmethod
    def open(cls, path: Path) -> Texts:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
        try:
            size = os.fstat(fd).st_size
        except OSError:
            os.close(fd)
            raise
        return cls(fd, size)

    def read(self, start: int, end: int) -> bytes:
        if isinstance(self._source, bytes):
            return self._source[start:end]
        try:
            return os.pread(self._source, end - start, start)
        except OSError:
            return b""  # the CRC check reports it


class _Columns(Value, frozen=False):
    """A loaded table, column by column; row i belongs to relatives[i]. The texts stay in the
    mapped texts file until a row is used."""

    relatives: list[str]
    keys: array  # 4 per row
    slots: array
    mtimes: array
    sizes: array
    symlinks: bytes
    kinds: list[str]  # memory type, or skip reason
    text_ends: array  # 3 per row: end offsets in texts (after ``base``)
    crcs: array  # 1 per row: CRC-32 of the row's texts
    texts: Texts
    base: int  # where the texts start in ``texts``

    def span(self, row: int) -> tuple[int, int]:
        at = row * _TEXTS_PER_RECORD
        start = self.text_ends[at - 1] if at else 0
        return self.base + start, self.base + self.text_ends[at + 2]

    def raw(self, row: int) -> bytes:
        return self.texts.read(*self.span(row))

    def parts(self, row: int) -> tuple[str, str, str]:
        data = self.raw(row)
        if zlib.crc32(data) != self.crcs[row]:
            raise DamagedIndex(f"the saved texts of {self.relatives[row]!r} are damaged")
        at = row * _TEXTS_PER_RECORD
        first = self.text_ends[at - 1] if at else 0
        cuts = [self.text_ends[at] - first, self.text_ends[at + 1] - first]
        decoded = [
            data[a:b].decode("utf-8", "surrogatepass")
            for a, b in ((0, cuts[0]), (cuts[0], cuts[1]), (cuts[1], len(data)))
        ]
        return decoded[0], decoded[1], decoded[2]

    def rows_containing(self, needle: str, caseless: str = "") -> list[int]:
        """The rows whose texts may contain ``needle`` (casefolded, not empty): every row whose
        title, description or body contains it ignoring case, and perhaps a few more (a match
        across two texts, or a row holding only ``caseless``), in row order. The texts are read
        a few megabytes at a time and searched in bulk where they are ASCII (their casefold is
        then their lower case). ``caseless``, a part of ``needle`` without letters (ASCII): in
        ASCII texts the rows holding it are found without lower-casing the texts first, unless
        it is common there (then ``needle`` is searched as above)."""
        rows = len(self.relatives)
        row_ends = self.text_ends[_TEXTS_PER_RECORD - 1 :: _TEXTS_PER_RECORD]
        wanted = needle.encode() if needle.isascii() else None
        anchor = caseless.encode()
        found: list[int] = []
        row = 0
        while row < rows:
            start = row_ends[row - 1] if row else 0
            stop = max(row + 1, bisect_right(row_ends, start + _SCAN_BYTES))
            data = self.texts.read(self.base + start, self.base + row_ends[stop - 1])
            if data.isascii():
                if wanted is not None:
                    found += _ascii_hits(data, wanted, anchor, row_ends, start, stop - row)
            else:
                for at in range(row, stop):
                    first = (row_ends[at - 1] if at else 0) - start
                    raw = data[first : row_ends[at] - start]
                    if raw.isascii():
                        hit = wanted is not None and wanted in raw.lower()
                    else:
                        hit = needle in _text(raw).casefold()
                    if hit:
                        found.append(at)
            row = stop
        return found

    def key(self, row: int) -> StatKey:
        base = row * 4
        return (self.keys[base], self.keys[base + 1], self.keys[base + 2], self.keys[base + 3])

    def record(self, row: int) -> Record:
        key = self.key(row)
        title, description, body = self.parts(row)
        if self.slots[row] == _SKIP_SLOT:
            return SkipRecord(key, self.kinds[row], title)
        return DocRecord(
            key, self.slots[row], self.kinds[row], title, description, body, self.mtimes[row],
            self.sizes[row], bool(self.symlinks[row]),
        )  # fmt: skip


class RecordTable:
    """Relative path -> record for one root, with the lookups the store needs kept current."""

    def __init__(self) -> None:
        self._keys: dict[str, StatKey] | None = {}  # every record's stat key (None: not built)
        self.by_slot: dict[int, str] = {}  # slot -> relative path, for memories
        self.symlinks: set[str] = set()
        self.skips: set[str] = set()  # relative paths of skipped files
        self._records: dict[str, Record] = {}
        self._rows: dict[str, int] = {}  # loaded rows not yet turned into records
        self._columns: _Columns | None = None
        self.damaged = False  # a saved record's texts did not check out

    @property
    def keys(self) -> dict[str, StatKey]:
        """Every record's stat key (built from the loaded columns on first use)."""
        if self._keys is None:
            columns = self._columns
            assert columns is not None
            keys = dict(zip(columns.relatives, zip(*[iter(columns.keys)] * 4, strict=True),
                            strict=True))  # fmt: skip
            for relative in set(columns.relatives) - self._rows.keys():
                keys.pop(relative, None)  # turned into a record (or removed) since loading
            for relative, record in self._records.items():
                keys[relative] = record.stat_key
            self._keys = keys
        return self._keys

    def __len__(self) -> int:
        return len(self.keys) if self._keys is not None else len(self._rows) + len(self._records)

    def __contains__(self, relative: str) -> bool:
        return relative in self._records or relative in self._rows

    def get(self, relative: str) -> Record | None:
        """The record of ``relative``; raises :class:`DamagedIndex` when its saved texts are
        damaged."""
        found = self._records.get(relative)
        if found is not None:
            return found
        row = self._rows.get(relative)
        if row is None or self._columns is None:
            return None
        try:
            found = self._records[relative] = self._columns.record(row)
        except DamagedIndex:
            self.damaged = True
            raise
        del self._rows[relative]
        return found

    def stat_key(self, relative: str) -> StatKey | None:
        """A record's stat key, without building the record."""
        found = self._records.get(relative)
        if found is not None:
            return found.stat_key
        row = self._rows.get(relative)
        if row is None or self._columns is None:
            return None
        return self._columns.key(row)

    def put(self, relative: str, record: Record) -> None:
        self.pop(relative)
        self._records[relative] = record
        if self._keys is not None:  # (else built from the records when first needed)
            self._keys[relative] = record.stat_key
        if isinstance(record, DocRecord):
            self.by_slot[record.slot] = relative
            if record.symlink:
                self.symlinks.add(relative)
        else:
            self.skips.add(relative)

    def pop(self, relative: str) -> Record | None:
        found = self.get(relative)
        self._records.pop(relative, None)
        if self._keys is not None:
            self._keys.pop(relative, None)
        self.symlinks.discard(relative)
        self.skips.discard(relative)
        if isinstance(found, DocRecord):
            self.by_slot.pop(found.slot, None)
        return found

    def relatives(self) -> list[str]:
        return [*self._rows, *self._records]

    def inodes(self, relatives: Collection[str]) -> dict[str, int]:
        """The inode in the stat key of each of ``relatives`` that has a record (no record
        built)."""
        rows, records = self._rows, self._records
        keys = self._columns.keys if self._columns is not None else array("q")
        found = {relative: keys[4 * rows[relative] + 2] for relative in relatives
                 if relative in rows}  # fmt: skip
        found.update((relative, records[relative].stat_key[2]) for relative in relatives
                     if relative in records)  # fmt: skip
        return found

    def containing(self, needles: Sequence[str]) -> set[str]:
        """The memories whose texts (title, description, body) may contain every one of
        ``needles`` (casefolded, not empty; the first the rarest, ideally): every memory whose
        title, description or body contains each of them ignoring case, perhaps a few that do not
        (the caller checks); no record is built."""
        first, rest = needles[0], needles[1:]
        found = {
            relative
            for relative, record in self._records.items()
            if isinstance(record, DocRecord)
            and _holds(f"{record.title}\n{record.description}\n{record.body}", needles)
        }
        columns = self._columns
        if columns is not None and self._rows:
            relatives, slots = columns.relatives, columns.slots
            caseless = _caseless_word(needles)
            check = needles if caseless else rest  # (a row may hold only the caseless word)
            found.update(
                relatives[row]
                for row in columns.rows_containing(first, caseless)
                if slots[row] != _SKIP_SLOT
                and relatives[row] in self._rows
                and (not check or _holds(_text(columns.raw(row)), check))
            )
        return found

    def items(self) -> Iterator[tuple[str, Record]]:
        for relative in self.relatives():
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
        return zip(*self.doc_columns(), strict=True)

    def doc_columns(self) -> tuple[Sequence[str], Sequence[float]]:
        """The relative paths of every memory and their mtimes, without building records (the
        loaded columns as they are when no row has changed since loading)."""
        columns = self._columns
        unchanged = columns is not None and len(self._rows) == len(columns.relatives)
        if unchanged and not self._records and not self.skips:
            assert columns is not None
            return columns.relatives, columns.mtimes
        rows, skips = self._rows, self.skips
        relatives = [relative for relative in rows if relative not in skips] if skips else [*rows]
        mtimes: list[float] = []
        if columns is not None:  # the loaded rows' mtimes in C-level loops, then the records'
            mtimes += map(columns.mtimes.__getitem__, map(rows.__getitem__, relatives))
        for relative, record in self._records.items():
            if isinstance(record, DocRecord):
                relatives.append(relative)
                mtimes.append(record.mtime)
        return relatives, mtimes

    def newest_docs(self, limit: int) -> list[tuple[float, str]]:
        """(mtime, relative path) of the ``limit`` most recently modified memories and of any
        tied with the last of them, perhaps a few more, in no order; no record is built, and
        the loaded rows are cut by their mtime column (a heap of ``limit``, no sort)."""
        found = [(record.mtime, relative) for relative, record in self._records.items()
                 if isinstance(record, DocRecord)]  # fmt: skip
        columns, rows = self._columns, self._rows
        if columns is None or not rows or limit <= 0:
            return found
        mtimes, relatives, slots = columns.mtimes, columns.relatives, columns.slots
        # Rows no longer loaded (changed or removed since) and skipped files' rows may be
        # among the newest of the column: the cut leaves room for them.
        room = limit + len(relatives) - len(rows) + len(self.skips)
        cut = heapq.nlargest(room, mtimes)[-1] if room < len(mtimes) else -math.inf
        found += [
            (mtime, relatives[row])
            for row, mtime in enumerate(mtimes)
            if mtime >= cut and slots[row] != _SKIP_SLOT and rows.get(relatives[row]) == row
        ]
        return found

    def skipped(self) -> Iterator[tuple[str, SkipRecord]]:
        for relative in sorted(self.skips):
            found = self.get(relative)
            assert isinstance(found, SkipRecord)
            yield relative, found

    # --- persistence --------------------------------------------------------------------

    def to_state(self, texts: IO[bytes]) -> tuple[Any, ...]:
        """The table as columns; the texts are written to ``texts`` (a loaded row's texts are
        copied as they are, never decoded)."""
        relatives = self.relatives()
        keys, slots, mtimes, sizes = array("q"), array("i"), array("d"), array("q")
        symlinks = bytearray()
        kinds: list[str] = []
        ends, crcs = array("q"), array("I")
        total = 0
        columns = self._columns
        for relative in relatives:
            row = self._rows.get(relative)
            if row is not None and columns is not None:
                keys.extend(columns.key(row))
                slots.append(columns.slots[row])
                mtimes.append(columns.mtimes[row])
                sizes.append(columns.sizes[row])
                symlinks.append(columns.symlinks[row])
                kinds.append(columns.kinds[row])
                raw = columns.raw(row)
                at = row * _TEXTS_PER_RECORD
                first = columns.text_ends[at - 1] if at else 0
                lengths = [columns.text_ends[at + part] - first for part in range(3)]
                ends.extend(total + length for length in lengths)
                crcs.append(columns.crcs[row])
            else:
                found = self._records[relative]
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
                encoded = [part.encode("utf-8", "surrogatepass") for part in parts]
                raw = b"".join(encoded)
                length = 0
                for piece in encoded:
                    length += len(piece)
                    ends.append(total + length)
                crcs.append(zlib.crc32(raw))
            texts.write(raw)
            total += len(raw)
        return ("\0".join(relatives), keys.tobytes(), slots.tobytes(), mtimes.tobytes(),
                sizes.tobytes(), bytes(symlinks), "\0".join(kinds), ends.tobytes(),
                crcs.tobytes(), total)  # fmt: skip

    @classmethod
    def from_state(cls, state: tuple[Any, ...], texts: Texts | bytes, base: int = 0) -> RecordTable:
        """The table :meth:`to_state` saved, its texts in ``texts`` from offset ``base``.
        Raises ValueError when the state is inconsistent."""
        (joined, key_bytes, slot_bytes, mtime_bytes, size_bytes, symlinks, kinds, ends, crcs,
         total) = state  # fmt: skip
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
            crcs=_array("I", crcs),
            texts=texts if isinstance(texts, Texts) else Texts(texts, len(texts)),
            base=base,
        )
        rows = len(relatives)
        sizes = (len(columns.keys) // 4, len(columns.slots), len(columns.mtimes),
                 len(columns.sizes), len(columns.symlinks), len(columns.kinds),
                 len(columns.text_ends) // _TEXTS_PER_RECORD, len(columns.crcs))  # fmt: skip
        if any(size != rows for size in sizes):
            raise ValueError("record table: columns of different lengths")
        if (columns.text_ends[-1] if rows else 0) != total or columns.texts.size - base != total:
            raise ValueError("record table: the texts file is not the one saved (truncated?)")
        table = cls()
        table._keys = None
        table._columns = columns
        table._rows = dict(zip(relatives, range(rows), strict=True))
        table.by_slot = dict(zip(columns.slots, relatives, strict=True))  # C-level, then fix up
        table.by_slot.pop(_SKIP_SLOT, None)
        skipped = columns.slots.count(_SKIP_SLOT)
        if len(table.by_slot) != rows - skipped or len(table._rows) != rows:
            raise ValueError("record table: two memories share a slot or a path")
        if skipped:
            table.skips = {
                relatives[row] for row in range(rows) if columns.slots[row] == _SKIP_SLOT
            }
        at = columns.symlinks.find(1)
        while at >= 0:
            table.symlinks.add(relatives[at])
            at = columns.symlinks.find(1, at + 1)
        return table


def _caseless_word(needles: Sequence[str]) -> str:
    """The longest word of ``needles`` (split at white space) made of ASCII characters other
    than letters (a number, an identifier's digits), of 3 characters or more; "" when none.
    Every text holding all the needles holds it, and it is found without lower-casing."""
    words = [
        word
        for needle in needles
        for word in needle.split()
        if len(word) >= _CASELESS_MIN and word.isascii() and word.lower() == word.upper()
    ]
    return max(words, key=len, default="")


def _text(raw: bytes) -> str:
    return raw.decode("utf-8", "surrogatepass")


def _holds(text: str, needles: Sequence[str]) -> bool:
    folded = text.casefold()
    return all(needle in folded for needle in needles)


def _ascii_hits(
    data: bytes, wanted: bytes, anchor: bytes, row_ends: array, start: int, rows: int
) -> list[int]:
    """The rows of ASCII ``data`` (``rows`` of them) holding ``wanted`` ignoring case; or,
    when ``anchor`` (a part of it without letters) is held by few of them, those holding
    ``anchor``, found without a lower-cased copy of ``data``."""
    if anchor:
        hits = list(_hits(data, anchor, row_ends, start))
        if len(hits) * _COMMON_SHARE <= rows:
            return hits
    return list(_hits(data.lower(), wanted, row_ends, start))


def _hits(lowered: bytes, wanted: bytes, row_ends: array, start: int) -> Iterator[int]:
    """The rows (by ``row_ends``, offsets of ``lowered`` plus ``start``) where ``wanted`` is
    found in ``lowered``, each once."""
    at = lowered.find(wanted)
    while at >= 0:
        row = bisect_right(row_ends, start + at)
        yield row
        at = lowered.find(wanted, row_ends[row] - start)


def _array(typecode: str, data: bytes) -> array:
    values = array(typecode)
    values.frombytes(data)
    return values
