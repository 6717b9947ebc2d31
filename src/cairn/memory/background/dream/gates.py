"""Dream's gates: whether an automatic Dream may start now.

:func:`auto_dream_gate` checks them in the reference's order: disabled, memory pressure, same
session as the last Dream, under 24 h since it, a session scan in the last 10 minutes, fewer than
5 new session recordings since it. The lock and "already running" gates come last, when the run
tries to start (:func:`consolidation_lock`).
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from cairn.memory.background.meta import last_dream_at, read_meta
from cairn.memory.background.pressure import under_memory_pressure
from cairn.memory.background.tasks import MemoryRuntime, MemorySpace
from cairn.memory.store.backend import DreamLock

__all__ = [
    "DREAM_MIN_HOURS",
    "DREAM_MIN_SESSIONS",
    "SESSION_FILE",
    "SESSION_SCAN_INTERVAL_SECONDS",
    "ScanClock",
    "auto_dream_gate",
    "consolidation_lock",
    "count_new_sessions",
]

DREAM_MIN_HOURS = 24.0  # hours between automatic Dreams
DREAM_MIN_SESSIONS = 5  # new session recordings needed since the last Dream
SESSION_SCAN_INTERVAL_SECONDS = 600.0  # at most one chats-folder scan per 10 minutes
SESSION_FILE = re.compile(r"^[0-9a-fA-F-]{32,36}\.jsonl$")  # recordings that count as sessions


@dataclass
class ScanClock:
    """When this process last scanned a project's recordings (the 10-minute throttle)."""

    last_scan_at: float | None = None


def count_new_sessions(chats_dir: Path, *, since: float, exclude_session: str) -> int:
    """Session recordings modified after ``since``, other than ``exclude_session``'s."""
    excluded = f"{exclude_session}.jsonl"
    count = 0
    try:
        entries = list(os.scandir(chats_dir))
    except OSError:
        return 0
    for entry in entries:
        if entry.name == excluded or not SESSION_FILE.match(entry.name):
            continue
        try:
            if entry.is_file() and entry.stat().st_mtime > since:
                count += 1
        except OSError:
            continue
    return count


def auto_dream_gate(
    *,
    runtime: MemoryRuntime,
    space: MemorySpace,
    session_id: str,
    scans: ScanClock,
) -> str | None:
    """Why an automatic Dream may not start now (``None``: it may).

    The lock and "already running" gates come after this, when the run tries to start.
    """
    settings = runtime.settings.memory
    if not settings.enable_managed_auto_dream:
        return "disabled"
    if under_memory_pressure(settings.min_available_memory_mb, space.available_memory):
        return "memory_pressure"
    now = space.clock()
    meta = read_meta(space.roots.state_dir, now=now)
    if meta.get("lastDreamSessionId") == session_id:
        return "same_session"
    last = last_dream_at(meta)
    if last is not None and now - last < DREAM_MIN_HOURS * 3600:
        return "min_hours"
    if scans.last_scan_at is not None and now - scans.last_scan_at < SESSION_SCAN_INTERVAL_SECONDS:
        return "scan_throttled"
    scans.last_scan_at = now
    found = count_new_sessions(runtime.chats_dir, since=last or 0.0, exclude_session=session_id)
    if found < DREAM_MIN_SESSIONS:
        return "min_sessions"
    return None


def consolidation_lock(space: MemorySpace) -> DreamLock:
    """Dream's cross-process lock: ``consolidation.lock`` with files, an advisory lock with
    PostgreSQL."""
    return space.dream_lock()
