from __future__ import annotations

import pytest

from cairn.memory.recall.render import (
    MAX_DOC_BODY_CHARS,
    RELEVANT_MEMORY_HEADING,
    TRUNCATION_NOTE,
    render_relevant_memory,
)

from ..memory_helpers import DAY, NOW, make_doc


def test_no_documents_render_nothing() -> None:
    assert render_relevant_memory([], now=NOW) == ""


def test_a_document_renders_heading_title_path_description_and_body() -> None:
    doc = make_doc("uv", type="feedback", title="Use uv", description="Install with uv", body="B")
    text = render_relevant_memory([doc], now=NOW)
    assert text.startswith(RELEVANT_MEMORY_HEADING + "\n\n")
    assert "### Use uv (feedback/uv.md)\nSaved today.\nInstall with uv\n\nB" in text


@pytest.mark.parametrize(
    ("age", "expected"),
    [
        (0.0, "Saved today."),
        (DAY - 1, "Saved today."),
        (DAY, "Saved yesterday."),
        (2 * DAY + 5, "Saved 2 days ago."),
        (40 * DAY, "Saved 40 days ago."),
    ],
)
def test_age_is_whole_days_by_the_injected_clock(age: float, expected: str) -> None:
    doc = make_doc("a", mtime=NOW - age)
    assert expected in render_relevant_memory([doc], now=NOW)


def test_a_future_mtime_counts_as_today() -> None:
    doc = make_doc("a", mtime=NOW + 5 * DAY)
    assert "Saved today." in render_relevant_memory([doc], now=NOW)


def test_a_memory_older_than_one_day_carries_a_staleness_note() -> None:
    doc = make_doc("a", body="x", mtime=NOW - 3 * DAY)
    assert "> NOTE: This memory is 3 days old." in render_relevant_memory([doc], now=NOW)


@pytest.mark.parametrize("age", [0.0, DAY, 2 * DAY - 1])
def test_a_memory_at_most_one_day_old_has_no_staleness_note(age: float) -> None:
    doc = make_doc("a", body="x", mtime=NOW - age)
    assert "days old" not in render_relevant_memory([doc], now=NOW)


def test_a_long_body_is_cut_at_1200_characters_with_a_note() -> None:
    doc = make_doc("a", body="x" * (MAX_DOC_BODY_CHARS + 1))
    text = render_relevant_memory([doc], now=NOW)
    assert "x" * MAX_DOC_BODY_CHARS + "\n\n" + TRUNCATION_NOTE in text
    assert "x" * (MAX_DOC_BODY_CHARS + 1) not in text


def test_a_body_of_exactly_1200_characters_is_not_cut() -> None:
    doc = make_doc("a", body="y" * MAX_DOC_BODY_CHARS)
    assert TRUNCATION_NOTE not in render_relevant_memory([doc], now=NOW)


def test_an_empty_body_renders_a_placeholder() -> None:
    text = render_relevant_memory([make_doc("a", body="  ")], now=NOW)
    assert "_No detailed entries yet._" in text


def test_documents_render_in_the_given_order() -> None:
    text = render_relevant_memory([make_doc("second"), make_doc("first")], now=NOW)
    assert text.index("### second") < text.index("### first")
