"""The inverted index behind the fast phase, and the exact top-k search over it.

One :class:`LexicalIndex` per memory root. Each document sits in a *slot* (a small integer,
reused after removal); each term has a posting list: the slots holding it, ascending, with the
document's quantised BM25F weight for it (1..255, see :mod:`cairn.memory.store.scorer`). A
document is added or removed on its own, so an edited file re-indexes only itself.

Scores are exact integers (``sum of idf_q * weight_q``), which makes ranking deterministic: an
index updated file by file ranks exactly like one rebuilt from scratch, whatever slots it used.

Searching without leaving C for the common words: a pool-wide score vector is a Python ``int``
holding one 32-bit field per slot. A frequent term's weights are cached as such a packed vector,
so adding it to the scores is one big-integer multiply-add instead of a Python loop over
thousands of postings; rare terms are scattered into an ``array`` and packed once. The top k are
then found with bit-parallel comparisons on the packed scores (add a per-field bias, mask the
guard bits, count them): a binary search on the score threshold touches every document in a few
big-integer operations, starting from the k-th best score among the documents of the rarest
terms (usually the answer already), and only the documents above the threshold are sorted.
Edits to a packed term are noted per slot and folded into the vector in batches, so re-indexing
one file costs a few dictionary updates, not one pool-sized operation per term.

A query of rare terms only (no packed term, postings for at most 1/8 of the slots: most queries
in a large memory) skips the packing: every scored document is in those postings, so their
scores are read, sorted and counted directly (the sparse path; issue #28: at 100,000 memories
the pool-wide big-integer operations had cost a query 3-7 ms of CPU).
"""

from __future__ import annotations

import functools
import heapq
import sys
from array import array
from bisect import bisect_left
from collections import OrderedDict
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import groupby
from operator import itemgetter
from typing import Any

from cairn.memory.store.postings import (
    SLOT_TYPE,
    WEIGHT_TYPE,
    PackedPostings,
    Posting,
    PostingArea,
)
from cairn.memory.store.records import DamagedIndex
from cairn.memory.store.scorer import MAX_TERM_WEIGHT, idf_weight, score_value
from cairn.values import Value

__all__ = [
    "AreaHead",
    "Hit",
    "IndexState",
    "LexicalIndex",
    "Scores",
    "search",
]

_FIELD_TYPE = "I"  # one packed score field: unsigned 32-bit
_FIELD_BITS = 32
_GUARD_BIT = _FIELD_BITS - 1  # scores stay below 2**31, so bit 31 is free for comparisons
_DENSE_RATIO = 32  # a term held by >= 1/32 of the slots is cached as a packed vector ...
_DENSE_MIN_POSTINGS = 32  # ... when it also has at least this many postings
_DENSE_CACHE_BYTES = 24 * 1024 * 1024  # packed vectors kept per index (least recently used go)
_PENDING_CHANGES = 512  # edits noted per packed vector before they are folded into it
_SPARSE_RATIO = 8  # rare terms alone, with postings for at most 1/8 of the slots: no packing
_SEED_SLOTS = 1024  # documents of the rarest terms scored to start the threshold search
_WINDOW_FACTOR = 4  # the threshold search stops once at most 4k (and >= k) documents pass
_WINDOW_MIN = 32  # ... or at most 32

IndexState = tuple[int, bytes, str, bytes, bytes, bytes]  # count, used, terms, ends, slots, weights
# count, used, terms, ends, per-term CRC-32s, postings, the area's CRC-32 (see PostingArea)
AreaHead = tuple[int, bytes, str, bytes, bytes, int, int]


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


class Scores(Value):
    """A query's scores over one index: packed, one 32-bit field per slot; or, when only rare
    terms scored (see :meth:`LexicalIndex.scores`), one field per slot in ``sparse`` and every
    scored slot in ``seeds``."""

    packed: int
    seeds: list[array]  # slots of the rare terms' postings: where the best scores usually are
    sparse: array | None = None  # the per-slot scores when ``packed`` is not used


