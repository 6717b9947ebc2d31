"""Listing recorded sessions for ``--continue``, ``/resume`` and ACP ``session/list``.

Listing must stay fast with hundreds of long sessions, so it parses only a few records per file:
the first ones (start time, first prompt) and the lines that can hold a recap.
"""

from __future__ import annotations

import datetime as _dt
import os
import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.debug_log import get_logger
from cairn.recording.records import (
    AWAY_RECAP_ITEM,
    TITLE_SUBTYPE,
    is_typed_by_user,
    parse_records,
    parse_timestamp,
    recap_texts,
    user_display_text,
)

__all__ = [
    "FIRST_PROMPT_MAX_CHARS",
    "SESSION_FILE_PATTERN",
    "SessionInfo",
    "first_prompt",
    "latest_session",
    "list_sessions",
    "session_path",
]

SESSION_FILE_PATTERN = re.compile(r"^[0-9a-fA-F-]{32,36}\.jsonl$")  # a session file's name
FIRST_PROMPT_MAX_CHARS = 200  # length of the first prompt shown in a session list
MAX_SCANNED_FILES = 10_000  # session files looked at in one listing (safety cap)
FIRST_PROMPT_SCAN_RECORDS = 50  # records read from the start of a file to find the first prompt
_TYPE_KEY_WINDOW = 400  # bytes at the start of a line where the record's own "type" key sits
_COUNTED_TYPES = (b'"user"', b'"assistant"')
_TITLE_MARKER = b'"session_title"'

_log = get_logger("CHAT_RECORDING")


@dataclass(frozen=True)
class SessionInfo:
    session_id: str
    path: Path | None  # its file (None: the session lives in a database)
    start_time: _dt.datetime  # the first record's time (UTC)
    mtime: _dt.datetime  # when the file last changed (UTC)
    first_prompt: str  # the first thing the person typed, at most 200 characters
    last_recap: str | None  # the newest "where were we" recap kept in the session
    message_count: int  # user and assistant records
    title: str | None = None  # the newest title the session was given (session_title record)
    cwd: Path | None = None  # the folder the session ran in (its first record's ``cwd``)


def list_sessions(
    chats_dir: Path, *, limit: int = 50, cwd: Path | None = None
) -> list[SessionInfo]:
    """The sessions in ``chats_dir``, newest first; unreadable files are skipped with a warning.
    With ``cwd``, only the sessions that ran in that folder."""
    found: list[SessionInfo] = []
    for path, mtime in _session_files(chats_dir):
        if len(found) >= limit:
            break
        info = _read_info(path, mtime)
        if info is not None and (cwd is None or info.cwd == cwd):
            found.append(info)
    return found


def latest_session(chats_dir: Path) -> SessionInfo | None:
    sessions = list_sessions(chats_dir, limit=1)
    return sessions[0] if sessions else None


def session_path(chats_dir: Path, session_id: str) -> Path | None:
    """The recording of ``session_id`` in ``chats_dir``, or ``None`` when there is none (also
    for a string that is not a session id, so it can never name a file elsewhere)."""
    name = f"{session_id}.jsonl"
    if not SESSION_FILE_PATTERN.fullmatch(name):
        return None
    path = chats_dir / name
    return path if path.is_file() else None


def _session_files(chats_dir: Path) -> list[tuple[Path, float]]:
    files: list[tuple[Path, float]] = []
    try:
        entries = os.scandir(chats_dir)
    except OSError:
        return []
    with entries:
        for entry in entries:
            if len(files) >= MAX_SCANNED_FILES:
                break
            if not SESSION_FILE_PATTERN.match(entry.name):
                continue
            try:
                if entry.is_file():
                    files.append((Path(entry.path), entry.stat().st_mtime))
            except OSError:
                continue
    files.sort(key=lambda item: item[1], reverse=True)
    return files


def _read_info(path: Path, mtime: float) -> SessionInfo | None:
    try:
        data = path.read_bytes()
    except OSError as exc:
        _log.warning(f"session {path.name} skipped: {exc}")
        return None
    lines = [line for line in data.split(b"\n") if line.strip()]
    if not lines:
        return None  # created but nothing recorded yet: nothing to resume
    first, _ = parse_records(lines[0])
    if not first:
        _log.warning(f"session {path.name} skipped: its first record is unreadable")
        return None
    head, _ = parse_records(b"\n".join(lines[:FIRST_PROMPT_SCAN_RECORDS]))
    modified = _dt.datetime.fromtimestamp(mtime, _dt.UTC)
    return SessionInfo(
        session_id=path.stem,
        path=path,
        start_time=parse_timestamp(first[0].get("timestamp")) or modified,
        mtime=modified,
        first_prompt=_first_prompt(head),
        last_recap=_last_recap(lines),
        message_count=sum(1 for line in lines if _is_message_line(line)),
        title=_last_title(lines),
        cwd=_cwd(first[0]),
    )


def _cwd(record: dict[str, Any]) -> Path | None:
    cwd = record.get("cwd")
    return Path(cwd) if isinstance(cwd, str) and os.path.isabs(cwd) else None


def _first_prompt(records: list[dict[str, Any]]) -> str:
    for record in records:
        text = first_prompt(record)
        if text:
            return text
    return ""


def first_prompt(record: dict[str, Any]) -> str:
    """What a listing shows of ``record`` as a session's first prompt ("" when it is none)."""
    if not is_typed_by_user(record):
        return ""
    return _shorten(" ".join(user_display_text(record).split()))


def _shorten(text: str) -> str:
    if len(text) <= FIRST_PROMPT_MAX_CHARS:
        return text
    return text[: FIRST_PROMPT_MAX_CHARS - 3] + "..."


def _last_recap(lines: list[bytes]) -> str | None:
    marker = AWAY_RECAP_ITEM.encode()
    for line in reversed(lines):
        if marker not in line:
            continue  # cheap filter: only lines naming a recap are parsed
        records, _ = parse_records(line)
        texts = recap_texts(records[0]) if records else []
        if texts:
            return texts[-1]
    return None


def _last_title(lines: list[bytes]) -> str | None:
    for line in reversed(lines):
        if _TITLE_MARKER not in line:
            continue  # cheap filter, as for recaps
        records, _ = parse_records(line)
        payload = records[0].get("systemPayload") if records else None
        title = payload.get("title") if isinstance(payload, dict) else None
        if records and records[0].get("subtype") == TITLE_SUBTYPE and isinstance(title, str):
            return title
    return None


def _is_message_line(line: bytes) -> bool:
    # Counted without parsing: every writer puts the record's "type" before its message.
    start = line.find(b'"type":', 0, _TYPE_KEY_WINDOW)
    if start < 0:
        return False
    value = line[start + len(b'"type":') :].lstrip()
    return value.startswith(_COUNTED_TYPES)
