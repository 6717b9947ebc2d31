"""Whether work awaited on the event loop let the loop's other tasks run (it did not block it)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import TypeVar

T = TypeVar("T")


async def run_counting_other_tasks(work: Awaitable[T]) -> tuple[T, int]:
    """``work``'s result, and how many times another task of the loop ran while it was awaited
    (0: it held the loop the whole time)."""
    ticks = 0

    async def tick() -> None:
        nonlocal ticks
        while True:
            ticks += 1
            await asyncio.sleep(0)

    ticker = asyncio.create_task(tick())
    await asyncio.sleep(0)  # the ticker is running
    before = ticks
    try:
        result = await work
    finally:
        ticker.cancel()
    return result, ticks - before
