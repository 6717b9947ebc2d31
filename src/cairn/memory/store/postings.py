"""The posting lists of a loaded lexical index: in flat arrays, or left on disk.

A saved snapshot keeps every posting list (slots, then weights, in term order) after its head
(see :mod:`~cairn.memory.store.cache`); :class:`PostingArea` reads one list when it is first
used and checks it against its own CRC-32, so opening a large index reads none of them.
:class:`PackedPostings` finds a term's list by a binary search in the sorted term table, so
loading builds no per-term object. :class:`~cairn.memory.store.lexical_index.LexicalIndex`
copies a list out of here the first time it uses it.
"""

from __future__ import annotations

import zlib
from array import array
from bisect import bisect_left
from collections.abc import Callable

from cairn.memory.store.records import DamagedIndex

__all__ = [
    "SLOT_TYPE",
    "WEIGHT_TYPE",
    "PackedPostings",
    "Posting",
    "PostingArea",
    "posting_checksums",
]

SLOT_TYPE = "i"  # posting slots: signed 32-bit
WEIGHT_TYPE = "B"  # posting weights: 1..255
Posting = tuple[array, array]  # (slots, weights)


class PostingArea:
    """The posting lists of a saved snapshot left on disk: all slots, then all weights, in term
    order. One term's list is read (``read(start, end)``: a ``pread``) and checked against its
    own CRC-32 the first time it is used, so opening a large index reads none of them; the whole
    area is checked against its CRC-32 once, off the first query's path (:meth:`verify`)."""

    _VERIFY_BYTES = 8 * 1024 * 1024  # read per step of the whole check

    def __init__(
        self,
        read: Callable[[int, int], bytes],
        start: int,
        total: int,
        crcs: array,
        crc: int,
    ) -> None:
        self._read = read
        self._slots_at = start
        self._weights_at = start + total * array(SLOT_TYPE).itemsize
        self.end = self._weights_at + total
        self._crcs = crcs  # one per term: CRC-32 of its slots' bytes, then its weights
        self._crc = crc  # of the whole area
        self._verified = False

    def posting(self, at: int, start: int, end: int) -> Posting:
        size = array(SLOT_TYPE).itemsize
        slot_bytes = self._read(self._slots_at + size * start, self._slots_at + size * end)
        weight_bytes = self._read(self._weights_at + start, self._weights_at + end)
        if zlib.crc32(weight_bytes, zlib.crc32(slot_bytes)) != self._crcs[at]:
            raise DamagedIndex("a saved posting list is damaged")
        slots, weights = array(SLOT_TYPE), array(WEIGHT_TYPE)
        slots.frombytes(slot_bytes)
        weights.frombytes(weight_bytes)
        return slots, weights

    def whole(self) -> tuple[array, array]:
        """Every slot and weight, checked."""
        data = self._read(self._slots_at, self.end)
        if len(data) != self.end - self._slots_at or zlib.crc32(data) != self._crc:
            raise DamagedIndex("the saved posting lists are damaged")
        slots, weights = array(SLOT_TYPE), array(WEIGHT_TYPE)
        with memoryview(data) as view:
            slots.frombytes(view[: self._weights_at - self._slots_at])
            weights.frombytes(view[self._weights_at - self._slots_at :])
        return slots, weights

    def verify(self) -> bool:
        """Whether the whole area checks out (read a piece at a time; any thread)."""
        if self._verified:
            return True
        crc, at = 0, self._slots_at
        while at < self.end:
            piece = self._read(at, min(self.end, at + self._VERIFY_BYTES))
            if not piece:
                return False
            crc = zlib.crc32(piece, crc)
            at += len(piece)
        self._verified = crc == self._crc
        return self._verified


def posting_checksums(
    end_bytes: bytes, slot_bytes: bytes, weight_bytes: bytes
) -> tuple[bytes, int]:
    """The per-term CRC-32s (array("I") bytes) and the whole area's (a :class:`PostingArea`)."""
    ends = array("q")
    ends.frombytes(end_bytes)
    size = array(SLOT_TYPE).itemsize
    crc32 = zlib.crc32
    crcs = array("I")
    start = 0
    with memoryview(slot_bytes) as slots, memoryview(weight_bytes) as weights:
        for end in ends:
            crcs.append(crc32(weights[start:end], crc32(slots[size * start : size * end])))
            start = end
    return crcs.tobytes(), crc32(weight_bytes, crc32(slot_bytes))


class PackedPostings:
    """The posting lists of a loaded state, still in their flat arrays (or on disk).

    Looking a term up is a binary search in the sorted term list, so loading builds no per-term
    object at all; a list is copied out (and forgotten here) the first time it is used.
    """

    def __init__(
        self,
        terms: list[str],
        ends: array,
        slots: array | None,
        weights: array | None,
        area: PostingArea | None = None,
    ) -> None:
        self._terms = terms  # sorted
        self._ends = ends  # ends[i]: one past the last posting of terms[i]
        self._slots = slots
        self._weights = weights
        self.area = area  # where the lists are while slots and weights are None
        self._taken: set[str] = set()

    def _find(self, term: str) -> int:
        at = bisect_left(self._terms, term)
        if at < len(self._terms) and self._terms[at] == term and term not in self._taken:
            return at
        return -1

    def _span(self, at: int) -> tuple[int, int]:
        return (self._ends[at - 1] if at else 0), self._ends[at]

    def size(self, term: str) -> int:
        at = self._find(term)
        if at < 0:
            return 0
        start, end = self._span(at)
        return end - start

    def copy(self, term: str) -> Posting | None:
        at = self._find(term)
        if at < 0:
            return None
        start, end = self._span(at)
        if self._slots is None or self._weights is None:
            assert self.area is not None
            return self.area.posting(at, start, end)
        return self._slots[start:end], self._weights[start:end]

    def take(self, term: str) -> Posting | None:
        found = self.copy(term)
        if found is not None:
            self._taken.add(term)
        return found

    def load(self) -> None:
        """Read every list left on disk (all of them are about to be used)."""
        if self._slots is None and self.area is not None:
            self._slots, self._weights = self.area.whole()

    def terms(self) -> list[str]:
        return [term for term in self._terms if term not in self._taken]
