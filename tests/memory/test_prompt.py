from __future__ import annotations

from pathlib import Path

from cairn.memory.prompt import (
    MAX_PROMPT_INDEX_CHARS,
    MAX_PROMPT_INDEX_LINES,
    MemoryTier,
    build_auto_memory_prompt,
    truncate_index_for_prompt,
)

PROJECT = Path("/home/u/.cairn/projects/-repo/memory")
USER = Path("/home/u/.cairn/memories")


def test_no_roots_cost_no_tokens() -> None:
    assert build_auto_memory_prompt([]) == ""


def test_empty_indexes_give_the_condensed_section_with_both_roots() -> None:
    text = build_auto_memory_prompt(
        [MemoryTier("project", PROJECT, ""), MemoryTier("user", USER, "\n")]
    )
    assert text.startswith("# auto memory\n")
    assert str(PROJECT) in text and str(USER) in text
    assert "memory is empty so far" in text
    assert "## What not to save" not in text


def test_a_non_empty_index_gives_the_full_section_with_the_index_contents() -> None:
    index = "- [Use uv](feedback/uv.md) — Install with uv"
    text = build_auto_memory_prompt(
        [MemoryTier("project", PROJECT, index), MemoryTier("user", USER, "")]
    )
    for heading in (
        "## Types of memory",
        "## What not to save",
        "## How to save a memory",
        "## Using memory",
    ):
        assert heading in text
    assert f"## {PROJECT / 'MEMORY.md'}\n\n{index}" in text
    assert f"## {USER / 'MEMORY.md'}\n\n(empty)" in text


def test_an_index_within_limits_is_loaded_unchanged() -> None:
    index = "\n".join(f"- line {i}" for i in range(MAX_PROMPT_INDEX_LINES))
    assert truncate_index_for_prompt(index + "\n") == index


def test_an_index_over_200_lines_is_cut_with_a_warning() -> None:
    index = "\n".join(f"- line {i}" for i in range(250))
    text = truncate_index_for_prompt(index)
    lines = text.splitlines()
    assert lines[MAX_PROMPT_INDEX_LINES - 1] == f"- line {MAX_PROMPT_INDEX_LINES - 1}"
    assert lines[-1].startswith("> WARNING: MEMORY.md has 250 lines; only the first 200")
    assert len(lines) == MAX_PROMPT_INDEX_LINES + 1


def test_an_index_over_25000_characters_is_cut_at_a_whole_line() -> None:
    index = "\n".join("x" * 149 for _ in range(190))
    text = truncate_index_for_prompt(index)
    kept = text.splitlines()[:-1]
    assert all(line == "x" * 149 for line in kept)
    assert len("\n".join(kept)) <= MAX_PROMPT_INDEX_CHARS
    assert text.splitlines()[-1].startswith("> WARNING:")
