"""The inverted index behind the fast phase, and the exact top-k search over it.

One :class:`LexicalIndex` per memory root. Each document sits in a *slot* (a small integer,
reused after removal); each term has a posting list: the slots holding it, ascending, with the
document's quantised BM25F weight for it (1..255, see :mod:`cairn.memory.scorer`). A document is
added or removed on its own, so an edited file re-indexes only itself.

Scores are exact integers (``sum of idf_q * weight_q``), which makes ranking deterministic: an
index updated file by file ranks exactly like one rebuilt from scratch, whatever slots it used.

Searching without leaving C for the common words: a pool-wide score vector is a Python ``int``
holding one 32-bit field per slot. A frequent term's weights are cached as such a packed vector,
so adding it to the scores is one big-integer multiply-add instead of a Python loop over
thousands of postings; rare terms are scattered into an ``array`` and packed once. The top k are
then found with bit-parallel comparisons on the packed scores (add a per-field bias, mask the
guard bits, count them): a binary search on the score threshold touches every document in a few
big-integer operations, and only the documents above the threshold are ever unpacked.
"""

from __future__ import annotations

import heapq
import sys
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate

from cairn.memory.scorer import MAX_TERM_WEIGHT, idf_weight, score_value

__all__ = ["Hit", "IndexState", "LexicalIndex", "search"]

_SLOT_TYPE = "i"  # posting slots: signed 32-bit
_WEIGHT_TYPE = "B"  # posting weights: 1..255
_FIELD_TYPE = "I"  # one packed score field: unsigned 32-bit
_FIELD_BITS = 32
_GUARD_BIT = _FIELD_BITS - 1  # scores stay below 2**31, so bit 31 is free for comparisons
_DENSE_RATIO = 64  # a term held by >= 1/64 of the slots is cached as a packed vector ...
_DENSE_MIN_POSTINGS = 32  # ... when it also has at least this many postings
_DENSE_CACHE_BYTES = 24 * 1024 * 1024  # packed vectors kept per index (least recently used go)
_WINDOW_FACTOR = 4  # the threshold search stops once at most 4k (and >= k) documents pass
_WINDOW_MIN = 32

IndexState = tuple[int, bytes, str, bytes, bytes, bytes]  # slots, used, terms, counts, ids, weights
_Posting = tuple[array, array]  # (slots, weights)


def _pack(fields: array) -> int:
    """An ``array('I')`` as one integer, field i at bits 32*i .. 32*i+31."""
    if sys.byteorder == "big":
        fields = array(_FIELD_TYPE, fields)
        fields.byteswap()
    return int.from_bytes(fields.tobytes(), "little")


def _unpack(value: int, size: int) -> array:
    fields = array(_FIELD_TYPE)
    fields.frombytes(value.to_bytes(size * 4, "little"))
    if sys.byteorder == "big":
        fields.byteswap()
    return fields


def _ones(size: int) -> int:
    """The packed vector with 1 in each of ``size`` fields."""
    return int.from_bytes(b"\x01\x00\x00\x00" * size, "little")


