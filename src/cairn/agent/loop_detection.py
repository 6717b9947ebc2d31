"""Loop detection: the same tool call over and over, a cycle of calls coming round again, one
tool failing the same way again and again, or the same text chanted again and again.

A weak model stuck on a failing edit rarely repeats one call: it alternates two edits (A, B, A,
B ...) or varies the arguments while the tool answers the same error. Counting only identical
neighbours let such a model run until its context overflowed (issue 33).
"""

from __future__ import annotations

import hashlib
import json
from collections import Counter, defaultdict, deque

from cairn.content import FunctionCall
from cairn.values import Value

__all__ = ["LoopDetector", "LoopInfo", "describe_loop"]

TOOL_CALL_LOOP_THRESHOLD = 5  # identical consecutive tool calls that count as a loop
MAX_CYCLE_LENGTH = 4  # the longest cycle of different calls that is looked for
CYCLE_REPEATS = 3  # times a cycle must come round in a row to count as a loop
FAILURE_LOOP_THRESHOLD = 4  # failures of one tool with the same error in a turn that count
MAX_ERROR_KEY_CHARS = 500  # of an error's text compared between failures
CONTENT_CHUNK_SIZE = 50  # characters per compared chunk of streamed text
CONTENT_LOOP_THRESHOLD = 10  # repetitions of one chunk that count as a loop
MAX_HISTORY_LENGTH = 1000  # characters of streamed text kept for comparison


# What each loop type means, in words for people (the type itself is for telemetry).
_LOOP_WORDS = {
    "consecutive_identical_tool_calls": "the model kept making the same tool call",
    "repeated_tool_call_cycle": "the model kept repeating the same tool calls",
    "repeated_tool_failure": "a tool kept failing the same way",
    "chanting_identical_sentences": "the model kept repeating the same text",
}


def describe_loop(loop_type: str) -> str:
    """``the model kept making the same tool call``: a loop type as people read it."""
    return _LOOP_WORDS.get(loop_type, "the model kept repeating itself")


class LoopInfo(Value):
    loop_type: str  # a key of _LOOP_WORDS
    detail: str


class LoopDetector:
    def __init__(self) -> None:
        self.reset()

    def reset(self) -> None:
        self._last_call_key: str | None = None
        self._repeat_count = 0
        self._recent: deque[tuple[str, str]] = deque(maxlen=MAX_CYCLE_LENGTH * CYCLE_REPEATS)
        self._failures: Counter[tuple[str, str]] = Counter()
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
        self._recent.append((key, call.name))
        if self._repeat_count >= TOOL_CALL_LOOP_THRESHOLD:
            return LoopInfo(
                "consecutive_identical_tool_calls",
                f"the model called {call.name} with the same arguments "
                f"{self._repeat_count} times in a row",
            )
        return self._cycle()

    def _cycle(self) -> LoopInfo | None:
        """The cycle of 2 to :data:`MAX_CYCLE_LENGTH` different calls the latest calls repeat
        :data:`CYCLE_REPEATS` times in a row, if any."""
        recent = list(self._recent)
        for length in range(2, MAX_CYCLE_LENGTH + 1):
            span = length * CYCLE_REPEATS
            if len(recent) < span:
                break
            window = recent[-span:]
            cycle = window[:length]
            if len({key for key, _ in cycle}) < 2:
                continue  # one call repeated: the consecutive count's case
            if all(window[i] == cycle[i % length] for i in range(span)):
                names = ", ".join(name for _, name in cycle)
                return LoopInfo(
                    "repeated_tool_call_cycle",
                    f"the model repeated the same {length} tool calls ({names}) "
                    f"{CYCLE_REPEATS} times over",
                )
        return None

    def check_tool_result(self, name: str, error: str | None) -> LoopInfo | None:
        """Note a tool call's result (``error``: its error text, ``None`` when it worked)."""
        if error is None:
            return None
        message = " ".join(error.split())[:MAX_ERROR_KEY_CHARS]
        key = (name, message)
        self._failures[key] += 1
        count = self._failures[key]
        if count < FAILURE_LOOP_THRESHOLD:
            return None
        shown = message if len(message) <= 120 else message[:119] + "…"
        return LoopInfo(
            "repeated_tool_failure",
            f"{name} failed {count} times in this turn with the same error: {shown}",
        )

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
