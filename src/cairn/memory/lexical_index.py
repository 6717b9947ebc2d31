"""The inverted index behind the fast phase, and the exact top-k search over it.

One :class:`LexicalIndex` per memory root maps each term to a posting list: the ids of the
documents holding it (ascending) with their saturated BM25F weights (:mod:`cairn.memory.scorer`).
A document is added or removed on its own, so an edited file re-indexes only itself.

:func:`search` scores term by term, rarest first (MaxScore): once the terms left can add less to a
document than the k-th best score found so far, documents holding only those terms cannot reach
the top k, so the remaining posting lists are only probed for documents already scored. The
result is exactly the top k of a full evaluation; the common words of a query stop costing time.

Persisted form (:meth:`LexicalIndex.to_state`): all posting lists concatenated into two flat
arrays, so a new process loads an index with a handful of C-level copies; a term's list is cut
out of the flat arrays the first time it is used.
"""

from __future__ import annotations

import heapq
import math
from array import array
from bisect import bisect_left
from collections.abc import Callable, Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from itertools import accumulate, repeat
from operator import itemgetter, mul

from cairn.memory.scorer import idf

__all__ = ["Hit", "IndexState", "LexicalIndex", "search"]

_ID_TYPE = "i"  # posting ids: signed 32-bit
_WEIGHT_TYPE = "f"  # posting weights: 32-bit floats (7 significant digits is plenty to rank)
_PRUNE_MIN_POSTINGS = 64  # shorter lists are cheaper to walk than to check the bound for
_BISECT_RATIO = 8  # probe by binary search when the list is this many times longer than acc
_UPPER_BOUND_SLACK = 1.0 + 1e-9  # float rounding margin on the "cannot reach the top k" bound

IndexState = tuple[str, bytes, bytes, bytes, int]  # terms, counts, ids, weights, doc count
_Posting = tuple[array, array]  # (ids, weights)


class LexicalIndex:
    """Term -> posting list for the documents of one memory root."""

    def __init__(self) -> None:
        self._postings: dict[str, _Posting] = {}
        self._doc_count = 0
        # Lazily cut posting lists of a loaded state: term -> (start, end) in the flat arrays.
        self._packed: dict[str, tuple[int, int]] = {}
        self._packed_ids = array(_ID_TYPE)
        self._packed_weights = array(_WEIGHT_TYPE)

    @property
    def doc_count(self) -> int:
        return self._doc_count

    def posting(self, term: str) -> _Posting | None:
        """The (ids, weights) of ``term``, or None when no document holds it."""
        found = self._postings.get(term)
        if found is not None:
            return found
        span = self._packed.pop(term, None)
        if span is None:
            return None
        start, end = span
        found = (self._packed_ids[start:end], self._packed_weights[start:end])
        self._postings[term] = found
        return found

    def doc_frequency(self, term: str) -> int:
        found = self._postings.get(term)
        if found is not None:
            return len(found[0])
        span = self._packed.get(term)
        return 0 if span is None else span[1] - span[0]

    def add(self, doc_id: int, weights: Mapping[str, float]) -> None:
        """Index a document under a fresh id (ids only grow, so this appends)."""
        for term, weight in weights.items():
            found = self.posting(term)
            if found is None:
                found = (array(_ID_TYPE), array(_WEIGHT_TYPE))
                self._postings[term] = found
            ids, values = found
            if not ids or ids[-1] < doc_id:
                ids.append(doc_id)
                values.append(weight)
            else:
                at = bisect_left(ids, doc_id)
                if at < len(ids) and ids[at] == doc_id:
                    raise ValueError(f"document {doc_id} is already indexed under {term!r}")
                ids.insert(at, doc_id)
                values.insert(at, weight)
        self._doc_count += 1

    def remove(self, doc_id: int, terms: Iterable[str]) -> None:
        """Drop a document; ``terms`` are the terms it was added with."""
        for term in terms:
            found = self.posting(term)
            if found is None:
                continue
            ids, values = found
            at = bisect_left(ids, doc_id)
            if at < len(ids) and ids[at] == doc_id:
                del ids[at]
                del values[at]
                if not ids:
                    del self._postings[term]
        self._doc_count -= 1

    def to_state(self) -> IndexState:
        """The whole index as a few strings and byte blobs (for marshal)."""
        terms = sorted({*self._postings, *self._packed})
        counts, ids, weights = array("q"), array(_ID_TYPE), array(_WEIGHT_TYPE)
        for term in terms:
            found = self._postings.get(term)
            if found is None:
                start, end = self._packed[term]
                found = (self._packed_ids[start:end], self._packed_weights[start:end])
            counts.append(len(found[0]))
            ids.extend(found[0])
            weights.extend(found[1])
        return ("\0".join(terms), counts.tobytes(), ids.tobytes(), weights.tobytes(),
                self._doc_count)  # fmt: skip

    @classmethod
    def from_state(cls, state: IndexState) -> LexicalIndex:
        """The index :meth:`to_state` saved. Raises ValueError when the state is inconsistent."""
        joined, count_bytes, id_bytes, weight_bytes, doc_count = state
        counts, index = array("q"), cls()
        counts.frombytes(count_bytes)
        index._packed_ids.frombytes(id_bytes)
        index._packed_weights.frombytes(weight_bytes)
        terms = joined.split("\0") if joined else []
        ends = list(accumulate(counts))
        total = ends[-1] if ends else 0
        if len(terms) != len(counts) or total != len(index._packed_ids):
            raise ValueError("index state: term, count and id tables disagree")
        if total != len(index._packed_weights) or not isinstance(doc_count, int):
            raise ValueError("index state: weight table or document count is damaged")
        index._packed = dict(zip(terms, zip([0, *ends[:-1]], ends, strict=True), strict=True))
        index._doc_count = doc_count
        return index


