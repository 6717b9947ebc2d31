"""The inverted index and its exact top-k search, against a brute-force ranking."""

from __future__ import annotations

import random
from collections.abc import Mapping, Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.memory.store.lexical_index import Hit, LexicalIndex, search
from cairn.memory.store.scorer import idf_weight, score_value

Doc = dict[str, int]  # term -> weight


def build(docs: Sequence[Doc]) -> tuple[LexicalIndex, dict[int, int]]:
    """An index of ``docs``; returns it and slot -> position in ``docs``."""
    index = LexicalIndex()
    return index, {index.add(doc): position for position, doc in enumerate(docs)}


def brute_force(
    shards: Sequence[Mapping[int, Doc]], terms: Sequence[str], limit: int
) -> list[tuple[int, int, float]]:
    """(shard, key, score) of the best documents, computed the slow, obvious way."""
    count = sum(len(docs) for docs in shards)
    frequency = {t: sum(t in doc for docs in shards for doc in docs.values()) for t in terms}
    scored = []
    for shard, docs in enumerate(shards):
        for key, doc in docs.items():
            points = sum(
                idf_weight(frequency[t], count) * doc[t] for t in dict.fromkeys(terms) if t in doc
            )
            if points:
                scored.append((-points, shard, key))
    scored.sort()
    return [(shard, key, score_value(-points)) for points, shard, key in scored[:limit]]


def ranked(
    indexes: Sequence[LexicalIndex],
    keys: Sequence[Mapping[int, int]],
    terms: Sequence[str],
    limit: int,
    reject: set[tuple[int, int]] = frozenset(),  # type: ignore[assignment]
) -> list[tuple[int, int, float]]:
    """search() with ties broken by shard then document key, as brute_force() does."""

    def order_key(shard: int, slot: int) -> tuple[int, int]:
        return (shard, keys[shard][slot])

    hits = search(
        indexes,
        terms,
        limit=limit,
        accept=lambda shard, slot: (shard, keys[shard][slot]) not in reject,
        order_key=order_key,
    )
    return [(hit.shard, keys[hit.shard][hit.slot], hit.score) for hit in hits]


def test_search_ranks_by_summed_idf_times_weight() -> None:
    docs = [{"payout": 200, "retry": 50}, {"payout": 20}, {"retry": 250}, {"other": 100}]
    index, keys = build(docs)
    expected = brute_force([dict(enumerate(docs))], ["payout", "retry"], 10)
    assert ranked([index], [keys], ["payout", "retry"], 10) == expected
    assert [key for _, key, _ in expected] == [0, 2, 1]


def test_documents_matching_no_term_are_never_returned() -> None:
    index, keys = build([{"alpha": 10}, {"beta": 10}])
    assert ranked([index], [keys], ["alpha"], 10) == [
        (0, 0, pytest.approx(score_value(idf_weight(1, 2) * 10)))
    ]


def test_equal_scores_are_ordered_by_the_order_key() -> None:
    index, keys = build([{"same": 100}, {"same": 100}, {"same": 100}])
    assert [key for _, key, _ in ranked([index], [keys], ["same"], 2)] == [0, 1]


def test_rejected_documents_are_skipped_and_the_next_best_fill_the_limit() -> None:
    docs = [{"t": 250}, {"t": 200}, {"t": 150}, {"t": 100}]
    index, keys = build(docs)
    result = ranked([index], [keys], ["t"], 2, reject={(0, 0), (0, 1)})
    assert [key for _, key, _ in result] == [2, 3]


def test_unknown_terms_empty_queries_and_zero_limits_give_nothing() -> None:
    index, keys = build([{"t": 1}])
    assert ranked([index], [keys], ["nope"], 5) == []
    assert ranked([index], [keys], [], 5) == []
    assert ranked([index], [keys], ["t"], 0) == []
    assert (
        search([LexicalIndex()], ["t"], limit=3, accept=lambda *_: True, order_key=lambda *_: ())
        == []
    )


