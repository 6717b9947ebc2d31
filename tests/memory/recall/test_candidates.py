from __future__ import annotations

from cairn.memory.document import MemoryDoc
from cairn.memory.recall.candidates import (
    MAX_MODEL_CANDIDATE_DOCS,
    RECENT_MODEL_CANDIDATE_RESERVE,
    build_candidates,
)

from ..memory_helpers import DAY, NOW, make_doc


def _docs(prefix: str, count: int, *, start: float = NOW) -> list[MemoryDoc]:
    return [make_doc(f"{prefix}{i}", mtime=start - i) for i in range(count)]


def newest_first(docs: list[MemoryDoc]) -> list[MemoryDoc]:
    return sorted(docs, key=lambda doc: -doc.mtime)


def test_lexical_matches_and_recent_documents_are_interleaved() -> None:
    lexical = _docs("lex", 3, start=NOW - 10 * DAY)
    recent = _docs("new", 5)
    candidates = build_candidates(lexical, newest_first(recent + lexical), limit=5)
    names = [doc.title for doc in candidates.model]
    assert names == ["lex0", "new0", "lex1", "new1", "lex2", "new2", "new3", "new4"]


def test_candidates_never_exceed_two_hundred() -> None:
    pool = _docs("doc", 1_000)
    candidates = build_candidates(pool[:300], newest_first(pool), limit=5)
    assert len(candidates.model) == MAX_MODEL_CANDIDATE_DOCS


def test_twenty_seats_are_kept_for_recent_documents_when_many_match() -> None:
    lexical = _docs("old", 400, start=NOW - 100 * DAY)
    recent = _docs("new", 50)
    candidates = build_candidates(lexical, newest_first(recent + lexical), limit=5)
    new = [doc for doc in candidates.model if doc.title.startswith("new")]
    assert len(candidates.model) == MAX_MODEL_CANDIDATE_DOCS
    assert [doc.title for doc in new] == [f"new{i}" for i in range(RECENT_MODEL_CANDIDATE_RESERVE)]


def test_an_old_lexical_match_is_a_candidate_behind_many_newer_documents() -> None:
    old_match = make_doc("rotation", mtime=NOW - 900 * DAY)
    newer = _docs("newer", 500)
    candidates = build_candidates([old_match], newest_first([*newer, old_match]), limit=5)
    assert old_match in candidates.model
    assert len(candidates.model) == MAX_MODEL_CANDIDATE_DOCS


def test_a_lexical_match_is_not_repeated_in_the_recent_seats() -> None:
    match = make_doc("match")
    others = _docs("other", 3, start=NOW - DAY)
    candidates = build_candidates([match], newest_first([match, *others]), limit=5)
    assert [doc.title for doc in candidates.model] == ["match", "other0", "other1", "other2"]


def test_the_fallback_is_the_lexical_top_limit() -> None:
    lexical = _docs("lex", 10)
    assert build_candidates(lexical, [], limit=5).fallback == lexical[:5]


def test_semantic_candidates_take_turns_with_lexical_ones_without_repeats() -> None:
    lexical = _docs("lex", 3, start=NOW - 10 * DAY)
    semantic = [lexical[1], *_docs("sem", 3, start=NOW - 20 * DAY)]
    candidates = build_candidates(lexical, [], limit=5, semantic=semantic, semantic_each=1)
    names = [doc.title for doc in candidates.model]
    assert names == ["lex0", "lex1", "sem0", "lex2", "sem1", "sem2"]
    assert candidates.fallback == lexical


def test_semantic_candidates_fill_the_relevant_seats_when_nothing_matches_lexically() -> None:
    semantic = _docs("sem", 250, start=NOW - 10 * DAY)
    recent = _docs("new", 30)
    candidates = build_candidates([], newest_first(recent), limit=5, semantic=semantic)
    names = [doc.title for doc in candidates.model]
    assert len(names) == MAX_MODEL_CANDIDATE_DOCS
    assert len([n for n in names if n.startswith("sem")]) == 180
    assert [n for n in names if n.startswith("new")] == [f"new{i}" for i in range(20)]
    assert candidates.fallback == []


def test_two_semantic_seats_go_with_each_lexical_one() -> None:
    """Issue #26's tuning: semantic candidates find what lexical ones cannot in a large memory,
    so they get two seats for each lexical one (benchmarks/recall_mixing.py)."""
    lexical = _docs("lex", 100, start=NOW - 10 * DAY)
    semantic = [lexical[0], *_docs("sem", 200, start=NOW - 20 * DAY)]
    candidates = build_candidates(lexical, [], limit=5, semantic=semantic)
    names = [doc.title for doc in candidates.model]
    assert names[:7] == ["lex0", "sem0", "lex1", "sem1", "sem2", "lex2", "sem3"]
    assert len(names) == 180  # the relevant seats; no recent memory was offered
    assert len([n for n in names if n.startswith("lex")]) == 61  # lex0 was also semantic
    short = build_candidates(lexical[:2], [], limit=5, semantic=semantic)
    assert len(short.model) == 180  # semantic ones take the seats lexical ones leave
