"""Whether a process is still running, for tests that check nothing outlives what it belongs to."""

from __future__ import annotations

import time
from pathlib import Path

__all__ = ["DEATH_DEADLINE_SECONDS", "is_running", "wait_until_dead"]

DEATH_DEADLINE_SECONDS = 10.0  # how long a killed process may take to disappear


def is_running(pid: int) -> bool:
    """Alive and not a zombie (a killed orphan may wait for a reaper that never comes)."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def wait_until_dead(pid: int, seconds: float = DEATH_DEADLINE_SECONDS) -> bool:
    """Whether ``pid`` is gone within ``seconds`` (polled: a bound, not a timing assertion)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not is_running(pid):
            return True
        time.sleep(0.05)
    return False
