"""Candidate documents for Recall's model selector, chosen for the query.

The selector sees at most 200 documents: the best lexical matches and the memories closest in
meaning to the query (semantic candidates, when the embedding model is available), taken in
turn (two semantic ones after each lexical one) and de-duplicated, interleaved with the most
recent documents, with at least 20 seats kept
for recency so a memory the user just wrote can be chosen even when it matches in no way. An
old document that matches the query is a candidate however many documents are newer. Without
semantic candidates the list is the lexical one, as before issue #26.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Iterator, Sequence

from cairn.memory.document import MemoryDoc
from cairn.values import Value

__all__ = [
    "LEXICAL_CANDIDATE_LIMIT",
    "MAX_MODEL_CANDIDATE_DOCS",
    "MAX_RELEVANT_DOCS",
    "RECENT_MODEL_CANDIDATE_RESERVE",
    "SEMANTIC_CANDIDATE_LIMIT",
    "SEMANTIC_SEATS_PER_LEXICAL",
    "Candidates",
    "build_candidates",
]

MAX_RELEVANT_DOCS = 5  # documents per Recall delivery; the selector picks "up to 5"
MAX_MODEL_CANDIDATE_DOCS = 200  # documents offered to the selector
RECENT_MODEL_CANDIDATE_RESERVE = 20  # seats kept for the most recent documents
LEXICAL_CANDIDATE_LIMIT = MAX_MODEL_CANDIDATE_DOCS - RECENT_MODEL_CANDIDATE_RESERVE  # 180
SEMANTIC_CANDIDATE_LIMIT = LEXICAL_CANDIDATE_LIMIT  # 180: all seats when nothing matches lexically
# Semantic candidates taken after each lexical one. Tuned on the paraphrase set's tuning part
# (benchmarks/recall_mixing.py): 2 finds 88.6 % of its memories among 10,000, 1 finds 87.0 %,
# 3 no more than 2; the evaluation set's lexical cases are all shown either way.
SEMANTIC_SEATS_PER_LEXICAL = 2


class Candidates(Value):
    """What the selector sees (``model``) and what Recall falls back to (``fallback``)."""

    model: list[MemoryDoc]
    fallback: list[MemoryDoc]


def _alternate(
    first: Sequence[MemoryDoc], second: Iterable[MemoryDoc], *, second_each: int = 1
) -> Iterator[MemoryDoc]:
    """first[0], then ``second_each`` of second, first[1], the next ``second_each`` of second,
    ...; each document once, and the rest of either list when the other runs out."""
    seen: set[object] = set()
    rest = iter(second)
    for doc in itertools.chain.from_iterable(
        (item, *itertools.islice(rest, second_each)) for item in first
    ):
        if doc.path not in seen:
            seen.add(doc.path)
            yield doc
    for doc in rest:
        if doc.path not in seen:
            seen.add(doc.path)
            yield doc


def build_candidates(
    lexical: Sequence[MemoryDoc],
    newest_first: Iterable[MemoryDoc],
    *,
    limit: int,
    semantic: Iterable[MemoryDoc] = (),
    semantic_each: int = SEMANTIC_SEATS_PER_LEXICAL,
) -> Candidates:
    """Relevant documents (one lexical, then ``semantic_each`` semantic ones, in turn)
    interleaved with recent ones, ≤200.

    ``lexical`` is the ranked lexical selection over the eligible pool (best first, up to
    ``max(180, limit)`` long); ``semantic`` the eligible documents nearest in meaning (best
    first, up to 180; read lazily, only as far as the relevant seats need); ``newest_first``
    yields eligible documents by mtime, newest first (read lazily, only as far as the free
    seats need; relevant ones in it are skipped). The fallback is the lexical top ``limit``.
    """
    mixed = _alternate(lexical, semantic, second_each=semantic_each)
    relevant = list(itertools.islice(mixed, LEXICAL_CANDIDATE_LIMIT))
    taken = {doc.path for doc in relevant}
    free_seats = MAX_MODEL_CANDIDATE_DOCS - len(relevant)
    fresh = (doc for doc in newest_first if doc.path not in taken)
    recent = list(itertools.islice(fresh, free_seats))
    interleaved: list[MemoryDoc] = []
    for index, doc in enumerate(relevant):
        interleaved.append(doc)
        if index < len(recent):
            interleaved.append(recent[index])
    interleaved.extend(recent[len(relevant) :])
    return Candidates(model=interleaved, fallback=list(lexical[: max(limit, 0)]))
