"""``extract-cursor.json``: how much of a session's history Extract has already processed.

``{"sessionId": ..., "processedOffset": <history entries>, "updatedAt": ...}`` in the project
state folder. The offset only decides *whether* a turn has new user messages to extract from;
the extraction agent always sees the recent conversation.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.fsutil import atomic_write_json
from cairn.memory.background.state_files import iso_time, read_state_object

__all__ = [
    "CURSOR_FILE_NAME",
    "ExtractCursor",
    "clamp_cursor",
    "read_cursor",
    "start_offset",
    "write_cursor",
]

CURSOR_FILE_NAME = "extract-cursor.json"


@dataclass(frozen=True)
class ExtractCursor:
    session_id: str | None = None
    processed_offset: int = 0

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> ExtractCursor:
        session = data.get("sessionId")
        offset = data.get("processedOffset")
        return cls(
            session_id=session if isinstance(session, str) else None,
            processed_offset=offset if isinstance(offset, int) and offset >= 0 else 0,
        )


def read_cursor(state_dir: Path, *, now: float) -> ExtractCursor:
    return ExtractCursor.from_json(read_state_object(state_dir / CURSOR_FILE_NAME, now=now))


def write_cursor(state_dir: Path, cursor: ExtractCursor, *, now: float) -> None:
    data: dict[str, Any] = {"updatedAt": iso_time(now)}
    if cursor.session_id is not None:
        data = {
            "sessionId": cursor.session_id,
            "processedOffset": cursor.processed_offset,
            **data,
        }
    atomic_write_json(state_dir / CURSOR_FILE_NAME, data)


def start_offset(cursor: ExtractCursor, session_id: str, history_length: int) -> int:
    """Where new messages start: the cursor's offset for the same session, else 0.

    A history shorter than the offset (compressed, cleared) starts over at 0.
    """
    if cursor.session_id != session_id:
        return 0
    if cursor.processed_offset > history_length:
        return 0
    return cursor.processed_offset


def clamp_cursor(state_dir: Path, session_id: str, history_length: int, *, now: float) -> bool:
    """After a conversation rewind to ``history_length`` entries: the cursor of that session
    moves back to the rewind point (never forward), so the turns typed next are extracted and
    the ones kept are not extracted again. True when the cursor file changed."""
    cursor = read_cursor(state_dir, now=now)
    if cursor.session_id != session_id or cursor.processed_offset <= history_length:
        return False
    write_cursor(state_dir, ExtractCursor(session_id, history_length), now=now)
    return True