class _PackedTerm:
    """A frequent term's weights as one packed integer, plus the changes not folded in yet.

    Adding or removing a document only notes the change (slot -> weight delta); the O(pool)
    big-integer update happens once enough changes have piled up, not on every edit.
    """

    def __init__(self, vector: int) -> None:
        self.vector = vector
        self.changes: dict[int, int] = {}

    def adjust(self, slot: int, delta: int) -> None:
        total = self.changes.get(slot, 0) + delta
        if total:
            self.changes[slot] = total
        else:
            self.changes.pop(slot, None)
        if len(self.changes) > _PENDING_CHANGES:
            for slot_, change in self.changes.items():
                self.vector += change << (_FIELD_BITS * slot_)
            self.changes.clear()


class _Scatter:
    """Per-slot additions and subtractions for one query, packed once at the end."""

    def __init__(self, size: int) -> None:
        self._size = size
        self._plus: array | None = None
        self._minus: array | None = None

    def add_posting(self, posting: Posting, idf: int) -> None:
        if self._plus is None:
            self._plus = array(_FIELD_TYPE, bytes(4 * self._size))
        plus = self._plus
        for slot, weight in zip(*posting, strict=True):
            plus[slot] += idf * weight

    def add_changes(self, changes: Mapping[int, int], idf: int) -> None:
        for slot, delta in changes.items():
            if delta > 0:
                if self._plus is None:
                    self._plus = array(_FIELD_TYPE, bytes(4 * self._size))
                self._plus[slot] += idf * delta
            else:
                if self._minus is None:
                    self._minus = array(_FIELD_TYPE, bytes(4 * self._size))
                self._minus[slot] -= idf * delta

    def only_plus(self) -> array | None:
        """The per-slot scores when nothing was subtracted (None: nothing was added either)."""
        return self._plus if self._minus is None else None

    def packed(self) -> int:
        """Plus minus minus: fields may be negative on their own, never in the final sum."""
        plus = 0 if self._plus is None else _pack(self._plus)
        return plus - (0 if self._minus is None else _pack(self._minus))


def _edited(found: Posting | None, edits: list[tuple[int, int]]) -> Posting:
    """A list read from its packed form with the changes noted since (see ``_edits``)."""
    slots, weights = found if found is not None else (array(SLOT_TYPE), array(WEIGHT_TYPE))
    for slot, weight in edits:
        at = bisect_left(slots, slot)
        if weight:  # added: its slot was free, so not in the list
            slots.insert(at, slot)
            weights.insert(at, weight)
        elif at < len(slots) and slots[at] == slot:
            del slots[at]
            del weights[at]
    return slots, weights


def _free_slots(used: bytearray) -> list[int]:
    """Slots not in use, as a heap (already sorted)."""
    return _offsets_of(used, 0)


def _offsets_of(data: bytes | bytearray, byte: int) -> list[int]:
    """Every offset in ``data`` that holds ``byte``, in order (``find`` runs at C speed)."""
    found: list[int] = []
    at = data.find(byte)
    while at >= 0:
        found.append(at)
        at = data.find(byte, at + 1)
    return found


