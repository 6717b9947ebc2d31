"""``meta.json``: when Extract and Dream last ran for a project, and what they touched.

The reference's ``AutoMemoryMetadata`` (``version: 1``), camelCase keys, pretty-printed with a
trailing newline, written atomically. Unknown keys are kept as they are.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any, Literal

from cairn.fsutil import atomic_write_json
from cairn.memory.background.state_files import iso_time, parse_iso_time, read_state_object

__all__ = [
    "META_FILE_NAME",
    "META_VERSION",
    "last_dream_at",
    "read_meta",
    "record_dream",
    "record_extraction",
    "write_meta",
]

META_FILE_NAME = "meta.json"
META_VERSION = 1

RunStatus = Literal["updated", "noop"]


def read_meta(state_dir: Path, *, now: float) -> dict[str, Any]:
    return read_state_object(state_dir / META_FILE_NAME, now=now)


def write_meta(state_dir: Path, meta: dict[str, Any], *, now: float) -> None:
    stamp = iso_time(now)
    data = {"version": META_VERSION, "createdAt": stamp, **meta, "updatedAt": stamp}
    atomic_write_json(state_dir / META_FILE_NAME, data)


def record_extraction(
    state_dir: Path, *, session_id: str, touched_topics: Sequence[str], now: float
) -> None:
    """Note a finished extraction (read, update, write: call with the project lock held)."""
    _record_run(state_dir, "Extraction", session_id, touched_topics, now)


def record_dream(
    state_dir: Path, *, session_id: str, touched_topics: Sequence[str], now: float
) -> None:
    """Note a finished Dream (call with the project lock held)."""
    _record_run(state_dir, "Dream", session_id, touched_topics, now, recentSessionIdsSinceDream=[])


def _record_run(
    state_dir: Path,
    run: str,
    session_id: str,
    touched_topics: Sequence[str],
    now: float,
    **more: Any,
) -> None:
    """Set ``last<run>At``, ``last<run>SessionId``, ``last<run>TouchedTopics`` and
    ``last<run>Status`` (``run``: ``Extraction`` or ``Dream``), and ``more``."""
    meta = read_meta(state_dir, now=now)
    meta[f"last{run}At"] = iso_time(now)
    meta[f"last{run}SessionId"] = session_id
    meta[f"last{run}TouchedTopics"] = list(touched_topics)
    meta[f"last{run}Status"] = _status(touched_topics)
    meta.update(more)
    write_meta(state_dir, meta, now=now)


def last_dream_at(meta: dict[str, Any]) -> float | None:
    """``lastDreamAt`` in seconds, or None when missing or unparsable."""
    return parse_iso_time(meta.get("lastDreamAt"))


def _status(touched_topics: Sequence[str]) -> RunStatus:
    return "updated" if touched_topics else "noop"