@dataclass(frozen=True, slots=True)
class Hit:
    shard: int  # position of the document's index in the ``indexes`` given to search()
    doc_id: int
    score: float


@dataclass(frozen=True, slots=True)
class _Term:
    idf: float
    postings: tuple[_Posting | None, ...]  # one per shard


def _plan(indexes: Sequence[LexicalIndex], terms: Iterable[str]) -> list[_Term]:
    """Query terms present anywhere, rarest (highest idf) first; ties keep query order."""
    doc_count = sum(index.doc_count for index in indexes)
    planned: list[tuple[float, int, _Term]] = []
    for position, term in enumerate(dict.fromkeys(terms)):
        postings = tuple(index.posting(term) for index in indexes)
        frequency = sum(len(found[0]) for found in postings if found is not None)
        if frequency:
            weight = idf(frequency, max(doc_count, frequency))
            planned.append((-weight, position, _Term(weight, postings)))
    planned.sort(key=itemgetter(0, 1))
    return [term for _, _, term in planned]


def _accumulate(acc: dict[int, float], posting: _Posting, weight: float, *, grow: bool) -> None:
    """Add ``weight * posting`` into ``acc``; new documents join only when ``grow``."""
    ids, values = posting
    if not grow and len(ids) > _BISECT_RATIO * len(acc):
        size = len(ids)
        for doc_id in acc:
            at = bisect_left(ids, doc_id)
            if at < size and ids[at] == doc_id:
                acc[doc_id] += weight * values[at]
        return
    if not acc and grow:
        acc.update(zip(ids, map(mul, values, repeat(weight)), strict=True))
        return
    contribution = dict(zip(ids, map(mul, values, repeat(weight)), strict=True))
    for doc_id in acc.keys() & contribution.keys():
        acc[doc_id] += contribution[doc_id]
    if grow:
        for doc_id, value in contribution.items():
            if doc_id not in acc:
                acc[doc_id] = value


Accept = Callable[[int, int], bool]  # (shard, doc_id) -> may this document be returned?


def _kth_best(accs: Sequence[dict[int, float]], k: int, accept: Accept) -> float | None:
    """The k-th highest score among accepted documents, or None when fewer are accepted."""
    take = k + 8
    total = sum(len(acc) for acc in accs)
    while True:
        top = heapq.nlargest(
            take,
            ((score, shard, doc_id) for shard, acc in enumerate(accs) for doc_id, score in
             heapq.nlargest(take, acc.items(), key=itemgetter(1))),
            key=itemgetter(0),
        )  # fmt: skip
        accepted = 0
        for score, shard, doc_id in top:
            if accept(shard, doc_id):
                accepted += 1
                if accepted == k:
                    return score
        if take >= total:
            return None
        take *= 4


def search(
    indexes: Sequence[LexicalIndex],
    terms: Iterable[str],
    *,
    limit: int,
    accept: Accept,
    order_key: Callable[[int, int], Hashable],
    bonus: Callable[[int, int], float] | None = None,
    bonus_cap: float = 0.0,
) -> list[Hit]:
    """The ``limit`` best accepted documents, score descending, then by ``order_key``.

    ``bonus(shard, doc_id)`` (at most ``bonus_cap``) is added to every document that matched a
    term. Every returned score is above zero.
    """
    plan = _plan(indexes, terms)
    if limit <= 0 or not plan:
        return []
    remaining = list(accumulate(term.idf for term in reversed(plan)))[::-1]
    accs: list[dict[int, float]] = [{} for _ in indexes]
    grow = True
    for position, term in enumerate(plan):
        bound = (remaining[position] + bonus_cap) * _UPPER_BOUND_SLACK
        # No document has scored more than the idfs seen so far: only then can theta beat bound.
        if (
            grow
            and bound < remaining[0] - remaining[position]
            and _worth_pruning(term, accs, limit)
        ):
            theta = _kth_best(accs, limit, accept)
            grow = theta is None or bound >= theta
        for shard, posting in enumerate(term.postings):
            if posting is not None:
                _accumulate(accs[shard], posting, term.idf, grow=grow)
    if bonus is not None:
        for shard, acc in enumerate(accs):
            for doc_id in acc:
                acc[doc_id] += bonus(shard, doc_id)
    return _select(accs, limit, accept, order_key)


def _worth_pruning(term: _Term, accs: Sequence[dict[int, float]], limit: int) -> bool:
    size = sum(len(found[0]) for found in term.postings if found is not None)
    return size >= _PRUNE_MIN_POSTINGS and sum(len(acc) for acc in accs) >= limit


def _select(
    accs: Sequence[dict[int, float]],
    limit: int,
    accept: Accept,
    order_key: Callable[[int, int], Hashable],
) -> list[Hit]:
    theta = _kth_best(accs, limit, accept)
    floor = -math.inf if theta is None else theta
    hits = [
        Hit(shard, doc_id, score)
        for shard, acc in enumerate(accs)
        for doc_id, score in acc.items()
        if score >= floor and accept(shard, doc_id)
    ]
    hits.sort(key=lambda hit: (-hit.score, order_key(hit.shard, hit.doc_id)))
    return hits[:limit]