class LexicalIndex:
    """Term -> posting list for the documents of one memory root."""

    def __init__(self) -> None:
        self._postings: dict[str, Posting] = {}
        self._used = bytearray()  # 1 per occupied slot
        self._free: list[int] = []  # heap of released slots below len(_used)
        self._doc_count = 0
        self._dense: OrderedDict[str, _PackedTerm] = OrderedDict()
        self._packed = PackedPostings([], array("q"), array(SLOT_TYPE), array(WEIGHT_TYPE))
        # Changes to lists still packed (on disk), in order: (slot, weight; 0: removed). They
        # are made when the list is first used, so replaying a journal reads no list.
        self._edits: dict[str, list[tuple[int, int]]] = {}
        self.damaged = False  # a saved posting list did not check out when read

    @property
    def doc_count(self) -> int:
        return self._doc_count

    @property
    def capacity(self) -> int:
        """One more than the highest slot ever used."""
        return len(self._used)

    def posting(self, term: str) -> Posting | None:
        """The (slots, weights) of ``term``, or None when no document holds it."""
        found = self._postings.get(term)
        if found is not None:
            return found
        try:
            found = self._packed.take(term)
        except DamagedIndex:
            self.damaged = True
            raise
        if found and found[0] and not 0 <= found[0][0] <= found[0][-1] < len(self._used):
            raise ValueError(f"damaged index: posting of {term!r} points past the slot table")
        edits = self._edits.pop(term, None)
        if edits:
            found = _edited(found, edits)
        if found is None or not found[0]:
            return None
        self._postings[term] = found
        return found

    def doc_frequency(self, term: str) -> int:
        found = self._postings.get(term)
        if found is not None:
            return len(found[0])
        if term in self._edits:
            found = self.posting(term)
            return 0 if found is None else len(found[0])
        return self._packed.size(term)

    def _edit_later(self, term: str, slot: int, weight: int) -> bool:
        """Note a change to ``term``'s list when that list is still packed (not read yet)."""
        if term in self._postings or (term not in self._edits and not self._packed.size(term)):
            return False
        self._edits.setdefault(term, []).append((slot, weight))
        return True

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
            if self._edit_later(term, slot, weight):
                continue
            found = self.posting(term)
            if found is None:
                found = (array(SLOT_TYPE), array(WEIGHT_TYPE))
                self._postings[term] = found
            slots, values = found
            at = bisect_left(slots, slot)
            slots.insert(at, slot)
            values.insert(at, weight)
            packed = self._dense.get(term)
            if packed is not None:
                packed.adjust(slot, weight)
        self._doc_count += 1
        return slot

    def remove(self, slot: int, terms: Iterable[str]) -> None:
        """Drop the document in ``slot``; ``terms`` are the terms it was added with."""
        if not 0 <= slot < len(self._used) or not self._used[slot]:
            raise ValueError(f"slot {slot} holds no document")
        for term in terms:
            if self._edit_later(term, slot, 0):
                continue
            found = self.posting(term)
            if found is None:
                continue
            slots, values = found
            at = bisect_left(slots, slot)
            if at < len(slots) and slots[at] == slot:
                packed = self._dense.get(term)
                if packed is not None:
                    packed.adjust(slot, -values[at])
                del slots[at]
                del values[at]
                if not slots:
                    del self._postings[term]
                    self._dense.pop(term, None)
        self._used[slot] = 0
        heapq.heappush(self._free, slot)
        self._doc_count -= 1

    # --- scoring ------------------------------------------------------------------------

    def _packed_term(self, term: str, posting: Posting) -> _PackedTerm | None:
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
        packed = self._dense[term] = _PackedTerm(_pack(fields))
        while len(self._dense) * 4 * self.capacity > _DENSE_CACHE_BYTES and len(self._dense) > 1:
            self._dense.popitem(last=False)
        return packed

    def scores(self, plan: Sequence[tuple[str, int]]) -> Scores:
        """Packed ``sum of idf * weight`` per slot for the (term, idf weight) pairs of a query."""
        total = 0
        scattered = _Scatter(self.capacity)
        seeds: list[array] = []
        postings = 0
        dense = False
        for term, idf in plan:
            posting = self.posting(term)
            if posting is None:
                continue
            packed = self._packed_term(term, posting)
            if packed is None:
                scattered.add_posting(posting, idf)
                seeds.append(posting[0])
                postings += len(posting[0])
            else:
                dense = True
                total += idf * packed.vector
                scattered.add_changes(packed.changes, idf)
        plus = scattered.only_plus()
        if not dense and plus is not None and postings * _SPARSE_RATIO <= self.capacity:
            return Scores(0, seeds, plus)  # the few scored slots are all in ``seeds``
        return Scores(total + scattered.packed(), seeds)

    # --- persistence --------------------------------------------------------------------

    @property
    def area(self) -> PostingArea | None:
        """Where the lists not used yet are, when they were left on disk."""
        return self._packed.area if self._packed._slots is None else None

    def to_state(self) -> IndexState:
        """The whole index as a few strings and byte blobs (for marshal). Raises
        :class:`DamagedIndex` when lists left on disk do not check out."""
        try:
            self._packed.load()
            for term in list(self._edits):
                self.posting(term)  # its changes made
        except DamagedIndex:
            self.damaged = True
            raise
        terms = sorted({*self._postings, *self._packed.terms()})
        ends, slots, weights = array("q"), array(SLOT_TYPE), array(WEIGHT_TYPE)
        for term in terms:
            found = self._postings.get(term)
            if found is None:
                found = self._packed.copy(term)
                assert found is not None
            slots.extend(found[0])
            ends.append(len(slots))
            weights.extend(found[1])
        return (self._doc_count, bytes(self._used), "\0".join(terms), ends.tobytes(),
                slots.tobytes(), weights.tobytes())  # fmt: skip

    @classmethod
    def from_state(cls, state: IndexState) -> LexicalIndex:
        """The index :meth:`to_state` saved. Raises ValueError when the state is inconsistent."""
        doc_count, used, joined, end_bytes, slot_bytes, weight_bytes = state
        index, ends = cls(), array("q")
        slots, weights = array(SLOT_TYPE), array(WEIGHT_TYPE)
        ends.frombytes(end_bytes)
        slots.frombytes(slot_bytes)
        weights.frombytes(weight_bytes)
        index._used = bytearray(used)
        terms = joined.split("\0") if joined else []
        total = ends[-1] if ends else 0
        if len(terms) != len(ends) or total != len(slots) or total != len(weights):
            raise ValueError("index state: term, end, slot and weight tables disagree")
        if doc_count != index._used.count(1):
            raise ValueError("index state: the document count is damaged")
        index._packed = PackedPostings(terms, ends, slots, weights)
        index._doc_count = doc_count
        index._free = _free_slots(index._used)
        return index

    @classmethod
    def from_area(
        cls, head: AreaHead, read: Callable[[int, int], bytes], start: int
    ) -> LexicalIndex:
        """The index whose lists are in a :class:`PostingArea` at ``start`` of a file (``read``
        reads its bytes), its other tables in ``head``. Raises ValueError when inconsistent."""
        doc_count, used, joined, end_bytes, crc_bytes, total, crc = head
        index, ends, crcs = cls(), array("q"), array("I")
        ends.frombytes(end_bytes)
        crcs.frombytes(crc_bytes)
        index._used = bytearray(used)
        terms = joined.split("\0") if joined else []
        if len(terms) != len(ends) or len(crcs) != len(ends) or total != (ends[-1] if ends else 0):
            raise ValueError("index state: term, end and checksum tables disagree")
        if doc_count != index._used.count(1):
            raise ValueError("index state: the document count is damaged")
        area = PostingArea(read, start, total, crcs, crc)
        index._packed = PackedPostings(terms, ends, None, None, area)
        index._doc_count = doc_count
        index._free = _free_slots(index._used)
        return index


