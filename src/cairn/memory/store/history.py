"""The audit trail of a memory root: ``<root>/.history.jsonl``.

One JSON line per change cairn made to the root: when, which operation (``extract``, ``dream``,
``forget``, ``restore``, or ``remember`` when a session's own agent wrote memory), which files
(relative to the root) and which session. Each line is appended with a single ``os.write`` on an
``O_APPEND`` descriptor, so lines from concurrent processes never interleave. The dot name keeps
it out of every memory scan. The trail stays short: past :data:`MAX_HISTORY_BYTES` it is cut to
its newest :data:`KEEP_HISTORY_ENTRIES` lines (atomically; callers hold the root lock).
"""

from __future__ import annotations

import json
import os
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, TypeAlias

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes
from cairn.memory.background.state_files import iso_time, parse_iso_time
from cairn.memory.document import MemoryScope

__all__ = [
    "HISTORY_FILE_NAME",
    "KEEP_HISTORY_ENTRIES",
    "MAX_HISTORY_BYTES",
    "HistoryEntry",
    "HistoryOperation",
    "append_history",
    "read_history",
]

HISTORY_FILE_NAME = ".history.jsonl"
MAX_HISTORY_BYTES = 256 * 1024  # the trail is trimmed once it grows past this size
KEEP_HISTORY_ENTRIES = 500  # newest lines kept by a trim
MAX_FILES_PER_ENTRY = 100  # file names recorded per line (the count is always exact)

HistoryOperation: TypeAlias = Literal["extract", "dream", "forget", "restore", "remember"]
_log = get_logger("MEMORY")


@dataclass(frozen=True)
class HistoryEntry:
    time: float  # seconds since the epoch
    operation: str
    scope: MemoryScope
    files: list[str] = field(default_factory=list)  # relative to the root
    session_id: str = ""
    detail: str = ""  # e.g. "deleted 2, updated 1"
    file_count: int = 0

    def to_json(self) -> dict[str, Any]:
        data: dict[str, Any] = {
            "time": iso_time(self.time),
            "op": self.operation,
            "scope": self.scope,
            "files": self.files[:MAX_FILES_PER_ENTRY],
            "fileCount": max(self.file_count, len(self.files)),
        }
        if self.session_id:
            data["sessionId"] = self.session_id
        if self.detail:
            data["detail"] = self.detail
        return data

    @classmethod
    def from_json(cls, data: Any) -> HistoryEntry | None:
        if not isinstance(data, dict):
            return None
        when = parse_iso_time(data.get("time"))
        operation = data.get("op")
        scope = data.get("scope")
        files = data.get("files", [])
        if when is None or not isinstance(operation, str) or scope not in ("project", "user"):
            return None
        if not isinstance(files, list) or not all(isinstance(f, str) for f in files):
            return None
        count = data.get("fileCount")
        return cls(
            time=when,
            operation=operation,
            scope=scope,
            files=files,
            session_id=str(data.get("sessionId") or ""),
            detail=str(data.get("detail") or ""),
            file_count=count if isinstance(count, int) else len(files),
        )


def append_history(root: Path, entry: HistoryEntry) -> None:
    """Append one line (call with the root lock held; never raises)."""
    path = root / HISTORY_FILE_NAME
    try:
        line = (json.dumps(entry.to_json(), ensure_ascii=False) + "\n").encode("utf-8")
    except UnicodeEncodeError:  # a file name that is not UTF-8: kept as a JSON escape
        line = (json.dumps(entry.to_json()) + "\n").encode("ascii")
    try:
        root.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, line)
            size = os.fstat(fd).st_size
        finally:
            os.close(fd)
        if size > MAX_HISTORY_BYTES:
            _trim(path)
    except OSError as error:
        _log.warning(f"{path}: audit line not written ({error.strerror or error})")


def _trim(path: Path) -> None:
    lines = path.read_bytes().splitlines(keepends=True)
    atomic_write_bytes(path, b"".join(lines[-KEEP_HISTORY_ENTRIES:]))


def read_history(
    roots: Sequence[tuple[MemoryScope, Path]],
) -> tuple[list[HistoryEntry], list[str]]:
    """Every entry of the roots' trails, newest first, and one warning per unreadable line."""
    found: list[tuple[float, int, HistoryEntry]] = []
    warnings: list[str] = []
    for _scope, root in roots:
        path = root / HISTORY_FILE_NAME
        try:
            raw = path.read_bytes()
        except FileNotFoundError:
            continue
        except OSError as error:
            warnings.append(f"{path}: not readable ({error.strerror or error})")
            continue
        for number, line in enumerate(raw.splitlines(), start=1):
            if not line.strip():
                continue
            try:
                entry = HistoryEntry.from_json(json.loads(line.decode("utf-8")))
            except (UnicodeDecodeError, json.JSONDecodeError):
                entry = None
            if entry is None:
                warnings.append(f"{path}:{number}: skipped (not a valid audit line)")
            else:
                found.append((entry.time, len(found), entry))
    found.sort(key=lambda item: (item[0], item[1]), reverse=True)  # later lines first on ties
    return [entry for _, _, entry in found], warnings
