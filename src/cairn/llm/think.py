"""Reasoning sent inline: ``<think>…</think>`` at the start of the answer text is a thought.

Some servers put a reasoning model's thinking into ``content`` wrapped in ``<think>`` tags
instead of a separate reasoning field. :class:`InlineThinkSplitter` watches the text of one
answer as it streams and routes such a leading block to :class:`ThoughtDelta`, so it never shows
as answer text, is never parsed as a side query's JSON and never reaches a recap. Tags may arrive
split across chunks; a ``<think>`` anywhere but the start is left as text.
"""

from __future__ import annotations

from typing import Literal

from cairn.llm.types import TextDelta, ThoughtDelta

__all__ = ["CLOSE_TAG", "OPEN_TAG", "InlineThinkSplitter"]

OPEN_TAG = "<think>"
CLOSE_TAG = "</think>"


class InlineThinkSplitter:
    """The answer text of one response, with a leading ``<think>`` block split off."""

    def __init__(self) -> None:
        self._state: Literal["start", "thinking", "after", "answer"] = "start"
        self._pending = ""  # text held back until it is known which side of a tag it is on

    def feed(self, text: str) -> list[TextDelta | ThoughtDelta]:
        if self._state == "answer":
            return [TextDelta(text)] if text else []
        self._pending += text
        out: list[TextDelta | ThoughtDelta] = []
        if self._state == "start":
            head = self._pending.lstrip()
            if head.startswith(OPEN_TAG):
                self._pending = head[len(OPEN_TAG) :]
                self._state = "thinking"
            elif OPEN_TAG.startswith(head):
                return out  # empty, whitespace or a partial tag: wait for more
            else:
                return self._answer(out)
        if self._state == "thinking":
            end = self._pending.find(CLOSE_TAG)
            if end < 0:
                keep = _partial_suffix(self._pending, CLOSE_TAG)
                cut = len(self._pending) - keep
                if cut:
                    out.append(ThoughtDelta(self._pending[:cut]))
                self._pending = self._pending[cut:]
                return out
            if end:
                out.append(ThoughtDelta(self._pending[:end]))
            self._pending = self._pending[end + len(CLOSE_TAG) :]
            self._state = "after"
        # After the block, the blank lines that separate it from the answer are not answer text.
        self._pending = self._pending.lstrip()
        if self._pending:
            return self._answer(out)
        return out

    def flush(self) -> list[TextDelta | ThoughtDelta]:
        """What is still held back when the answer ends."""
        pending, self._pending = self._pending, ""
        if not pending:
            return []
        if self._state == "thinking":  # the answer stopped while thinking
            return [ThoughtDelta(pending)]
        return [TextDelta(pending)]

    def _answer(self, out: list[TextDelta | ThoughtDelta]) -> list[TextDelta | ThoughtDelta]:
        self._state = "answer"
        if self._pending:
            out.append(TextDelta(self._pending))
        self._pending = ""
        return out


def _partial_suffix(text: str, tag: str) -> int:
    """The length of the longest end of ``text`` that is a start of ``tag``."""
    for size in range(min(len(tag) - 1, len(text)), 0, -1):
        if tag.startswith(text[-size:]):
            return size
    return 0