class LexicalIndex:
    """Term -> posting list for the documents of one memory root."""

    def __init__(self) -> None:
        self._postings: dict[str, _Posting] = {}
        self._used = bytearray()  # 1 per occupied slot
        self._free: list[int] = []  # heap of released slots below len(_used)
        self._doc_count = 0
        self._dense: OrderedDict[str, int] = OrderedDict()
        # Posting lists of a loaded state, cut out on first use: term -> (start, end).
        self._packed: dict[str, tuple[int, int]] = {}
        self._packed_slots = array(_SLOT_TYPE)
        self._packed_weights = array(_WEIGHT_TYPE)

    @property
    def doc_count(self) -> int:
        return self._doc_count

    @property
    def capacity(self) -> int:
        """One more than the highest slot ever used."""
        return len(self._used)

    def posting(self, term: str) -> _Posting | None:
        """The (slots, weights) of ``term``, or None when no document holds it."""
        found = self._postings.get(term)
        if found is not None:
            return found
        span = self._packed.pop(term, None)
        if span is None:
            return None
        start, end = span
        found = (self._packed_slots[start:end], self._packed_weights[start:end])
        self._postings[term] = found
        return found

    def doc_frequency(self, term: str) -> int:
        found = self._postings.get(term)
        if found is not None:
            return len(found[0])
        span = self._packed.get(term)
        return 0 if span is None else span[1] - span[0]

    # --- changes ------------------------------------------------------------------------

    def _take_slot(self) -> int:
        if self._free:
            slot = heapq.heappop(self._free)
            self._used[slot] = 1
            return slot
        self._used.append(1)
        return len(self._used) - 1

    def add(self, weights: Mapping[str, int]) -> int:
        """Index one document (term -> weight 1..255); returns its slot."""
        slot = self._take_slot()
        for term, weight in weights.items():
            if not 1 <= weight <= MAX_TERM_WEIGHT:
                raise ValueError(f"weight of {term!r} must be 1..{MAX_TERM_WEIGHT}, not {weight}")
            found = self.posting(term)
            if found is None:
                found = (array(_SLOT_TYPE), array(_WEIGHT_TYPE))
                self._postings[term] = found
            slots, values = found
            at = bisect_left(slots, slot)
            slots.insert(at, slot)
            values.insert(at, weight)
            if term in self._dense:
                self._dense[term] += weight << (_FIELD_BITS * slot)
        self._doc_count += 1
        return slot

    def remove(self, slot: int, terms: Iterable[str]) -> None:
        """Drop the document in ``slot``; ``terms`` are the terms it was added with."""
        if not 0 <= slot < len(self._used) or not self._used[slot]:
            raise ValueError(f"slot {slot} holds no document")
        for term in terms:
            found = self.posting(term)
            if found is None:
                continue
            slots, values = found
            at = bisect_left(slots, slot)
            if at < len(slots) and slots[at] == slot:
                if term in self._dense:
                    self._dense[term] -= values[at] << (_FIELD_BITS * slot)
                del slots[at]
                del values[at]
                if not slots:
                    del self._postings[term]
                    self._dense.pop(term, None)
        self._used[slot] = 0
        heapq.heappush(self._free, slot)
        self._doc_count -= 1

    # --- scoring ------------------------------------------------------------------------

    def _dense_vector(self, term: str, posting: _Posting) -> int | None:
        """The packed weights of a frequent term (cached), or None for a rare one."""
        cached = self._dense.get(term)
        if cached is not None:
            self._dense.move_to_end(term)
            return cached
        size = len(posting[0])
        if size < _DENSE_MIN_POSTINGS or size * _DENSE_RATIO < self.capacity:
            return None
        fields = array(_FIELD_TYPE, bytes(4 * self.capacity))
        for slot, weight in zip(*posting, strict=True):
            fields[slot] = weight
        vector = _pack(fields)
        self._dense[term] = vector
        while len(self._dense) * 4 * self.capacity > _DENSE_CACHE_BYTES and len(self._dense) > 1:
            self._dense.popitem(last=False)
        return vector

    def scores(self, plan: Sequence[tuple[str, int]]) -> int:
        """Packed ``sum of idf * weight`` per slot for the (term, idf weight) pairs of a query."""
        total = 0
        scattered: array | None = None
        for term, idf in plan:
            posting = self.posting(term)
            if posting is None:
                continue
            vector = self._dense_vector(term, posting)
            if vector is not None:
                total += idf * vector
                continue
            if scattered is None:
                scattered = array(_FIELD_TYPE, bytes(4 * self.capacity))
            for slot, weight in zip(*posting, strict=True):
                scattered[slot] += idf * weight
        if scattered is not None:
            total += _pack(scattered)
        return total

    # --- persistence --------------------------------------------------------------------

    def to_state(self) -> IndexState:
        """The whole index as a few strings and byte blobs (for marshal)."""
        terms = sorted({*self._postings, *self._packed})
        counts, slots, weights = array("q"), array(_SLOT_TYPE), array(_WEIGHT_TYPE)
        for term in terms:
            found = self._postings.get(term)
            if found is None:
                start, end = self._packed[term]
                found = (self._packed_slots[start:end], self._packed_weights[start:end])
            counts.append(len(found[0]))
            slots.extend(found[0])
            weights.extend(found[1])
        return (self._doc_count, bytes(self._used), "\0".join(terms), counts.tobytes(),
                slots.tobytes(), weights.tobytes())  # fmt: skip

    @classmethod
    def from_state(cls, state: IndexState) -> LexicalIndex:
        """The index :meth:`to_state` saved. Raises ValueError when the state is inconsistent."""
        doc_count, used, joined, count_bytes, slot_bytes, weight_bytes = state
        index, counts = cls(), array("q")
        counts.frombytes(count_bytes)
        index._packed_slots.frombytes(slot_bytes)
        index._packed_weights.frombytes(weight_bytes)
        index._used = bytearray(used)
        terms = joined.split("\0") if joined else []
        ends = list(accumulate(counts))
        total = ends[-1] if ends else 0
        if len(terms) != len(counts) or total != len(index._packed_slots):
            raise ValueError("index state: term, count and slot tables disagree")
        if total != len(index._packed_weights) or doc_count != sum(index._used):
            raise ValueError("index state: weight table or document count is damaged")
        if index._packed_slots and not 0 <= min(index._packed_slots) <= max(
            index._packed_slots
        ) < len(index._used):
            raise ValueError("index state: a posting points past the slot table")
        index._packed = dict(zip(terms, zip([0, *ends[:-1]], ends, strict=True), strict=True))
        index._doc_count = doc_count
        index._free = [slot for slot, taken in enumerate(index._used) if not taken]
        return index


