"""What a computation read from the file system, as stamps: an answer computed from files is
kept while every file it read is the same file, unchanged.

A stamp is a path's ``stat`` identity (links followed): its mode, device, inode, size,
modification and change times in nanoseconds, or ``None`` for a path that is not there, so a
file that appears is a change too. :class:`Inputs` records them (with the folders a file sits
in, whose times move when an entry is added, removed or renamed); :class:`StampedCache` keeps
an answer with its inputs and gives it again only while every stamp is still the one recorded.

Timestamps are coarse (a kernel tick, a second on some file systems), so a file written twice
within one tick can keep its stamp. An answer whose inputs changed within :data:`RACY_NS` of the
moment it was computed is therefore not kept (git's "racily clean" entries): the next call
computes it again, and an edit is seen at once. A file's change time cannot be set back by a
program (``touch -d`` moves it forward), so a restored modification time does not hide an edit.
"""

from __future__ import annotations

import os
import stat
import threading
import time
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["MAX_INPUTS", "RACY_NS", "Inputs", "Stamp", "StampedCache", "stamp"]

RACY_NS = 2_000_000_000  # an input changed this close to a reading may change again unseen
MAX_INPUTS = 5000  # paths stamped for one answer; an answer reading more is not kept
MAX_ENTRIES = 16  # answers a cache keeps (one per project and environment)

Stamp = tuple[int, int, int, int, int, int] | None
_V = TypeVar("_V")


def stamp(path: str) -> Stamp:
    """``path``'s identity now (links followed), ``None`` when it cannot be reached."""
    try:
        info = os.stat(path)
    except (OSError, ValueError):
        return None
    return (
        info.st_mode,
        info.st_dev,
        info.st_ino,
        info.st_size,
        info.st_mtime_ns,
        info.st_ctime_ns,
    )


def _leads_to(path: str) -> str:
    """Where ``path`` leads through links; "" for a path no file can have (a NUL byte)."""
    try:
        return os.path.realpath(path)
    except (OSError, ValueError):
        return ""


class Inputs:
    """The paths one answer was computed from and what each was when it was read."""

    def __init__(self, limit: int = MAX_INPUTS, *, parents: bool = True) -> None:
        """``parents``: stamp the folders a missing path would appear in (needed when the
        stamps are taken after the reading, to see a file that came and went during it)."""
        self.limit = limit
        self.parents = parents
        self.over = False  # more paths than ``limit``: the answer is not kept
        self._stamps: dict[str, Stamp] = {}
        self._links: dict[str, str] = {}  # path -> where it leads (for a decision on that)
        self._variables: dict[str, str | None] = {}  # environment variable -> its value

    def file(self, path: str) -> Stamp:
        """``path`` and the folders it sits in, up to the first one that exists (where it
        would appear)."""
        found = self._add(path)
        parent = os.path.dirname(path)
        while self.parents and parent and parent != path:
            if self._add(parent) is not None:
                break
            path, parent = parent, os.path.dirname(parent)
        return found

    def tree(self, path: str, depth: int) -> None:
        """``path`` and every entry under it, ``depth`` folder levels down (links followed)."""
        found = self.file(path)
        if found is None or depth < 0 or not stat.S_ISDIR(found[0]):
            return
        try:
            names = sorted(os.listdir(path))
        except OSError:
            return
        for name in names:
            if self.over:
                return
            if name.startswith("."):
                continue  # hidden: no reader looks at it
            child = os.path.join(path, name)
            found = self._add(child)
            if found is not None and stat.S_ISDIR(found[0]):
                self.tree(child, depth - 1)

    def folder(self, path: str) -> None:
        """A folder whose names were read: the folder (its times move when an entry is added,
        removed or renamed) and each link in it (where a link leads decides whether it is a
        folder)."""
        if self.file(path) is None:
            return
        try:
            with os.scandir(path) as entries:
                links = [entry.path for entry in entries if entry.is_symlink()]
        except OSError:
            return
        for link in links:
            self._add(link)

    def resolved(self, path: str) -> str:
        """Where ``path`` leads through links; a later call that leads elsewhere is a change."""
        real = self._links[path] = _leads_to(path)
        return real

    def variable(self, name: str) -> None:
        """The environment variable ``name`` (set or not) is an input too."""
        self._variables[name] = os.environ.get(name)

    def unchanged(self) -> bool:
        """Is every input still what it was when recorded?"""
        return (
            all(os.environ.get(name) == was for name, was in self._variables.items())
            and all(stamp(path) == was for path, was in self._stamps.items())
            and all(_leads_to(path) == real for path, real in self._links.items())
        )

    def settled(self, since_ns: int) -> bool:
        """No input changed within :data:`RACY_NS` of ``since_ns``: a stamp will show the
        next change."""
        newest = max((max(s[4], s[5]) for s in self._stamps.values() if s), default=0)
        return newest < since_ns - RACY_NS

    def stamps(self) -> tuple[tuple[str, Stamp], ...]:
        return tuple(self._stamps.items())

    def _add(self, path: str) -> Stamp:
        if path in self._stamps:
            return self._stamps[path]
        if len(self._stamps) >= self.limit:
            self.over = True
            return None
        found = self._stamps[path] = stamp(path)
        return found


class StampedCache(Generic[_V]):
    """Answers by key, each kept with the :class:`Inputs` it was computed from; safe to use
    from several threads. ``clock``: the time (ns) files' stamps are compared with."""

    def __init__(self, clock: Callable[[], int] = time.time_ns) -> None:
        self.clock = clock
        self.hits = 0
        self.misses = 0
        self._entries: dict[Hashable, tuple[_V, Inputs]] = {}
        self._lock = threading.Lock()

    def get(
        self, key: Hashable, compute: Callable[[], _V], inputs: Callable[[_V], Inputs]
    ) -> _V:
        """The answer for ``key``: the one kept if its inputs are unchanged, else
        ``compute()``, kept when ``inputs(answer)`` (read after computing it) settled."""
        with self._lock:
            kept = self._entries.get(key)
        if kept is not None and kept[1].unchanged():
            with self._lock:
                self.hits += 1
            return kept[0]
        started = self.clock()
        value = compute()
        read = inputs(value)
        with self._lock:
            self.misses += 1
            self._entries.pop(key, None)
            if not read.over and read.settled(started):
                while len(self._entries) >= MAX_ENTRIES:
                    self._entries.pop(next(iter(self._entries)))
                self._entries[key] = (value, read)
        return value

    def kept(self, key: Hashable) -> bool:
        """Would :meth:`get` give the kept answer for ``key`` without computing it?"""
        with self._lock:
            found = self._entries.get(key)
        return found is not None and found[1].unchanged()

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