class Hit(Value):
    shard: int  # position of the document's index in the ``indexes`` given to search()
    slot: int
    score: float


Accept = Callable[[int, int], bool]  # (shard, slot) -> may this document be returned?
SortKey = tuple[Any, ...]  # how equal scores are ordered (ascending)


@functools.lru_cache(maxsize=8)
def _constants(size: int) -> tuple[int, int]:
    """(1 in every field, 2**31 in every field) for ``size`` fields."""
    ones = _ones(size)
    return ones, ones << _GUARD_BIT


class _Shard(Value, frozen=False):
    """The packed scores of one index during a search, with their comparison constants."""

    number: int
    size: int
    scores: int
    seeds: list[array]
    ones: int
    guards: int
    biased: int  # scores + 2**31 in every field: (biased - t*ones) keeps the guard iff >= t
    values: array | None = None

    def count_at_least(self, threshold: int) -> int:
        return ((self.biased - threshold * self.ones) & self.guards).bit_count()

    def slots_at_least(self, threshold: int) -> list[int]:
        mask = (self.biased - threshold * self.ones) & self.guards
        guard_bytes = mask.to_bytes(self.size * 4, "little")[3::4]
        return _offsets_of(guard_bytes, 0x80)

    def value(self, slot: int) -> int:
        if self.values is None:
            self.values = _unpack(self.scores, self.size)
        return self.values[slot]

    def seed_values(self, wanted: int) -> list[int]:
        """The scores of documents holding the rarest query terms (each document once)."""
        chosen: list[array] = []
        total = 0
        for slots in sorted(self.seeds, key=len):
            if total + len(slots) > _SEED_SLOTS and chosen:
                break
            chosen.append(slots)
            total += len(slots)
        if not chosen:
            return []
        return [self.value(slot) for slot in set().union(*chosen)]


