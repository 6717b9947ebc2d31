"""The prompt box's history: Up and Down walk through what was sent, keeping the unsent draft."""

from __future__ import annotations

from collections.abc import Iterable

__all__ = ["MAX_INPUT_HISTORY", "InputHistory"]

MAX_INPUT_HISTORY = 500  # prompts kept for Up/Down recall


class InputHistory:
    def __init__(self, entries: Iterable[str] = ()) -> None:
        self._entries: list[str] = []
        for entry in entries:
            self.add(entry)
        self._index: int | None = None  # position while browsing; None = editing the draft
        self._draft = ""

    @property
    def entries(self) -> list[str]:
        return list(self._entries)

    @property
    def browsing(self) -> bool:
        return self._index is not None

    def add(self, text: str) -> None:
        """Remember a sent prompt (blank ones and an immediate repeat are not kept twice)."""
        self._index = None
        self._draft = ""
        if not text.strip() or (self._entries and self._entries[-1] == text):
            return
        self._entries.append(text)
        del self._entries[:-MAX_INPUT_HISTORY]

    def previous(self, current: str) -> str | None:
        """The entry before the one shown (the newest first); ``None`` when there is none."""
        if not self._entries:
            return None
        if self._index is None:
            self._draft = current
            self._index = len(self._entries)
        if self._index == 0:
            return None
        self._index -= 1
        return self._entries[self._index]

    def next(self) -> str | None:
        """The entry after the one shown, then the draft; ``None`` when not browsing."""
        if self._index is None:
            return None
        self._index += 1
        if self._index >= len(self._entries):
            self._index = None
            return self._draft
        return self._entries[self._index]

    def stop_browsing(self) -> None:
        self._index = None
