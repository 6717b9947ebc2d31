"""Whether a process is still running, for tests that check nothing outlives what it belongs to."""

from __future__ import annotations

from cairn.testing.mcp import pid_alive

from .polling import eventually

__all__ = ["DEATH_DEADLINE_SECONDS", "pid_alive", "wait_until_dead"]

DEATH_DEADLINE_SECONDS = 10.0  # how long a killed process may take to disappear


def wait_until_dead(pid: int, seconds: float = DEATH_DEADLINE_SECONDS) -> bool:
    """Whether ``pid`` is gone within ``seconds`` (polled: a bound, not a timing assertion)."""
    return eventually(lambda: not pid_alive(pid), seconds)  # gone, or a zombie unreaped
