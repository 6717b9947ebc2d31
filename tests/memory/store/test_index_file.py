"""MEMORY.md: one line per memory, within the line, line-count and size limits."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.memory.document import MemoryDoc
from cairn.memory.store.index_file import (
    MAX_INDEX_CHARS,
    MAX_INDEX_LINE_CHARS,
    MAX_INDEX_LINES,
    build_index_text,
    index_line,
    write_index,
)


def doc(
    name: str, *, title: str | None = None, description: str = "d", folder: str = "user"
) -> MemoryDoc:
    relative = f"{folder}/{name}.md"
    return MemoryDoc(
        path=Path("/m") / relative, relative_path=relative, scope="project", type="user",
        title=title if title is not None else name, description=description, body="",
        mtime=0.0, size=0,
    )  # fmt: skip


def test_a_line_links_the_title_to_the_relative_path_with_the_description() -> None:
    assert index_line(doc("uv", title="Use uv", description="Never pip")) == (
        "- [Use uv](user/uv.md) — Never pip"
    )


def test_the_type_stands_in_for_a_missing_description() -> None:
    assert index_line(doc("uv", description="")) == "- [uv](user/uv.md) — user"


def test_newlines_in_title_and_description_become_spaces() -> None:
    assert index_line(doc("x", title="Two\nlines", description="a\r\n b")) == (
        "- [Two lines](user/x.md) — a b"
    )


def test_brackets_in_a_title_are_escaped_so_the_link_stays_one_link() -> None:
    assert index_line(doc("x", title="[WIP] plan")) == "- [\\[WIP\\] plan](user/x.md) — d"


def test_a_path_with_spaces_is_wrapped_in_angle_brackets() -> None:
    assert index_line(doc("my notes")) == "- [my notes](<user/my notes.md>) — d"


def test_a_long_description_is_shortened_to_150_characters_keeping_the_link() -> None:
    line = index_line(doc("uv", title="Use uv", description="word " * 60))
    assert line is not None
    assert len(line) == MAX_INDEX_LINE_CHARS
    assert line.startswith("- [Use uv](user/uv.md) — word")
    assert line.endswith("…")


def test_a_long_title_is_shortened_when_the_link_alone_is_too_long() -> None:
    line = index_line(doc("t", title="T" * 300))
    assert line is not None and len(line) <= MAX_INDEX_LINE_CHARS
    assert line.endswith("…](user/t.md)")


def test_a_memory_with_a_path_too_long_for_150_characters_still_gets_its_line() -> None:
    """Regression (#18): a memory whose link alone passed 150 characters got no line."""
    line = index_line(doc("p" * 200, title="Deploy notes"))
    assert line == f"- [Deploy notes]({'user/' + 'p' * 200}.md)"


def test_a_newline_in_a_file_name_keeps_its_index_line_one_line() -> None:
    """Regression (#18): a newline in a file name split its MEMORY.md line in two."""
    text = build_index_text([doc("a\nb"), doc("c\rd\te")])
    assert text.splitlines() == [
        "- [a b](user/a%0Ab.md) — d",
        "- [c d e](user/c%0Dd%09e.md) — d",
    ]


@pytest.mark.timeout(60)
def test_a_200000_character_title_is_indexed_at_once() -> None:
    """Regression (#18): shortening a long title was quadratic; 200,000 characters never ended."""
    line = index_line(doc("t", title="T" * 200_000, description=""))
    assert line == f"- [{'T' * 134}…](user/t.md)"


def test_index_lists_docs_in_the_given_order_one_line_each() -> None:
    text = build_index_text([doc("b"), doc("a")])
    assert text == "- [b](user/b.md) — d\n- [a](user/a.md) — d\n"


def test_no_docs_give_an_empty_index() -> None:
    assert build_index_text([]) == ""


def test_more_than_200_docs_are_cut_to_200_lines_ending_with_a_warning() -> None:
    text = build_index_text([doc(f"m{i:03d}") for i in range(250)])
    lines = text.splitlines()
    assert len(lines) == MAX_INDEX_LINES
    assert lines[-1].startswith("> WARNING: MEMORY.md is too large")
    assert "199 of 250 memories listed" in lines[-1]
    assert lines[:199] == [f"- [m{i:03d}](user/m{i:03d}.md) — d" for i in range(199)]


def test_the_whole_index_stays_within_25000_characters_of_whole_lines() -> None:
    docs = [doc(f"m{i:03d}", description=f"{i:03d} " + "x" * 140) for i in range(190)]
    text = build_index_text(docs)
    lines = text.splitlines()
    assert len(text) <= MAX_INDEX_CHARS
    assert lines[-1].startswith("> WARNING:")
    assert all(line in {index_line(d) for d in docs} for line in lines[:-1])
    assert len(text) + len(lines[0]) + 1 > MAX_INDEX_CHARS  # no room for one more line


def test_a_small_index_with_long_paths_lists_every_memory_without_a_warning() -> None:
    """Regression (#18): long paths were dropped under a "MEMORY.md is too large" warning."""
    text = build_index_text([doc("ok"), doc("p" * 300), doc("q" * 4000)])
    lines = text.splitlines()
    assert len(lines) == 3
    assert not any(line.startswith("> WARNING") for line in lines)


def test_over_budget_short_lines_are_kept_before_long_ones_in_their_order() -> None:
    long_ones = [doc(f"{i}" + "p" * 3000, title=f"L{i}") for i in range(10)]
    short = [doc(f"s{i}") for i in range(5)]
    docs = [long_ones[0], short[0], *long_ones[1:], *short[1:]]
    lines = build_index_text(docs).splitlines()
    assert lines[-1].startswith("> WARNING: MEMORY.md is too large")
    kept = lines[:-1]
    assert [line for line in kept if "](user/s" in line] == [index_line(d) for d in short]
    assert kept == [index_line(d) for d in docs if index_line(d) in kept]  # original order
    assert len("\n".join(lines)) + 1 <= MAX_INDEX_CHARS


def test_write_index_replaces_the_file_atomically(tmp_path: Path) -> None:
    (tmp_path / "MEMORY.md").write_text("old\n", encoding="utf-8")
    assert write_index(tmp_path, [doc("a")]) is True
    assert (tmp_path / "MEMORY.md").read_text(encoding="utf-8") == "- [a](user/a.md) — d\n"
    assert sorted(os.listdir(tmp_path)) == ["MEMORY.md"]  # no temp file left behind


def test_write_index_leaves_an_identical_file_untouched(tmp_path: Path) -> None:
    write_index(tmp_path, [doc("a")])
    before = (tmp_path / "MEMORY.md").stat().st_ino
    assert write_index(tmp_path, [doc("a")]) is False
    assert (tmp_path / "MEMORY.md").stat().st_ino == before