@dataclass(frozen=True, slots=True)
class Hit:
    shard: int  # position of the document's index in the ``indexes`` given to search()
    slot: int
    score: float


Accept = Callable[[int, int], bool]  # (shard, slot) -> may this document be returned?


@dataclass
class _Shard:
    """The packed scores of one index during a search, with their comparison constants."""

    number: int
    size: int
    scores: int
    ones: int
    guards: int
    biased: int  # scores + 2**31 in every field: (biased - t*ones) keeps the guard iff >= t
    values: array | None = None

    def count_at_least(self, threshold: int) -> int:
        return ((self.biased - threshold * self.ones) & self.guards).bit_count()

    def slots_at_least(self, threshold: int) -> list[int]:
        mask = (self.biased - threshold * self.ones) & self.guards
        guard_bytes = mask.to_bytes(self.size * 4, "little")[3::4]
        slots: list[int] = []
        at = guard_bytes.find(0x80)
        while at >= 0:
            slots.append(at)
            at = guard_bytes.find(0x80, at + 1)
        return slots

    def value(self, slot: int) -> int:
        if self.values is None:
            self.values = _unpack(self.scores, self.size)
        return self.values[slot]


def _plan(indexes: Sequence[LexicalIndex], terms: Iterable[str]) -> list[tuple[str, int]]:
    """Distinct query terms present anywhere, each with its integer idf weight."""
    doc_count = sum(index.doc_count for index in indexes)
    plan: list[tuple[str, int]] = []
    for term in dict.fromkeys(terms):
        frequency = sum(index.doc_frequency(term) for index in indexes)
        if frequency:
            plan.append((term, idf_weight(frequency, max(doc_count, frequency))))
    return plan


def _shards(indexes: Sequence[LexicalIndex], plan: Sequence[tuple[str, int]]) -> list[_Shard]:
    shards: list[_Shard] = []
    for number, index in enumerate(indexes):
        scores = index.scores(plan)
        if scores:
            size = index.capacity
            ones = _ones(size)
            guards = ones << _GUARD_BIT
            shards.append(_Shard(number, size, scores, ones, guards, scores + guards))
    return shards


def _threshold(shards: Sequence[_Shard], wanted: int, ceiling: int) -> int:
    """A score t with at least ``wanted`` documents >= t (if so many scored), and few more."""
    window = max(_WINDOW_MIN, _WINDOW_FACTOR * wanted)

    def count(threshold: int) -> int:
        return sum(shard.count_at_least(threshold) for shard in shards)

    low, high = 1, ceiling + 1  # count(low) >= wanted (or low == 1); count(high) < wanted
    if count(low) <= window:
        return low
    while high - low > 1:
        middle = (low + high) // 2
        passing = count(middle)
        if passing >= wanted:
            low = middle
            if passing <= window:
                break
        else:
            high = middle
    return low


def search(
    indexes: Sequence[LexicalIndex],
    terms: Iterable[str],
    *,
    limit: int,
    accept: Accept,
    order_key: Callable[[int, int], Hashable],
) -> list[Hit]:
    """The ``limit`` best accepted documents: score descending, then ``order_key`` ascending.

    Every returned score is above zero. ``accept`` is asked only about documents that could
    make the cut, best first.
    """
    plan = _plan(indexes, terms)
    if limit <= 0 or not plan:
        return []
    shards = _shards(indexes, plan)
    if not shards:
        return []
    ceiling = sum(idf for _, idf in plan) * MAX_TERM_WEIGHT
    wanted = limit
    while True:
        threshold = _threshold(shards, wanted, ceiling)
        candidates = [
            (-shard.value(slot), order_key(shard.number, slot), shard.number, slot)
            for shard in shards
            for slot in shard.slots_at_least(threshold)
        ]
        candidates.sort()
        hits: list[Hit] = []
        rejected = 0
        for negative, _, number, slot in candidates:
            if accept(number, slot):
                hits.append(Hit(number, slot, score_value(-negative)))
                if len(hits) == limit:
                    return hits
            else:
                rejected += 1
        if threshold <= 1:
            return hits
        wanted = limit + rejected
        ceiling = threshold - 1 if not candidates else ceiling
