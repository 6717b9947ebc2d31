"""The cheap check of a saved index against its root: the folders' stat, not every file's.

``cairn memory search``, ``show`` and ``forget`` trust the saved index and check what they serve
(each memory they print or remove is ``stat``-ed just before: see
:meth:`~cairn.memory.store.shard.Shard.served`). What they must still see is a file added,
removed, renamed or replaced (written to a temp file and renamed over, as editors and cairn
write): each of those changes its folder's modification and change times. So a folder whose
stat key is the one kept in ``<scope>.dirs`` (beside the index) holds the names, and the
inodes, it held then; only a folder whose key moved is listed again (``os.scandir``: names and
inodes without a ``stat`` a file), and only its entries whose inode differs from the saved
record's, or that are new, are ``stat``-ed and read. An edit in place of a memory the command
does not serve is not seen (its folder does not change): the next full check (a session's
start-up, ``cairn memory list`` as it goes, ``cairn memory reindex``) sees it.

The file says, as ``<scope>.seen`` does for ``find``'s check (:mod:`~cairn.memory.store.seen`):
the records of the index loaded from snapshot ``generation`` with its first ``entries`` journal
entries, with the memories in ``changed`` read again, matched each folder's entries when the
folder had the key kept for it. A later check of an index loaded from the same snapshot with at
least as many entries re-``stat``-s the memories in ``changed`` and in the journal's later
entries (and symlinked memories, always); anything else (another snapshot, no file, a damaged
one) lists every folder once (the names and inodes of 100,000 memories: about a tenth of a
second), after which the file is written again. A folder modified within the last
:data:`_SETTLE_NS` is not kept (a change in the same tick of the file system's clock would
leave its times as they were): the next check lists it again. The file is a cache: losing it
costs one listing of every folder.
"""

from __future__ import annotations

import os
import stat
import time
from collections.abc import Iterable, Mapping
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.memory.paths import INDEX_FILE_NAME
from cairn.memory.store.check_file import read_check_file, write_check_file
from cairn.memory.store.scan import stat_key
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.memory.store.records import RecordTable, StatKey

__all__ = [
    "FolderScan", "Folders", "compare_folders", "read_folders", "scan_folders", "usable_folders",
    "write_folders",
]  # fmt: skip

_MAGIC = b"cairn-recall-dirs\n"
_SETTLE_NS = 2_000_000_000  # a folder changed this recently is listed again by the next check
_MEMORY_SUFFIX = ".md"
_SYMLINK_INODE = -1  # a symlinked memory: its record holds its target's stat, always re-stat-ed


class Folders(Value):
    root: str
    generation: str  # the snapshot the records were loaded from ...
    entries: int  # ... with this many of its journal's entries
    changed: frozenset[str]  # memories whose record may differ from the index so loaded
    keys: dict[str, StatKey]  # folder ("" the root, "feedback", ...) -> its stat key then


class FolderScan(Value, frozen=False):
    """What :func:`scan_folders` found."""

    keys: dict[str, StatKey] = field(default_factory=dict)  # each folder reached, stat first
    listed: dict[str, dict[str, int]] = field(default_factory=dict)  # listed folder -> its
    # memory files (relative path -> inode, -1 for a symlink)
    warnings: list[str] = field(default_factory=list)  # one per unreadable folder
    started_ns: int = 0  # the clock before the first folder's stat


def _path(cache_path: Path) -> Path:
    return cache_path.with_suffix(".dirs")


def read_folders(cache_path: Path, root: str) -> Folders | None:
    """The file beside ``cache_path``, or None when there is none or it is not usable."""
    kept = read_check_file(_path(cache_path), _MAGIC, root)
    if kept is None or not isinstance(kept.payload, dict):
        return None
    return Folders(root, kept.generation, kept.entries, kept.changed, kept.payload)


