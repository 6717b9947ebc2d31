"""extract-cursor.json and where new messages start."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.memory.background.cursor import ExtractCursor, read_cursor, start_offset, write_cursor

T0 = 1_750_000_000.0


def test_a_cursor_round_trips_in_the_reference_shape(tmp_path: Path) -> None:
    write_cursor(tmp_path, ExtractCursor("s1", 12), now=T0)

    data = json.loads((tmp_path / "extract-cursor.json").read_text())
    assert data == {
        "sessionId": "s1", "processedOffset": 12, "updatedAt": "2025-06-15T15:06:40.000Z",
    }  # fmt: skip
    assert read_cursor(tmp_path, now=T0) == ExtractCursor("s1", 12)


def test_invalid_fields_read_as_a_fresh_cursor(tmp_path: Path) -> None:
    (tmp_path / "extract-cursor.json").write_text('{"sessionId": 3, "processedOffset": -1}')
    assert read_cursor(tmp_path, now=T0) == ExtractCursor(None, 0)


def test_the_same_session_continues_from_its_offset() -> None:
    assert start_offset(ExtractCursor("s1", 4), "s1", 10) == 4


def test_a_new_session_or_a_shorter_history_starts_at_zero() -> None:
    assert start_offset(ExtractCursor("s1", 4), "s2", 10) == 0
    assert start_offset(ExtractCursor("s1", 12), "s1", 10) == 0
