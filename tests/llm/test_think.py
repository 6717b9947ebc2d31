"""Inline ``<think>`` blocks at the start of an answer become thoughts, however they are split."""

from __future__ import annotations

import itertools

from hypothesis import given
from hypothesis import strategies as st

from cairn.llm.think import InlineThinkSplitter
from cairn.llm.types import TextDelta, ThoughtDelta


def split(chunks: list[str]) -> tuple[str, str]:
    splitter = InlineThinkSplitter()
    events = [e for chunk in chunks for e in splitter.feed(chunk)] + splitter.flush()
    thought = "".join(e.text for e in events if isinstance(e, ThoughtDelta))
    text = "".join(e.text for e in events if isinstance(e, TextDelta))
    assert all(e.text for e in events)  # no empty deltas
    return thought, text


def cut(text: str, points: list[int]) -> list[str]:
    bounds = sorted({0, len(text), *(p % (len(text) + 1) for p in points)})
    return [text[a:b] for a, b in itertools.pairwise(bounds)]


def test_a_leading_think_block_is_a_thought_and_the_rest_is_the_answer() -> None:
    assert split(["<think>plan it</think>\n\nThe answer."]) == ("plan it", "The answer.")


def test_tags_split_across_chunks_are_recognised() -> None:
    assert split(["  <th", "ink>pl", "an</th", "ink>", "\nDone"]) == ("plan", "Done")


def test_a_think_tag_after_the_start_is_answer_text() -> None:
    assert split(["Use <think> tags like this"]) == ("", "Use <think> tags like this")


def test_text_that_only_looks_like_a_tag_start_is_kept() -> None:
    assert split(["<", "b>bold</b>"]) == ("", "<b>bold</b>")


def test_an_answer_cut_off_while_thinking_keeps_the_thought() -> None:
    assert split(["<think>still going"]) == ("still going", "")


@given(
    thought=st.text(max_size=30).filter(lambda t: "</think>" not in t),
    answer=st.text(min_size=1, max_size=30).filter(lambda t: t.strip() == t),
    points=st.lists(st.integers(min_value=0), max_size=8),
)
def test_any_split_of_a_think_block_and_answer_separates_them(
    thought: str, answer: str, points: list[int]
) -> None:
    raw = f"<think>{thought}</think>\n\n{answer}"

    assert split(cut(raw, points)) == (thought, answer)


@given(text=st.text(min_size=1, max_size=40), points=st.lists(st.integers(min_value=0), max_size=8))
def test_text_not_starting_with_a_think_tag_passes_through_unchanged(
    text: str, points: list[int]
) -> None:
    if text.lstrip().startswith("<think>") or not text.strip():
        return
    assert split(cut(text, points)) == ("", text)
