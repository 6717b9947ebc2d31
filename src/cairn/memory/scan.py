"""Finding the memory files of a root: the full stat walk and the single-file stat.

A memory file is a regular ``*.md`` file (or a symlink to one inside the root) anywhere under the
root, except the generated ``MEMORY.md`` and anything whose name starts with a dot (temp files of
atomic writes, a trash folder). Symlinked folders are never followed: one leading out of the root
gets a warning, one pointing inside it is already walked where it really is.
"""

from __future__ import annotations

import os
import stat
from dataclasses import dataclass, field

from cairn.memory.paths import INDEX_FILE_NAME
from cairn.memory.store_cache import StatKey
from cairn.memory.watch import TreeWatcher

__all__ = ["FileStat", "Walk", "is_memory_name", "stat_file", "walk_root"]

_MEMORY_SUFFIX = ".md"


@dataclass(frozen=True, slots=True)
class FileStat:
    key: StatKey
    symlink: bool
    info: os.stat_result  # of the file itself (symlinks followed when possible)


@dataclass
class Walk:
    files: dict[str, FileStat] = field(default_factory=dict)  # relative path -> stat
    warnings: list[str] = field(default_factory=list)  # one per skipped folder


def is_memory_name(name: str) -> bool:
    return name.endswith(_MEMORY_SUFFIX) and not name.startswith(".") and name != INDEX_FILE_NAME


def _key(info: os.stat_result) -> StatKey:
    return (info.st_mtime_ns, info.st_size, info.st_ino, info.st_ctime_ns)


def _inside(real_root: str, target: str) -> bool:
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


def _symlink_stat(path: str, link_info: os.stat_result) -> FileStat | None:
    """A symlinked file's stat (its target's); a dangling link keeps its own, to warn about."""
    try:
        info = os.stat(path)
    except OSError:
        return FileStat(_key(link_info), True, link_info)
    if not stat.S_ISREG(info.st_mode):
        return None
    return FileStat(_key(info), True, info)


def stat_file(root: str, relative: str) -> FileStat | None:
    """The stat of one file under ``root``; None when it is gone or not a memory file."""
    path = os.path.join(root, relative)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        return _symlink_stat(path, info)
    if not stat.S_ISREG(info.st_mode):
        return None
    return FileStat(_key(info), False, info)


def walk_root(root: str, watcher: TreeWatcher | None = None) -> Walk:
    """Stat every memory file under ``root``, watching each folder before listing it."""
    walk = Walk()
    real_root: str | None = None
    pending = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        if watcher is not None:
            watcher.watch(folder, prefix)
        try:
            with os.scandir(folder) as entries:
                for entry in entries:
                    name = entry.name
                    if name.startswith("."):
                        continue
                    if entry.is_dir(follow_symlinks=False):
                        pending.append((f"{prefix}{name}/", entry.path))
                    elif entry.is_symlink():
                        real_root = real_root or os.path.realpath(root)
                        _walk_symlink(walk, entry, prefix, real_root)
                    elif is_memory_name(name) and entry.is_file(follow_symlinks=False):
                        _add_file(walk, entry, prefix)
        except OSError as error:
            reason = error.strerror or str(error)
            walk.warnings.append(f"{folder}: folder skipped (unreadable: {reason})")
    return walk


def _add_file(walk: Walk, entry: os.DirEntry[str], prefix: str) -> None:
    try:
        info = entry.stat(follow_symlinks=False)
    except FileNotFoundError:
        return  # removed while we walked
    except OSError:
        info = os.stat_result((0,) * 10)  # an unreadable file still gets its one warning
    walk.files[prefix + entry.name] = FileStat(_key(info), False, info)


def _walk_symlink(walk: Walk, entry: os.DirEntry[str], prefix: str, real_root: str) -> None:
    if entry.is_dir(follow_symlinks=True):
        if not _inside(real_root, os.path.realpath(entry.path)):
            walk.warnings.append(
                f"{entry.path}: folder skipped (symlink leading out of the memory root)"
            )
        return
    if not is_memory_name(entry.name):
        return
    try:
        link_info = entry.stat(follow_symlinks=False)
    except OSError:
        return
    found = _symlink_stat(entry.path, link_info)
    if found is not None:
        walk.files[prefix + entry.name] = found
