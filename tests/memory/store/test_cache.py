"""The parse cache's record table and the persisted cache file."""

from __future__ import annotations

import io
from pathlib import Path

from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.store.cache import (
    DocRecord,
    RecordTable,
    ShardCache,
    SkipRecord,
    load_cache,
    save_cache,
)
from cairn.memory.store.lexical_index import LexicalIndex

KEY = (1_700_000_000_123_456_789, 321, 98765, 1_700_000_000_999_999_999)


def doc_record(slot: int, *, body: str = "body", symlink: bool = False) -> DocRecord:
    return DocRecord(KEY, slot, "feedback", "Title", "Description", body, 1.5, 42, symlink)


def filled_table() -> RecordTable:
    table = RecordTable()
    table.put("feedback/a.md", doc_record(0, body="漢字 and emoji 🙂"))
    table.put("pinned/link.md", doc_record(1, symlink=True))
    table.put("user/bad.md", SkipRecord(KEY, "unknown_type", "unknown type 'memo'"))
    return table


def round_trip(table: RecordTable) -> RecordTable:
    """The table saved (its texts into a buffer) and loaded back."""
    texts = io.BytesIO()
    state = table.to_state(texts)
    return RecordTable.from_state(state, texts.getvalue())


def test_put_keeps_the_lookups_current() -> None:
    table = filled_table()
    assert table.keys == {"feedback/a.md": KEY, "pinned/link.md": KEY, "user/bad.md": KEY}
    assert table.by_slot == {0: "feedback/a.md", 1: "pinned/link.md"}
    assert (table.symlinks, table.skips) == ({"pinned/link.md"}, {"user/bad.md"})


def test_pop_removes_a_record_from_every_lookup() -> None:
    table = filled_table()
    assert table.pop("pinned/link.md") == doc_record(1, symlink=True)
    assert table.pop("user/bad.md") is not None
    assert (len(table), table.by_slot, table.symlinks, table.skips) == (
        1,
        {0: "feedback/a.md"},
        set(),
        set(),
    )
    assert table.pop("missing.md") is None


def test_a_saved_table_loads_back_record_for_record() -> None:
    table = filled_table()
    loaded = round_trip(table)
    assert dict(loaded.items()) == dict(table.items())
    assert (loaded.keys, loaded.by_slot, loaded.symlinks, loaded.skips) == (
        table.keys, table.by_slot, table.symlinks, table.skips,
    )  # fmt: skip
    assert sorted(loaded.doc_mtimes()) == [("feedback/a.md", 1.5), ("pinned/link.md", 1.5)]


def test_an_empty_table_round_trips() -> None:
    assert len(round_trip(RecordTable())) == 0


def test_a_table_with_columns_of_different_lengths_is_refused() -> None:
    texts = io.BytesIO()
    state = list(filled_table().to_state(texts))
    state[2] = state[2][:-4]  # one slot short
    try:
        RecordTable.from_state(tuple(state), texts.getvalue())
    except ValueError as error:
        assert "columns of different lengths" in str(error)
    else:
        raise AssertionError("a damaged table was accepted")


@given(st.text(), st.text(), st.text())
def test_any_text_survives_the_round_trip(title: str, description: str, body: str) -> None:
    table = RecordTable()
    table.put("x.md", DocRecord(KEY, 0, "user", title, description, body, 0.0, 0, False))
    assert round_trip(table).get("x.md") == table.get("x.md")


def _cache() -> ShardCache:
    cache = ShardCache()
    slot = cache.index.add({"ledger": 200})
    cache.records.put("project/m.md", doc_record(slot))
    return cache


def test_a_saved_cache_loads_back(tmp_path: Path) -> None:
    path = tmp_path / "c" / "project.bin"
    assert save_cache(path, _cache(), root="/r", scope="project", fingerprint="f1")
    loaded = load_cache(path, root="/r", scope="project", fingerprint="f1")
    assert loaded is not None
    assert dict(loaded.records.items()) == dict(_cache().records.items())
    assert loaded.index.doc_frequency("ledger") == 1


def test_a_cache_for_another_root_scope_or_scorer_is_not_loaded(tmp_path: Path) -> None:
    path = tmp_path / "project.bin"
    save_cache(path, _cache(), root="/r", scope="project", fingerprint="f1")
    assert load_cache(path, root="/other", scope="project", fingerprint="f1") is None
    assert load_cache(path, root="/r", scope="user", fingerprint="f1") is None
    assert load_cache(path, root="/r", scope="project", fingerprint="f2") is None