def test_frequent_terms_packed_as_vectors_rank_like_rare_ones() -> None:
    """The packed path (a term in >= 1/64 of the slots, >= 32 postings) equals brute force."""
    docs = [
        {"common": 1 + (i * 37) % 255, **({"rare": 9} if i % 17 == 0 else {})} for i in range(300)
    ]
    index, keys = build(docs)
    expected = brute_force([dict(enumerate(docs))], ["common", "rare"], 25)
    assert ranked([index], [keys], ["common", "rare"], 25) == expected
    assert ranked([index], [keys], ["common", "rare"], 25) == expected  # cached vector reused


def test_packed_vectors_follow_documents_added_and_removed_after_they_were_built() -> None:
    docs = {i: {"common": 1 + i % 200} for i in range(100)}
    index, keys = build(list(docs.values()))
    ranked([index], [keys], ["common"], 5)  # builds and caches the packed vector
    for slot in (3, 50, 99):
        index.remove(slot, ["common"])
        del docs[keys.pop(slot)]
    for key in (100, 101):
        docs[key] = {"common": 250}
        keys[index.add(docs[key])] = key
    assert ranked([index], [keys], ["common"], 8) == brute_force([docs], ["common"], 8)


def test_packed_vectors_stay_exact_after_many_edits_are_folded_in() -> None:
    docs = {i: {"common": 1 + i % 250, **({"rare": 7} if i % 9 == 0 else {})} for i in range(1200)}
    index, keys = build(list(docs.values()))
    ranked([index], [keys], ["common", "rare"], 5)  # packs "common"
    for slot in range(0, 1200, 2):  # 600 slots changed: past the fold threshold
        index.remove(slot, list(docs[keys[slot]]))
        del docs[keys.pop(slot)]
        key = 10_000 + slot
        docs[key] = {"common": 1 + (slot + 1) % 250}  # always a different weight
        keys[index.add(docs[key])] = key
    for terms in (["common"], ["common", "rare"]):
        assert ranked([index], [keys], terms, 1200) == brute_force([docs], terms, 1200)


def test_rare_terms_alone_are_scored_without_packing_the_pool() -> None:
    """Issue #28: a query of rare terms only scores the few slots holding them (the sparse
    path), and ranks them exactly like brute force."""
    docs = [{f"w{i % 97}": 1 + (i * 53) % 255, f"v{i % 89}": 40} for i in range(1000)]
    index, keys = build(docs)
    plan = [("w3", 20), ("v5", 12)]
    scores = index.scores(plan)
    assert scores.sparse is not None
    assert scores.packed == 0
    for terms, limit in ((["w3", "v5"], 5), (["w3", "v5", "w4"], 30), (["v7"], 11)):
        assert ranked([index], [keys], terms, limit) == brute_force(
            [dict(enumerate(docs))], terms, limit
        )


def _sparse_docs(chance: random.Random, count: int, common_every: int) -> list[Doc]:
    """``count`` documents of 1-3 terms out of 300 (rare terms: short posting lists), with
    "common" in every ``common_every``-th (0: none)."""
    docs: list[Doc] = []
    for n in range(count):
        doc = {f"r{chance.randrange(300)}": chance.choice((1, 7, 200)) for _ in range(3)}
        if common_every and n % common_every == 0:
            doc["common"] = 9
        docs.append(doc)
    return docs


@settings(max_examples=60)
@given(seed=st.integers(0, 2**32), sizes=st.tuples(st.integers(80, 300), st.integers(80, 300)),
       common_every=st.sampled_from([0, 1, 3]), query_size=st.integers(1, 4),
       with_common=st.booleans(), limit=st.integers(1, 15),
       reject_every=st.sampled_from([0, 2, 5]))  # fmt: skip
