"""The stat walk of a memory root by GNU ``find`` in a child process, for a check against a
saved index.

:func:`~cairn.memory.store.scan.walk_root` stats every file from Python: at 100,000 files that
is about a second of CPU in the process that needs the answer (each ``os.stat_result`` is a
Python object), most of it holding the interpreter lock. ``find`` makes the same system calls in
C, on the other core, and prints one record per file; a check against the saved index then
compares that output with the output seen at the last check (:mod:`~cairn.memory.store.seen`)
as bytes, and only the records that differ are looked at from Python.

The records (``-printf``, NUL-terminated, in the C locale so that any file name's bytes are
matched and printed as they are): ``<inode> <size> <mtime> <ctime> <relative path>`` for what
:func:`~cairn.memory.store.scan.walk_root` would stat (a ``*.md`` name other than ``MEMORY.md``
that is not a folder or a symlink; names starting with a dot, and everything under them, are
pruned as the walk skips them), ``d <relative path>`` for a folder and ``l <relative path>`` for a
symlink (resolved from Python as the walk resolves them). The times are printed with nanoseconds
(``%T@``: seconds, a dot and ten digits), so a file edited in place within the same second and
to the same size still prints another record: the record is the stat key
``(mtime_ns, size, inode, ctime_ns)``.

Anything unusual means "walk from Python instead" (None): no GNU ``find`` (or one without
``-printf``), an error on its part (an unreadable folder, a file removed while it ran: the walk
words the warnings), a record that does not parse, a first record whose key is not the one
``os.lstat`` gives (a ``find`` that prints times another way), or a folder below the root's own
subfolders while the root is watched (its watch would start after ``find`` listed it).
"""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from typing import TYPE_CHECKING

from cairn.memory.store.scan import Walk, stat_key, walk_symlink

if TYPE_CHECKING:
    from cairn.memory.store.records import StatKey
    from cairn.memory.store.watch import TreeWatcher

__all__ = ["find_walk", "listing_keys", "listing_relative", "parse_record"]

FIND_PROGRAM = "find"
_FIND_ARGS = (
    "-mindepth", "1",
    "(", "-name", ".*", "-prune", ")",
    "-o", "(", "-type", "d", "-printf", r"d %P\0", ")",
    "-o", "(", "-type", "l", "-printf", r"l %P\0", ")",
    "-o", "(", "-name", "*.md", "!", "-name", "MEMORY.md", "-printf", r"%i %s %T@ %C@ %P\0", ")",
)  # fmt: skip
_READ_BYTES = 1 << 20
_NANOS = 10**9
_FRACTION_DIGITS = 10  # GNU find's %T@: nanoseconds and a trailing zero


def find_walk(
    root: str,
    watcher: TreeWatcher | None,
    lock: threading.Lock | None = None,
    running: list[int] | None = None,
) -> Walk | None:
    """The walk of ``root`` as ``find`` sees it, its plain files left as raw records in
    :attr:`Walk.listing` (symlinks resolved into ``keys``, ``infos`` and ``symlinks``); None
    when it cannot be trusted (see the module's docstring). While ``find`` runs its process id
    is in ``running``, which changes only under ``lock`` (so a caller may kill it holding that
    lock: it is reaped under it)."""
    watched = _watch_top(root, watcher) if watcher is not None else None
    output = _run_find(root, lock or threading.Lock(), [] if running is None else running)
    if output is None or not _first_record_checks(root, output):
        return None
    walk = Walk(listing=output)
    real_root: str | None = None
    for kind, relative in _typed_records(output):
        if kind == "d":
            if watched is not None and relative not in watched:
                return None  # watched only now: changes while find listed it would be missed
        else:
            real_root = real_root or os.path.realpath(root)
            walk_symlink(walk, os.path.join(root, relative), relative, real_root)
    walk.keys.update(
        (relative, stat_key(info)) for relative, info in walk.infos.items()
    )  # (symlinks only: the plain files stay in the listing)
    return walk


