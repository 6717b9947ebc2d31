"""Loop detection: the same tool call over and over, or the same text chanted again and again."""

from __future__ import annotations

import hashlib
import json
from collections import defaultdict

from cairn.content import FunctionCall
from cairn.values import Value

__all__ = ["LoopDetector", "LoopInfo", "describe_loop"]

TOOL_CALL_LOOP_THRESHOLD = 5  # identical consecutive tool calls that count as a loop
CONTENT_CHUNK_SIZE = 50  # characters per compared chunk of streamed text
CONTENT_LOOP_THRESHOLD = 10  # repetitions of one chunk that count as a loop
MAX_HISTORY_LENGTH = 1000  # characters of streamed text kept for comparison


# What each loop type means, in words for people (the type itself is for telemetry).
_LOOP_WORDS = {
    "consecutive_identical_tool_calls": "the model kept making the same tool call",
    "chanting_identical_sentences": "the model kept repeating the same text",
}


def describe_loop(loop_type: str) -> str:
    """``the model kept making the same tool call``: a loop type as people read it."""
    return _LOOP_WORDS.get(loop_type, "the model kept repeating itself")


class LoopInfo(Value):
    loop_type: str  # "consecutive_identical_tool_calls" | "chanting_identical_sentences"
    detail: str


class LoopDetector:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._last_call_key: str | None = None
        self._repeat_count = 0
        self._text = ""
        self._chunk_positions: dict[str, list[int]] = defaultdict(list)
        self._offset = 0  # absolute position of self._text[0]
        self._in_code_block = False

    def check_tool_call(self, call: FunctionCall) -> LoopInfo | None:
        payload = json.dumps(dict(call.args), sort_keys=True, default=str)
        key = hashlib.sha256(f"{call.name}:{payload}".encode()).hexdigest()
        if key == self._last_call_key:
            self._repeat_count += 1
        else:
            self._last_call_key = key
            self._repeat_count = 1
        if self._repeat_count >= TOOL_CALL_LOOP_THRESHOLD:
            return LoopInfo(
                "consecutive_identical_tool_calls",
                f"the model called {call.name} with the same arguments "
                f"{self._repeat_count} times in a row",
            )
        return None

    def check_text(self, delta: str) -> LoopInfo | None:
        # Code blocks repeat legitimately (tables, boilerplate); don't count them.
        if delta.count("```") % 2 == 1:
            self._in_code_block = not self._in_code_block
            self._reset_text()
            return None
        if self._in_code_block:
            return None
        start = len(self._text)
        self._text += delta
        found = None
        for index in range(
            max(0, start - CONTENT_CHUNK_SIZE + 1), len(self._text) - CONTENT_CHUNK_SIZE + 1
        ):
            chunk = self._text[index : index + CONTENT_CHUNK_SIZE]
            positions = self._chunk_positions[chunk]
            positions.append(self._offset + index)
            if len(positions) >= CONTENT_LOOP_THRESHOLD and self._close(positions):
                found = LoopInfo(
                    "chanting_identical_sentences",
                    f"the model repeated the same text {len(positions)} times",
                )
                break
        self._trim()
        return found

    @staticmethod
    def _close(positions: list[int]) -> bool:
        recent = positions[-CONTENT_LOOP_THRESHOLD:]
        average_gap = (recent[-1] - recent[0]) / (len(recent) - 1)
        return average_gap <= CONTENT_CHUNK_SIZE * 1.5

    def _trim(self) -> None:
        excess = len(self._text) - MAX_HISTORY_LENGTH
        if excess <= 0:
            return
        self._text = self._text[excess:]
        self._offset += excess
        floor = self._offset
        for chunk in list(self._chunk_positions):
            kept = [p for p in self._chunk_positions[chunk] if p >= floor]
            if kept:
                self._chunk_positions[chunk] = kept
            else:
                del self._chunk_positions[chunk]

    def _reset_text(self) -> None:
        self._text = ""
        self._chunk_positions.clear()
        self._offset = 0
