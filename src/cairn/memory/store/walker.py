"""The check of a saved index against its files, run beside the work that needs it.

A :class:`Walker` stat-walks a root in a thread of its own (``find`` in a child process, see
:mod:`~cairn.memory.store.find_walk`, when there is a saved index to compare with; the Python
walk otherwise) and then checks the saved posting lists; the shard that started it applies the
result (:meth:`~cairn.memory.store.shard.Shard.refresh`).
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.memory.store.find_walk import find_walk
from cairn.memory.store.scan import Walk, walk_root
from cairn.memory.store.seen import Seen, read_seen
from cairn.memory.store.watch import TreeWatcher

if TYPE_CHECKING:
    from cairn.memory.store.postings import PostingArea

__all__ = ["Walker"]


def _no_area() -> PostingArea | None:
    return None


class Walker:
    """A stat walk of a root in a thread of its own, and the check of the saved posting lists:
    the validation of a saved index that a provisional refresh does not wait for (the store
    itself is only touched by its caller). With a saved index to compare with (``seen_from``,
    its path), the walk is ``find``'s (the Python walk when it cannot be used), and what the
    last check saw is read beside it."""

    def __init__(
        self,
        root: str,
        watcher: TreeWatcher | None,
        area: Callable[[], PostingArea | None] = _no_area,
        seen_from: Path | None = None,
    ) -> None:
        self.root = root
        self.watcher = watcher
        self.area = area  # asked after the walk: the index may still be loading at its start
        self._seen_from = seen_from
        self.area_ok = True
        self.seen: Seen | None = None
        self._child: list[int] = []  # find's process id while it runs
        self._lock = threading.Lock()
        self._result: Walk | BaseException | None = None
        self._thread = threading.Thread(target=self._run, name="cairn-memory-walk", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        try:
            found = None
            if self._seen_from is not None:
                found = find_walk(self.root, self.watcher, self._lock, self._child)
                if found is not None:
                    self.seen = read_seen(self._seen_from, self.root)
            self._result = found or walk_root(self.root, self.watcher)
            area = self.area()
            self.area_ok = area is None or area.verify()
        except BaseException as error:  # handed to the caller by result()
            self._result = error

    def done(self) -> bool:
        return not self._thread.is_alive()

    def result(self) -> Walk:
        self._thread.join()
        if isinstance(self._result, BaseException):
            raise self._result
        assert self._result is not None
        return self._result