def _watch_top(root: str, watcher: TreeWatcher) -> set[str]:
    """Watch the root and its subfolders before ``find`` lists them (as the walk does before
    listing each folder); the subfolders watched."""
    watcher.watch(root, "")
    folders: set[str] = set()
    try:
        names = [name for name in os.listdir(root) if not name.startswith(".")]
    except OSError:
        return folders  # find fails on it too, and the walk words the warning
    for name in names:
        try:
            is_folder = stat.S_ISDIR(os.lstat(os.path.join(root, name)).st_mode)
        except OSError:
            continue
        if is_folder:
            watcher.watch(os.path.join(root, name), f"{name}/")
            folders.add(name)
    return folders


def _run_find(root: str, lock: threading.Lock, running: list[int]) -> bytes | None:
    """``find``'s output for ``root``, or None when it could not run or did not succeed."""
    read_end, write_end = os.pipe()
    try:
        null = os.devnull
        pid = os.posix_spawnp(
            FIND_PROGRAM,
            [FIND_PROGRAM, "-H", root, *_FIND_ARGS],
            {"LC_ALL": "C", "PATH": os.environ.get("PATH", os.defpath)},
            file_actions=[
                (os.POSIX_SPAWN_DUP2, write_end, 1),
                (os.POSIX_SPAWN_OPEN, 0, null, os.O_RDONLY, 0),
                (os.POSIX_SPAWN_OPEN, 2, null, os.O_WRONLY, 0),
            ],
        )
    except (OSError, ValueError, AttributeError):  # no find, or no posix_spawn here
        os.close(read_end)
        os.close(write_end)
        return None
    os.close(write_end)
    with lock:
        running.append(pid)
    chunks: list[bytes] = []
    try:
        while chunk := os.read(read_end, _READ_BYTES):
            chunks.append(chunk)
    except OSError:
        chunks = []
    finally:
        os.close(read_end)
        with lock:  # (never left behind: read to its end, or killed, then reaped)
            _, status = os.waitpid(pid, 0)
            running.remove(pid)
    if not os.WIFEXITED(status) or os.WEXITSTATUS(status) != 0:
        return None
    return b"".join(chunks)


def _typed_records(output: bytes) -> Iterator[tuple[str, str]]:
    """The folder ("d") and symlink ("l") records of ``output``, with their relative paths (a
    plain file's record starts with a digit, so ``\\0d `` and ``\\0l `` start only these)."""
    data = b"\0" + output
    for kind in ("d", "l"):
        marker = f"\0{kind} ".encode()
        at = data.find(marker)
        while at >= 0:
            end = data.index(b"\0", at + len(marker))
            yield kind, os.fsdecode(data[at + len(marker) : end])
            at = data.find(marker, end)


def _nanoseconds(text: bytes) -> int:
    seconds, dot, fraction = text.partition(b".")
    if not (dot and seconds.isdigit() and fraction.isdigit()):
        raise ValueError(text)
    if len(fraction) != _FRACTION_DIGITS or fraction[-1:] != b"0":
        raise ValueError(text)
    return int(seconds) * _NANOS + int(fraction[:-1])


def listing_relative(record: bytes) -> str | None:
    """The relative path of one plain file's record; None for a folder's or a symlink's."""
    if not record[:1].isdigit():
        return None
    return os.fsdecode(record.split(b" ", 4)[4])


def parse_record(record: bytes) -> tuple[str, StatKey]:
    """A plain file's record as (relative path, stat key); ValueError when it does not parse."""
    inode, size, mtime, ctime, relative = record.split(b" ", 4)
    key = (_nanoseconds(mtime), int(size), int(inode), _nanoseconds(ctime))
    return os.fsdecode(relative), key


def listing_keys(listing: bytes) -> dict[str, StatKey] | None:
    """Relative path -> stat key of every plain file's record; None when one does not parse."""
    try:
        return dict(parse_record(record) for record in listing.split(b"\0") if record[:1].isdigit())
    except (ValueError, TypeError):
        return None


def _first_record_checks(root: str, output: bytes) -> bool:
    """Whether the first plain file's record is what ``os.lstat`` says of it (this ``find``
    prints the stat key as this module reads it)."""
    at = 0
    while at < len(output):
        end = output.find(b"\0", at)
        if end < 0:
            return False  # not NUL-terminated: not the records asked for
        record = output[at:end]
        if record[:1].isdigit():
            try:
                relative, key = parse_record(record)
                return stat_key(os.lstat(os.path.join(root, relative))) == key
            except (ValueError, OSError):
                return False
        at = end + 1
    return True  # no plain file: nothing to misread
