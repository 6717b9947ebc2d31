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

At shutdown (:meth:`WarmUp.stop`) a warm-up that has not begun indexing never will: one still
getting the search ready (its connection, in a thread nothing waits for) or holding for the
first prompt is cancelled, and one whose pull waits for the mirror's lock (another writer holds
it) or for its connection to the database gives up at once. An indexing under way (a first
scan: no saved index) is given up too, between two files or while it waits for a worker
process, and nothing of it is saved: an index is saved whole or not at all. A pull that has
begun is never cut short (the mirror is never left half-pulled). The next process catches up
what was left, and builds the index while its user types. A warm-up that finished before
shutdown has saved its index: the next process starts warm.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.memory.store.bulk import IndexingStopped

if TYPE_CHECKING:
    from cairn.memory.store.backend import MemoryBackend, WarmUpSearch
    from cairn.memory.store.memory_store import MemoryStore, ScanReport

__all__ = ["HOLD_SECONDS", "WarmUp"]

HOLD_SECONDS = 30.0  # the longest an empty mirror's indexing waits for the first prompt
_log = get_logger("MEMORY")


class WarmUp:
    """One store's warm-up (see the module docstring); its methods run on the event loop."""

    def __init__(self, store: MemoryStore, backend: MemoryBackend) -> None:
        self._store = store
        self._backend = backend
        # None once stopped before indexing (nothing was indexed, so nothing is saved)
        self._task: asyncio.Future[ScanReport | None] | None = None
        self._prepared: asyncio.Future[bool] | None = None  # the search ready (or not)
        self._hold = False  # an empty mirror: indexing waits for the first search
        self._go = asyncio.Event()  # ... which sets this (or anyone who needs the index)
        self._indexing = False  # the thread that pulls and indexes has begun
        self._stopped = threading.Event()  # shutdown: no indexing begins

    def start(self, *, search: bool) -> asyncio.Future[ScanReport | None]:
        """Index in a thread (once); with ``search``, get the backend's search ready first
        (a fraction of a second, which indexing would slow down: they share one interpreter)
        and, on a machine that holds nothing yet, index only once the first prompt's search
        has been answered, or someone needs the index, or after :data:`HOLD_SECONDS`."""
        if self._task is None:
            found = self._backend.warm_up_search() if search else None
            if found is not None:
                self._prepared = _in_own_thread(found.prepare)
                self._hold = found.cold
            self._task = asyncio.ensure_future(self._warm())
        return self._task

    async def _warm(self) -> ScanReport | None:
        if self._prepared is not None and await self._prepared and self._hold:
            try:
                async with asyncio.timeout(HOLD_SECONDS):
                    await self._go.wait()
            except TimeoutError:
                pass
        self._indexing = True  # from here stop() lets the thread end by itself
        return await asyncio.to_thread(self._index)

    def _index(self) -> ScanReport | None:
        """The catch-up pull (which gives up waiting for the mirror's lock or its connection
        when stopped), then the index, given up when stopped meanwhile (None: nothing indexed,
        nothing to save)."""
        try:
            self._backend.ensure_pulled()  # (else the store's refresh does it)
        except Exception as error:  # as the refresh would: the files as they are, then
            _log.warning(f"memory catch-up before indexing failed: {error!r}")
        if self._stopped.is_set():
            return None
        try:
            return self._store.warm(stop=self._stopped)
        except IndexingStopped:
            _log.debug("memory indexing given up: the process is closing")
            return None

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
        """At shutdown: a warm-up that has not begun indexing never will, and one indexing
        gives up (see the module docstring). What is left to wait for afterwards is a pull
        under way, or a moment for the indexing thread to notice."""
        self._stopped.set()
        self._backend.interrupt()  # a pull waiting for the mirror's lock gives up
        task = self._task
        if task is not None and not task.done() and not self._indexing:
            task.cancel()  # preparing its search, or holding for the first prompt's


def _in_own_thread(call: Callable[[], bool]) -> asyncio.Future[bool]:
    """``call()`` (which never raises) in a daemon thread of its own, as a future of the
    running loop: a stopped warm-up leaves it behind, and neither the loop's shutdown nor the
    process's exit waits for it (opening a connection to a database that does not answer takes
    the connect timeout)."""
    loop = asyncio.get_running_loop()
    future: asyncio.Future[bool] = loop.create_future()

    def settle(result: bool) -> None:
        if not future.done():  # (cancelled by stop())
            future.set_result(result)

    def run() -> None:
        result = call()
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits any more
            loop.call_soon_threadsafe(settle, result)

    threading.Thread(target=run, name="cairn-memory-search", daemon=True).start()
    return future
