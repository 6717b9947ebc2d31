"""Memory body entries: the per-file shape and the legacy multi-entry shape."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.store.entries import (
    EMPTY_BODY_PLACEHOLDER,
    MemoryEntry,
    merge_entry,
    parse_entries,
    render_entries,
)


def test_per_file_body_gives_one_entry_with_its_fields() -> None:
    body = "Use uv, never pip.\n\nWhy: the lock file.\nHow to apply: any install."
    assert parse_entries(body) == [
        MemoryEntry("Use uv, never pip.", "the lock file.", "any install.")
    ]


def test_bold_and_underscore_field_keys_are_recognised_in_any_case() -> None:
    body = "Summary\n**Why:** reason\n**HOW_TO_APPLY**: always"
    assert parse_entries(body) == [MemoryEntry("Summary", "reason", "always")]


def test_legacy_body_gives_one_entry_per_bullet_with_indented_fields() -> None:
    body = (
        "# User\n\n"
        "- Prefers reading code\n  Why: prose slows them down\n"
        "* Has a 1:1 on Thursdays\n    - How to apply: no release work then\n"
    )
    assert parse_entries(body) == [
        MemoryEntry("Prefers reading code", why="prose slows them down"),
        MemoryEntry("Has a 1:1 on Thursdays", how_to_apply="no release work then"),
    ]


def test_plain_lines_after_the_first_entry_are_ignored() -> None:
    assert parse_entries("First line\nSecond line\nWhy: w") == [MemoryEntry("First line", "w")]


def test_headings_blank_lines_and_the_placeholder_give_no_entries() -> None:
    assert parse_entries(f"# Feedback\n\n{EMPTY_BODY_PLACEHOLDER}\n") == []


def test_field_lines_before_any_entry_are_dropped() -> None:
    assert parse_entries("Why: orphan\n- Real entry") == [MemoryEntry("Real entry")]


def test_whitespace_inside_values_is_collapsed() -> None:
    assert parse_entries("-   spaced    out \n  Why:  a   b ") == [MemoryEntry("spaced out", "a b")]


def test_rendered_entries_use_blank_lines_and_no_bullets() -> None:
    entries = [MemoryEntry("One", "because"), MemoryEntry("Two", how_to_apply="always")]
    assert render_entries(entries) == "One\n\nWhy: because\n\nTwo\n\nHow to apply: always"


def test_rendering_no_entries_gives_the_placeholder() -> None:
    assert render_entries([]) == EMPTY_BODY_PLACEHOLDER


def test_merge_keeps_the_incoming_summary_and_fills_missing_fields() -> None:
    merged = merge_entry(
        MemoryEntry("old", "old why", "old how"), MemoryEntry("new", "", "new how")
    )
    assert merged == MemoryEntry("new", "old why", "new how")


def test_search_text_is_lower_case_summary_why_and_how() -> None:
    assert MemoryEntry("Use UV", "Lock", "Always").search_text == "use uv lock always"


@given(st.text())
def test_any_body_parses_without_error(body: str) -> None:
    assert all(isinstance(entry, MemoryEntry) for entry in parse_entries(body))
