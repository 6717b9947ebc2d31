"""Candidate documents for Recall's model selector.

The selector sees at most 200 documents: the best lexical matches interleaved with the most
recent documents, with at least 20 seats kept for recency so a memory the user just wrote can be
chosen even when it shares no word with the query. An old document that matches the query is a
candidate however many documents are newer.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from cairn.memory.document import MemoryDoc

__all__ = [
    "LEXICAL_CANDIDATE_LIMIT",
    "MAX_MODEL_CANDIDATE_DOCS",
    "RECENT_MODEL_CANDIDATE_RESERVE",
    "Candidates",
    "build_candidates",
]

MAX_MODEL_CANDIDATE_DOCS = 200  # documents offered to the selector
RECENT_MODEL_CANDIDATE_RESERVE = 20  # seats kept for the most recent documents
LEXICAL_CANDIDATE_LIMIT = MAX_MODEL_CANDIDATE_DOCS - RECENT_MODEL_CANDIDATE_RESERVE  # 180


@dataclass(frozen=True, slots=True)
class Candidates:
    """What the selector sees (``model``) and what Recall falls back to (``fallback``)."""

    model: list[MemoryDoc]
    fallback: list[MemoryDoc]


def build_candidates(
    lexical: Sequence[MemoryDoc], newest_first: Iterable[MemoryDoc], *, limit: int
) -> Candidates:
    """Interleave lexical matches with recent documents, ≤200 in all.

    ``lexical`` is the ranked lexical selection over the eligible pool (best first, up to
    ``max(180, limit)`` long); ``newest_first`` yields eligible documents by mtime, newest first
    (read lazily, only as far as the free seats need; lexical matches in it are skipped). The
    fallback is the lexical top ``limit``.
    """
    model_lexical = list(lexical[:LEXICAL_CANDIDATE_LIMIT])
    taken = {doc.path for doc in model_lexical}
    free_seats = MAX_MODEL_CANDIDATE_DOCS - len(model_lexical)
    fresh = (doc for doc in newest_first if doc.path not in taken)
    recent = list(itertools.islice(fresh, free_seats))
    interleaved: list[MemoryDoc] = []
    for index, doc in enumerate(model_lexical):
        interleaved.append(doc)
        if index < len(recent):
            interleaved.append(recent[index])
    interleaved.extend(recent[len(model_lexical) :])
    return Candidates(model=interleaved, fallback=list(lexical[: max(limit, 0)]))
