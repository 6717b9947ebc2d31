"""Kernel change notifications for a memory root (Linux inotify through ctypes).

A warm refresh must notice a file another process changed since the last turn, even when it was
edited in place (which leaves the folder's mtime alone). Stat-ing every file costs a system call
each (tens of milliseconds at 10,000 files on a small VM); inotify instead queues one event per
change in the kernel, by any process, before that process's write returns, so draining the queue
is a complete and nearly free list of what changed.

Where inotify is missing (macOS, Windows, exhausted watch limits) :func:`open_watcher` returns
None and the store falls back to a full stat walk on every refresh. Directory-level events (a
folder created, removed or moved; the root itself replaced; a queue overflow) also ask for a full
walk rather than guessing.
"""

from __future__ import annotations

import contextlib
import functools
import os
import struct
import sys
import weakref
from dataclasses import field
from typing import TYPE_CHECKING

from cairn.values import Value

if TYPE_CHECKING:
    import ctypes

__all__ = ["Changes", "TreeWatcher", "open_watcher"]

_IN_MODIFY = 0x00000002
_IN_ATTRIB = 0x00000004
_IN_CLOSE_WRITE = 0x00000008
_IN_MOVED_FROM = 0x00000040
_IN_MOVED_TO = 0x00000080
_IN_CREATE = 0x00000100
_IN_DELETE = 0x00000200
_IN_DELETE_SELF = 0x00000400
_IN_MOVE_SELF = 0x00000800
_IN_Q_OVERFLOW = 0x00004000
_IN_IGNORED = 0x00008000
_IN_ONLYDIR = 0x01000000
_IN_ISDIR = 0x40000000
_IN_NONBLOCK = os.O_NONBLOCK
_IN_CLOEXEC = 0o2000000  # O_CLOEXEC on Linux
_WATCH_MASK = (
    _IN_MODIFY | _IN_ATTRIB | _IN_CLOSE_WRITE | _IN_MOVED_FROM | _IN_MOVED_TO | _IN_CREATE
    | _IN_DELETE | _IN_DELETE_SELF | _IN_MOVE_SELF | _IN_ONLYDIR
)  # fmt: skip
_FOLDER_EVENTS = _IN_CREATE | _IN_DELETE | _IN_MOVED_FROM | _IN_MOVED_TO
_EVENT_HEADER = struct.Struct("iIII")  # wd, mask, cookie, name length
_READ_SIZE = 64 * 1024  # bytes read from the event queue per call


class Changes(Value, frozen=False):
    """What happened under a root since the last drain."""

    files: set[str] = field(default_factory=set)  # relative paths of files that changed
    rescan: bool = False  # something only a full walk can sort out


@functools.cache
def _libc() -> ctypes.CDLL | None:
    """The C library with the inotify calls, loaded when the first watcher opens.

    glibc's ``libc.so.6`` is tried by name first: ``ctypes.util.find_library`` runs
    ``ldconfig -p`` in a subprocess, which a store would otherwise pay for on every start.
    """
    if not sys.platform.startswith("linux"):
        return None
    import ctypes  # with the first watcher: a store with no memory folder never needs it

    try:
        try:
            libc = ctypes.CDLL("libc.so.6", use_errno=True)
        except OSError:  # not glibc (musl, ...)
            from ctypes.util import find_library

            libc = ctypes.CDLL(find_library("c"), use_errno=True)
        libc.inotify_init1.argtypes = [ctypes.c_int]
        libc.inotify_add_watch.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_uint32]
        return libc
    except (OSError, AttributeError):
        return None


class TreeWatcher:
    """One inotify instance watching the folders of one memory root."""

    def __init__(self, fd: int) -> None:
        self._fd = fd
        self._folders: dict[int, str] = {}  # watch descriptor -> folder prefix ("" or "user/")
        self._pending = Changes()
        self._closer = weakref.finalize(self, os.close, fd)

    def watch(self, folder: str, prefix: str) -> bool:
        """Watch ``folder`` (absolute), whose files are reported as ``prefix + name``."""
        libc = _libc()
        assert libc is not None
        wd = libc.inotify_add_watch(self._fd, os.fsencode(folder), _WATCH_MASK)
        if wd < 0:
            return False
        self._folders[wd] = prefix
        return True

    def forget_folders(self) -> None:
        """Before a full walk: folders are watched again as the walk meets them."""
        self._folders.clear()

    def drain(self) -> Changes:
        """Every change queued since the last drain (a full rescan when in doubt)."""
        while True:
            try:
                data = os.read(self._fd, _READ_SIZE)
            except BlockingIOError:
                break
            except OSError:
                self._pending.rescan = True
                break
            if not data:
                break
            self._parse(data)
        changes, self._pending = self._pending, Changes()
        return changes

    def _parse(self, data: bytes) -> None:
        offset = 0
        while offset + _EVENT_HEADER.size <= len(data):
            wd, mask, _cookie, length = _EVENT_HEADER.unpack_from(data, offset)
            start = offset + _EVENT_HEADER.size
            name = os.fsdecode(data[start : start + length].rstrip(b"\0"))
            offset = start + length
            self._note(wd, mask, name)

    def _note(self, wd: int, mask: int, name: str) -> None:
        if mask & _IN_Q_OVERFLOW or mask & (_IN_DELETE_SELF | _IN_MOVE_SELF):
            self._pending.rescan = True
            return
        if mask & _IN_IGNORED:
            self._folders.pop(wd, None)
            return
        prefix = self._folders.get(wd)
        if prefix is None:
            return  # a folder no longer watched; the walk that dropped it saw its files
        if mask & _IN_ISDIR:
            if mask & _FOLDER_EVENTS:
                self._pending.rescan = True
            return
        if name:
            self._pending.files.add(prefix + name)

    def close(self) -> None:
        self._closer()


def open_watcher() -> TreeWatcher | None:
    """A new watcher, or None where kernel notifications are unavailable."""
    libc = _libc()
    if libc is None:
        return None
    fd = libc.inotify_init1(_IN_NONBLOCK | _IN_CLOEXEC)
    if fd < 0:
        return None
    with contextlib.suppress(OSError):
        os.set_blocking(fd, False)
    return TreeWatcher(fd)