def test_sparse_and_packed_shards_merge_into_the_brute_force_ranking(
    seed: int, sizes: tuple[int, int], common_every: int, query_size: int,
    with_common: bool, limit: int, reject_every: int,
) -> None:  # fmt: skip
    """Issue #28: shards on the sparse path (rare terms only) and on the packed path (a term
    in every or every third document of the user shard), with ties and rejected documents,
    rank like brute force."""
    chance = random.Random(seed)
    project = _sparse_docs(chance, sizes[0], 0)
    user = _sparse_docs(chance, sizes[1], common_every)
    terms = [term for doc in chance.sample([*project, *user], query_size) for term in doc]
    query = [*terms[:query_size], "common"] if with_common else terms[:query_size]
    shards = [dict(enumerate(project)), dict(enumerate(user))]
    p_index, p_keys = build(project)
    u_index, u_keys = build(user)
    reject = {
        (shard, key)
        for shard, docs in enumerate(shards)
        for key in docs
        if reject_every and key % reject_every == 0
    }
    everything = brute_force(shards, query, 10_000)
    expected = [hit for hit in everything if hit[:2] not in reject][:limit]
    assert ranked([p_index, u_index], [p_keys, u_keys], query, limit, reject) == expected


def test_two_shards_share_idf_and_merge_into_one_ranking() -> None:
    project = [{"ledger": 100}, {"ledger": 30, "uv": 200}]
    user = [{"uv": 180}, {"ledger": 250}]
    p_index, p_keys = build(project)
    u_index, u_keys = build(user)
    expected = brute_force([dict(enumerate(project)), dict(enumerate(user))], ["ledger", "uv"], 4)
    assert ranked([p_index, u_index], [p_keys, u_keys], ["ledger", "uv"], 4) == expected


def test_removed_documents_free_their_slot_for_the_next_one() -> None:
    index = LexicalIndex()
    first, second = index.add({"a": 5}), index.add({"b": 5})
    index.remove(first, ["a"])
    assert index.add({"c": 5}) == first
    assert (index.doc_count, index.capacity, second) == (2, 2, 1)
    assert index.doc_frequency("a") == 0


def test_removing_an_empty_slot_is_an_error() -> None:
    index = LexicalIndex()
    with pytest.raises(ValueError, match="holds no document"):
        index.remove(3, ["a"])


def test_weights_outside_1_to_255_are_refused() -> None:
    with pytest.raises(ValueError, match=r"must be 1\.\.255"):
        LexicalIndex().add({"a": 0})


def test_saved_state_loads_into_an_index_that_ranks_the_same() -> None:
    docs = [{"w": 1 + i % 250, f"t{i % 7}": 40} for i in range(120)]
    index, keys = build(docs)
    index.remove(5, ["w", "t5"])
    del keys[5]
    loaded = LexicalIndex.from_state(index.to_state())
    terms = ["w", "t3", "t5"]
    assert ranked([loaded], [keys], terms, 30) == ranked([index], [keys], terms, 30)
    assert loaded.add({"w": 3}) == 5  # the freed slot survives the round trip


def test_a_state_with_tables_of_different_lengths_is_refused() -> None:
    index, _ = build([{"a": 1}, {"b": 2}])
    count, used, terms, counts, slots, weights = index.to_state()
    with pytest.raises(ValueError, match="disagree"):
        LexicalIndex.from_state((count, used, terms, counts, slots[:-4], weights))
    with pytest.raises(ValueError, match="document count"):
        LexicalIndex.from_state((count + 1, used, terms, counts, slots, weights))


def test_a_posting_pointing_past_the_slot_table_is_refused_when_used() -> None:
    index, _ = build([{"a": 1}])
    count, used, terms, counts, _, weights = index.to_state()
    broken = LexicalIndex.from_state(
        (count, used, terms, counts, (99).to_bytes(4, "little"), weights)
    )
    with pytest.raises(ValueError, match="past the slot table"):
        broken.posting("a")


_vocabulary = st.sampled_from([f"t{i}" for i in range(12)])
_doc = st.dictionaries(_vocabulary, st.integers(1, 255), min_size=1, max_size=6)


@settings(max_examples=150)
@given(docs=st.lists(_doc, max_size=60), terms=st.lists(_vocabulary, max_size=6),
       limit=st.integers(1, 12))  # fmt: skip
def test_search_equals_brute_force(docs: list[Doc], terms: list[str], limit: int) -> None:
    index, keys = build(docs)
    assert ranked([index], [keys], terms, limit) == brute_force(
        [dict(enumerate(docs))], terms, limit
    )