class _SparseShard:
    """The scores of one index where only rare terms scored: the few scored slots in a list,
    so counting and listing them never touches the rest of the pool."""

    def __init__(self, number: int, scores: array, seeds: Sequence[array]) -> None:
        self.number = number
        self._scores = scores
        self._slots = list(set().union(*seeds))  # every slot with a score above zero
        self._values = [scores[slot] for slot in self._slots]
        self._ascending = sorted(self._values)

    def count_at_least(self, threshold: int) -> int:
        return len(self._ascending) - bisect_left(self._ascending, threshold)

    def slots_at_least(self, threshold: int) -> list[int]:
        return [s for s, v in zip(self._slots, self._values, strict=True) if v >= threshold]

    def value(self, slot: int) -> int:
        return self._scores[slot]

    def seed_values(self, wanted: int) -> list[int]:
        """The ``wanted`` best scores (the seeds are every scored document)."""
        return self._ascending[-wanted:]


def _plan(indexes: Sequence[LexicalIndex], terms: Iterable[str]) -> list[tuple[str, int]]:
    """Distinct query terms present anywhere, each with its integer idf weight.

    Terms past the point where a score could reach the guard bit are dropped (the store never
    sends that many: queries are bounded to 64 tokens).
    """
    doc_count = sum(index.doc_count for index in indexes)
    plan: list[tuple[str, int]] = []
    ceiling = 0
    for term in dict.fromkeys(terms):
        frequency = sum(index.doc_frequency(term) for index in indexes)
        if frequency:
            weight = idf_weight(frequency, max(doc_count, frequency))
            ceiling += weight * MAX_TERM_WEIGHT
            if ceiling >= 1 << _GUARD_BIT:
                break
            plan.append((term, weight))
    return plan


def _shards(
    indexes: Sequence[LexicalIndex], plan: Sequence[tuple[str, int]]
) -> list[_Shard | _SparseShard]:
    shards: list[_Shard | _SparseShard] = []
    for number, index in enumerate(indexes):
        scores = index.scores(plan)
        if scores.sparse is not None:
            shards.append(_SparseShard(number, scores.sparse, scores.seeds))
        elif scores.packed:
            ones, guards = _constants(index.capacity)
            biased = scores.packed + guards
            shards.append(
                _Shard(number, index.capacity, scores.packed, scores.seeds, ones, guards, biased)
            )
    return shards


def _threshold(shards: Sequence[_Shard | _SparseShard], wanted: int, ceiling: int) -> int:
    """A score t with at least ``wanted`` documents >= t (if so many scored), and few more.

    The search starts from the ``wanted``-th best score among documents holding a rare query
    term (known without counting), which is usually already the answer.
    """
    window = max(_WINDOW_MIN, _WINDOW_FACTOR * wanted)

    def count(threshold: int) -> int:
        return sum(shard.count_at_least(threshold) for shard in shards)

    seeded = heapq.nlargest(wanted, (v for shard in shards for v in shard.seed_values(wanted)))
    low = seeded[-1] if len(seeded) == wanted else 1
    high = ceiling + 1  # count(low) >= wanted (or low == 1); count(high) < wanted
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
    order_key: Callable[[int, int], SortKey],
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
    verdicts: dict[tuple[int, int], bool] = {}
    wanted = limit
    while True:
        threshold = _threshold(shards, wanted, ceiling)
        candidates = [
            (-shard.value(slot), shard.number, slot)
            for shard in shards
            for slot in shard.slots_at_least(threshold)
        ]
        candidates.sort()
        hits: list[Hit] = []
        rejected = 0
        for negative, group in groupby(candidates, key=itemgetter(0)):
            tied = [(number, slot) for _, number, slot in group]
            if len(tied) > 1:  # order keys are only worth computing for equal scores
                tied.sort(key=lambda member: order_key(*member))
            for number, slot in tied:
                verdict = verdicts.get((number, slot))
                if verdict is None:
                    verdict = verdicts[number, slot] = accept(number, slot)
                if not verdict:
                    rejected += 1
                    continue
                hits.append(Hit(number, slot, score_value(-negative)))
                if len(hits) == limit:
                    return hits
        if threshold <= 1:
            return hits
        wanted = limit + rejected  # the rejected ones passed the threshold: look deeper
