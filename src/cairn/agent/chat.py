"""The conversation history of one session."""

from __future__ import annotations

from collections.abc import Iterable

from cairn.content import Content, FunctionCall, FunctionResponse, Part, Text, Thought

__all__ = ["ChatHistory"]


class ChatHistory:
    """An ordered list of :class:`Content` entries with copying and shallow accessors.

    ``copy()`` returns entries a caller may change freely; ``shallow()`` returns a new list of the
    live entries for read-only callers (recap, Extract) at O(n) pointer cost. Parts are immutable,
    so neither can corrupt the other's view of a part.
    """

    def __init__(self, entries: Iterable[Content] = ()) -> None:
        self._entries: list[Content] = [e.shallow_copy() for e in entries]

    def __len__(self) -> int:
        return len(self._entries)

    def copy(self) -> list[Content]:
        return [e.shallow_copy() for e in self._entries]

    def shallow(self) -> list[Content]:
        return list(self._entries)

    def tail(self, n: int) -> list[Content]:
        return [e.shallow_copy() for e in self._entries[-n:]] if n > 0 else []

    def last(self) -> Content | None:
        return self._entries[-1] if self._entries else None

    def append(self, content: Content) -> None:
        self._entries.append(content)

    def replace(self, entries: Iterable[Content]) -> None:
        self._entries = [e.shallow_copy() for e in entries]

    def truncate(self, length: int) -> None:
        del self._entries[length:]

    def clear(self) -> None:
        self._entries.clear()

    def strip_trailing_user_entries(self) -> list[Content]:
        """Remove the user entries at the end (a failed attempt being retried); return them."""
        removed: list[Content] = []
        while self._entries and self._entries[-1].role == "user":
            removed.insert(0, self._entries.pop())
        return removed

    def dangling_calls(self) -> list[FunctionCall]:
        """Calls of the last model entry that no later entry answers."""
        for index in range(len(self._entries) - 1, -1, -1):
            entry = self._entries[index]
            if entry.role != "model":
                continue
            calls = [p for p in entry.parts if isinstance(p, FunctionCall)]
            answered = {
                p.id
                for later in self._entries[index + 1 :]
                for p in later.parts
                if isinstance(p, FunctionResponse)
            }
            return [c for c in calls if c.id not in answered]
        return []

    def strip_thoughts(self) -> None:
        kept: list[Content] = []
        for entry in self._entries:
            parts: list[Part] = [p for p in entry.parts if not isinstance(p, Thought)]
            if parts:
                kept.append(type(entry)(entry.role, parts))
        self._entries = kept

    def last_model_text(self) -> str:
        for entry in reversed(self._entries):
            if entry.role == "model":
                text = "".join(p.text for p in entry.parts if isinstance(p, Text))
                if text.strip():
                    return text
        return ""