_FEW_TERMS = "abcd"  # few terms: long lists, packed vectors
_few_terms = st.sampled_from(list(_FEW_TERMS))
_weight = st.integers(1, 255)
# A document of the few terms: which it holds (a bit mask, not 0) and their weights. The same
# documents as st.dictionaries(_few_terms, _weight, min_size=1) in fewer draws (the property
# tests below spent most of their time drawing up to 190 of them an example).
_few_term_doc = st.builds(
    lambda held, weights: {
        term: weight
        for bit, (term, weight) in enumerate(zip(_FEW_TERMS, weights, strict=True))
        if held >> bit & 1
    },
    st.integers(1, 2 ** len(_FEW_TERMS) - 1),
    st.tuples(*[_weight] * len(_FEW_TERMS)),
)
_operation = st.one_of(
    st.tuples(st.just("add"), _few_term_doc),
    st.tuples(st.just("remove"), st.integers(0, 1000)),
)


@settings(max_examples=100)
@given(operations=st.lists(_operation, min_size=40, max_size=160),
       terms=st.lists(_few_terms, max_size=4), limit=st.integers(1, 10))  # fmt: skip
def test_an_index_updated_step_by_step_ranks_exactly_like_one_rebuilt_from_scratch(
    operations: list[tuple[str, object]], terms: list[str], limit: int
) -> None:
    incremental = LexicalIndex()
    live: dict[int, tuple[int, Doc]] = {}  # slot -> (document key, document)
    for number, (kind, value) in enumerate(operations):
        if kind == "add":
            assert isinstance(value, dict)
            live[incremental.add(value)] = (number, value)
            incremental.scores([(t, 1) for t in terms])  # exercise the packed-vector cache too
        elif live:
            assert isinstance(value, int)
            slot = sorted(live)[value % len(live)]
            incremental.remove(slot, live.pop(slot)[1])
    survivors = sorted(live.values(), key=lambda item: item[0])
    rebuilt, rebuilt_slots = build([doc for _, doc in reversed(survivors)])  # other slots, order
    rebuilt_keys = {
        slot: survivors[len(survivors) - 1 - pos][0] for slot, pos in rebuilt_slots.items()
    }
    incremental_keys = {slot: key for slot, (key, _) in live.items()}
    assert ranked([incremental], [incremental_keys], terms, limit) == ranked(
        [rebuilt], [rebuilt_keys], terms, limit
    )


def test_hit_is_a_small_value_object() -> None:
    assert Hit(0, 1, 2.0) == Hit(0, 1, 2.0)


@settings(max_examples=100)
@given(saved=st.lists(_few_term_doc, min_size=1, max_size=30),
       operations=st.lists(_operation, max_size=60), reads=st.lists(_few_terms, max_size=3),
       terms=st.lists(_few_terms, max_size=4), limit=st.integers(1, 10))  # fmt: skip
def test_changes_to_lists_still_packed_are_made_when_the_list_is_read(
    saved: list[Doc],
    operations: list[tuple[str, object]],
    reads: list[str],
    terms: list[str],
    limit: int,
) -> None:
    """Issue #28: an index loaded from its saved state notes changes to lists it has not read
    (a journal's replay reads none); it then equals an index that made every change at once:
    its lists, frequencies, ranking and saved state."""
    eager, _ = build(saved)
    packed = LexicalIndex.from_state(eager.to_state())
    live = {slot: doc for slot, doc in enumerate(saved)}
    for kind, value in operations:
        if kind == "add":
            assert isinstance(value, dict)
            slot = eager.add(value)
            assert packed.add(value) == slot
            live[slot] = value
        elif live:
            assert isinstance(value, int)
            slot = sorted(live)[value % len(live)]
            doc = live.pop(slot)
            eager.remove(slot, doc)
            packed.remove(slot, doc)
        for term in reads:  # some lists read between the changes, others never
            assert packed.posting(term) == eager.posting(term)
    for term in ("a", "b", "c", "d"):
        assert packed.doc_frequency(term) == eager.doc_frequency(term)
    keys = {slot: slot for slot in live}
    assert ranked([packed], [keys], terms, limit) == ranked([eager], [keys], terms, limit)
    assert packed.to_state() == eager.to_state()