def usable_folders(cache_path: Path, root: str, base: tuple[str, int] | None) -> Folders | None:
    """The file beside ``cache_path`` when it was written on the index these records were
    loaded from (``base``: its snapshot, and no more journal entries than were replayed)."""
    kept = read_folders(cache_path, root)
    if kept is None or base is None or kept.generation != base[0] or base[1] < kept.entries:
        return None
    return kept


def write_folders(
    cache_path: Path, root: str, generation: str, entries: int, changed: Iterable[str],
    scan: FolderScan,
) -> None:  # fmt: skip
    """Replace the file beside ``cache_path`` (atomically; a failure only costs the next check
    a listing of every folder) with the settled folders of ``scan``."""
    settled = scan.started_ns - _SETTLE_NS
    keys = {folder: key for folder, key in scan.keys.items() if max(key[0], key[3]) < settled}
    write_check_file(_path(cache_path), _MAGIC, root, generation, entries, sorted(changed), keys)


def scan_folders(root: str, kept: Mapping[str, StatKey] | None) -> FolderScan:
    """Each folder under ``root`` (symlinked folders are not followed, dot-named ones skipped,
    as the full walk does) ``lstat``-ed, and listed unless its key is the one ``kept`` for it
    (then its subfolders are the kept ones under it)."""
    scan = FolderScan(started_ns=time.time_ns())
    children: dict[str, list[str]] = {}
    for folder in kept or ():
        if folder:
            children.setdefault(folder.rpartition("/")[0], []).append(folder)
    pending = [""]
    while pending:
        folder = pending.pop()
        path = f"{root}/{folder}" if folder else root
        try:
            info = os.lstat(path)
        except OSError:
            continue  # gone: its memories are dropped (not reached)
        if not stat.S_ISDIR(info.st_mode):
            continue
        key = stat_key(info)
        if kept is not None and kept.get(folder) == key:
            scan.keys[folder] = key
            pending += children.get(folder, ())
            continue
        try:
            with os.scandir(path) as entries:
                found = _entries(entries, f"{folder}/" if folder else "", pending)
        except OSError as error:
            scan.warnings.append(f"{path}: folder skipped (unreadable: {error.strerror or error})")
            continue
        scan.keys[folder] = key
        scan.listed[folder] = found
    return scan


def compare_folders(
    scan: FolderScan, kept: Folders | None, records: RecordTable
) -> tuple[list[str], set[str]]:
    """The records to drop (their file gone from a listed folder, or their folder gone) and
    the files to ``stat`` again (new in a listed folder, or another inode than their record's,
    or a symlink). Only the records under the folders listed or gone are looked at."""
    listed, reached = scan.listed, scan.keys
    gone = [] if kept is None else [folder for folder in kept.keys if folder not in reached]
    if not listed and not gone:
        return [], set()
    prefixes = tuple(f"{folder}/" for folder in (*listed, *gone) if folder)
    root = "" in listed  # (then the files directly in the root too)
    relatives = [relative for relative in records.relatives()
                 if relative.startswith(prefixes) or (root and "/" not in relative)]  # fmt: skip
    known = records.inodes(relatives)
    on_disk: dict[str, int] = {}
    for names in listed.values():
        on_disk.update(names)
    dropped = [
        relative
        for relative in known.keys() - on_disk.keys()
        if (folder := relative.rpartition("/")[0]) not in reached or folder in listed
    ]
    return dropped, {relative for relative, _ in on_disk.items() - known.items()}


def _entries(
    entries: Iterable[os.DirEntry[str]], prefix: str, pending: list[str]
) -> dict[str, int]:
    found: dict[str, int] = {}
    for entry in entries:
        name = entry.name
        if name[0] == ".":
            continue
        if entry.is_dir(follow_symlinks=False):
            pending.append(prefix + name)
        elif name.endswith(_MEMORY_SUFFIX) and name != INDEX_FILE_NAME:
            found[prefix + name] = _SYMLINK_INODE if entry.is_symlink() else entry.inode()
    return found
