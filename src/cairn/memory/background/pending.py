"""``extract-pending.json``: sessions whose extraction was cut short or failed, for the next one.

An extraction cancelled by a shutdown (``cairn -p`` skipping its wait, Ctrl+C, a timeout), or
one that failed (its agent stopped by loop protection, a request that failed), leaves its
session here; the next extraction scheduled in the project runs the pending one
first, from the session's recording, so what the user said is not lost. The file is
``{"sessions": ["<id>", ...], "updatedAt": ...}`` in the project state folder, newest last.
"""

from __future__ import annotations

import re
from pathlib import Path

from cairn.fsutil import atomic_write_json
from cairn.memory.background.state_files import iso_time, read_state_object

__all__ = [
    "MAX_PENDING_SESSIONS",
    "PENDING_FILE_NAME",
    "add_pending",
    "read_pending",
    "take_pending",
]

PENDING_FILE_NAME = "extract-pending.json"
MAX_PENDING_SESSIONS = 5  # the newest kept: an older cut-short extraction is given up
_SESSION_ID = re.compile(r"[A-Za-z0-9_-]{1,128}")  # names a recording in the chats folder


def read_pending(state_dir: Path, *, now: float) -> list[str]:
    sessions = read_state_object(state_dir / PENDING_FILE_NAME, now=now).get("sessions")
    if not isinstance(sessions, list):
        return []
    return [s for s in sessions if isinstance(s, str) and _SESSION_ID.fullmatch(s)]


def add_pending(state_dir: Path, session_id: str, *, now: float) -> None:
    """Note that ``session_id``'s extraction did not finish."""
    sessions = [s for s in read_pending(state_dir, now=now) if s != session_id]
    _write(state_dir, [*sessions, session_id][-MAX_PENDING_SESSIONS:], now=now)


def take_pending(state_dir: Path, *, besides: str, now: float) -> str | None:
    """The newest pending session other than ``besides``, removed from the file (its retry
    runs now; cut short again, it is added back)."""
    sessions = read_pending(state_dir, now=now)
    others = [s for s in sessions if s != besides]
    if not others:
        if sessions:  # ``besides`` is extracting its own history now
            _write(state_dir, [], now=now)
        return None
    _write(state_dir, others[:-1], now=now)
    return others[-1]


def _write(state_dir: Path, sessions: list[str], *, now: float) -> None:
    path = state_dir / PENDING_FILE_NAME
    if not sessions and not path.exists():
        return
    state_dir.mkdir(parents=True, exist_ok=True)
    atomic_write_json(path, {"sessions": sessions, "updatedAt": iso_time(now)})
