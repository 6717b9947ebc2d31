"""The store's warm-up: the memory indexed in a thread before it is needed, and what may answer
Recall meanwhile.

The store is not thread-safe: until the warm-up is over nothing else may use it. With files,
a turn waits for it (a saved index loads in a fraction of a second). A backend that can search
by itself (PostgreSQL: :mod:`~cairn.memory.store.postgres.search`) answers Recall's fast phase
meanwhile, so a fresh machine's first prompt never waits for its pull and index build: only,
at most Recall's 100 ms, for that search to be ready (its tokenizer loaded, its connection
open), which the warm-up does first. On a machine that holds nothing of the memory yet (an
empty mirror), indexing then waits for the first prompt's search to be answered: the two
share one interpreter, and indexing 10,000 memories would slow that search past Recall's bound.
"""

from __future__ import annotations

import asyncio
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from cairn.memory.store.backend import MemoryBackend, WarmUpSearch
    from cairn.memory.store.memory_store import MemoryStore, ScanReport

__all__ = ["HOLD_SECONDS", "WarmUp"]

HOLD_SECONDS = 30.0  # the longest an empty mirror's indexing waits for the first prompt


class WarmUp:
    """One store's warm-up (see the module docstring); its methods run on the event loop."""

    def __init__(self, store: MemoryStore, backend: MemoryBackend) -> None:
        self._store = store
        self._backend = backend
        self._task: asyncio.Future[ScanReport] | None = None
        self._prepared: asyncio.Future[bool] | None = None  # the search ready (or not)
        self._hold = False  # an empty mirror: indexing waits for the first search
        self._go = asyncio.Event()  # ... which sets this (or anyone who needs the index)
        self._holding = False

    def start(self, *, search: bool) -> asyncio.Future[ScanReport]:
        """Index in a thread (once); with ``search``, get the backend's search ready first
        (a fraction of a second, which indexing would slow down: they share one interpreter)
        and, on a machine that holds nothing yet, index only once the first prompt's search
        has been answered, or someone needs the index, or after :data:`HOLD_SECONDS`."""
        if self._task is None:
            found = self._backend.warm_up_search() if search else None
            if found is not None:
                self._prepared = asyncio.ensure_future(asyncio.to_thread(found.prepare))
                self._hold = found.cold
            self._task = asyncio.ensure_future(self._warm())
        return self._task

    async def _warm(self) -> ScanReport:
        if self._prepared is not None and await self._prepared and self._hold:
            self._holding = True
            try:
                async with asyncio.timeout(HOLD_SECONDS):
                    await self._go.wait()
            except TimeoutError:
                pass
            finally:
                self._holding = False
        return await asyncio.to_thread(self._store.warm)

    def searched(self) -> None:
        """Recall has had its answer from the backend's search: indexing may begin."""
        self._go.set()

    async def search_ready(self, timeout: float) -> None:
        """Until the backend's search is ready (its connection open), at most ``timeout`` s:
        a fresh machine's first prompt waits this long at most before Recall starts."""
        prepared = self._prepared
        if prepared is not None and not prepared.done() and self.running:
            await asyncio.wait({prepared}, timeout=timeout)

    @property
    def running(self) -> bool:
        """The warm-up runs (or waits to) now: the store must not be touched."""
        return self._task is not None and not self._task.done()

    @property
    def search(self) -> WarmUpSearch | None:
        """What answers Recall now instead of the store: the backend's search while the
        warm-up runs, when it has one."""
        return self._backend.warm_up_search() if self.running else None

    async def wait(self) -> None:
        """Until a running warm-up has ended, starting it now if it waits for a search (never
        cancelled: a thread cannot be stopped)."""
        self._go.set()
        task = self._task
        if task is not None and not task.done():
            await asyncio.wait({task})

    def stop(self) -> None:
        """At shutdown: a warm-up that has not begun indexing never will."""
        if self._holding and self._task is not None:
            self._task.cancel()
