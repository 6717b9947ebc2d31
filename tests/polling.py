"""Waiting in a test: poll for the condition with a deadline, never sleep a fixed time and assert.

A fixed sleep is too short on a loaded machine (the test fails at random) and too long on an idle
one (the suite waits for nothing). A deadline is a bound, not a timing assertion: on an idle
machine the condition holds after a poll or two, under load it may take seconds.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable

__all__ = ["DEADLINE_SECONDS", "eventually", "eventually_async", "eventually_awaited"]

DEADLINE_SECONDS = 30.0  # how long a condition may take to hold on a loaded machine
_INTERVAL_SECONDS = 0.01


def eventually(check: Callable[[], bool], seconds: float = DEADLINE_SECONDS) -> bool:
    """Whether ``check()`` holds within ``seconds``; polled from a synchronous test."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(_INTERVAL_SECONDS)
    return True


async def eventually_async(check: Callable[[], bool], seconds: float = DEADLINE_SECONDS) -> bool:
    """Whether ``check()`` holds within ``seconds``; polled on the event loop, so the loop's other
    tasks run between checks."""
    deadline = time.monotonic() + seconds
    while not check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_INTERVAL_SECONDS)
    return True


async def eventually_awaited(
    check: Callable[[], Awaitable[bool]], seconds: float = DEADLINE_SECONDS
) -> bool:
    """Whether the awaited ``check()`` holds within ``seconds`` (a check that asks a server)."""
    deadline = time.monotonic() + seconds
    while not await check():
        if time.monotonic() > deadline:
            return False
        await asyncio.sleep(_INTERVAL_SECONDS * 5)
    return True