def test_a_missing_or_damaged_cache_loads_as_none(tmp_path: Path) -> None:
    path = tmp_path / "project.bin"
    assert load_cache(path, root="/r", scope="project", fingerprint="f") is None
    save_cache(path, _cache(), root="/r", scope="project", fingerprint="f")
    data = path.read_bytes()
    for damaged in (data[: len(data) // 2], data[:-1] + b"\x00", b"\x00" * 64):
        path.write_bytes(damaged)
        assert load_cache(path, root="/r", scope="project", fingerprint="f") is None


def test_records_disagreeing_with_the_index_are_refused(tmp_path: Path) -> None:
    cache = _cache()
    cache.index = LexicalIndex()  # the record says one memory, the index none
    path = tmp_path / "project.bin"
    save_cache(path, cache, root="/r", scope="project", fingerprint="f")
    assert load_cache(path, root="/r", scope="project", fingerprint="f") is None


def test_saving_into_an_unwritable_place_returns_false(tmp_path: Path) -> None:
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", "utf-8")
    assert (
        save_cache(blocker / "project.bin", _cache(), root="/r", scope="p", fingerprint="f")
        is False
    )


# --- searching the saved texts (issue #28: a title or a request among 100,000 memories) -------


def _texts_table(bodies: list[str]) -> RecordTable:
    table = RecordTable()
    for slot, body in enumerate(bodies):
        table.put(
            f"m{slot:05d}.md", DocRecord(KEY, slot, "user", f"T{slot}", "d", body, 0.0, 0, False)
        )
    table.put("bad.md", SkipRecord(KEY, "unknown_type", "the word needle in a skip"))
    return table


def _brute_force(table: RecordTable, needles: list[str]) -> set[str]:
    return {
        relative
        for relative, record in table.items()
        if isinstance(record, DocRecord)
        and all(
            any(
                needle in text.casefold()
                for text in (record.title, record.description, record.body)
            )
            for needle in needles
        )
    }


def test_containing_finds_a_word_in_any_case_in_loaded_and_changed_records() -> None:
    """Issue #28: the saved texts are searched in bulk, ASCII in lower case and the others
    casefolded (ß is ss), and a record changed since the load is searched as it is now."""
    loaded = round_trip(
        _texts_table(["plain Needle here", "Straße und Weg", "nothing", "NEEDLE — dash"])
    )
    loaded.put("m00002.md", DocRecord(KEY, 2, "user", "T2", "d", "a needle now", 0.0, 0, False))
    assert loaded.containing(["needle"]) == {"m00000.md", "m00002.md", "m00003.md"}
    assert loaded.containing(["strasse"]) == {"m00001.md"}
    assert loaded.containing(["needle", "dash"]) == {"m00003.md"}
    assert loaded.containing(["t1"]) >= {"m00001.md"}  # titles too


def test_containing_reads_the_texts_a_few_megabytes_at_a_time_without_missing_a_row() -> None:
    """Rows on both sides of each read's boundary (over 4 MB of texts) are found."""
    bodies = [("x" * 1000) + (" needle" if n % 97 == 0 else "") for n in range(9000)]
    bodies[4190:4200] = [("y" * 1000) + " needle"] * 10  # around the first 4 MB boundary
    table = round_trip(_texts_table(bodies))
    assert table.containing(["needle"]) == _brute_force(table, ["needle"])


@given(st.lists(st.text(), min_size=1, max_size=6), st.text(min_size=1, max_size=4))
def test_containing_finds_every_record_that_holds_the_text(bodies: list[str], text: str) -> None:
    needle = text.casefold()
    if not needle:
        return
    table = round_trip(_texts_table(bodies))
    assert table.containing([needle]) >= _brute_force(table, [needle])


def test_containing_searches_for_a_number_in_the_texts_without_lower_casing_them() -> None:
    """Issue #28: a request or title holding a word without letters (a number) is looked up by
    that word in the texts as they are (no lower-cased copy of 100,000 memories' texts), the
    rest checked on the rows holding it; a number common in the texts falls back to the
    lower-cased search. The same memories are found either way."""
    bodies = [f"Note {n} about the DEPLOY of 2026 build {n * 7}" for n in range(200)]
    bodies[33] = "the deploy NOTE 33333 of 2026"
    table = round_trip(_texts_table(bodies))
    for needles in (["note 33333"], ["deploy", "33333"], ["deploy", "2026"], ["2026 build 7"]):
        assert table.containing(needles) == _brute_force(table, needles), needles


@given(
    st.lists(st.text(alphabet="aB1 2-é", max_size=12), min_size=1, max_size=40),
    st.lists(st.text(alphabet="ab1 2-É", min_size=1, max_size=6), min_size=1, max_size=3),
)
def test_containing_with_words_without_letters_finds_every_record_holding_all_texts(
    bodies: list[str], texts: list[str]
) -> None:
    needles = [text.casefold() for text in texts if text.strip()]
    if not needles:
        return
    table = round_trip(_texts_table(bodies))
    assert table.containing(needles) >= _brute_force(table, needles)
