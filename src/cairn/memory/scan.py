"""Finding the memory files of a root: the full stat walk and the single-file stat.

A memory file is a regular ``*.md`` file (or a symlink to one inside the root) anywhere under the
root, except the generated ``MEMORY.md`` and anything whose name starts with a dot (temp files of
atomic writes, a trash folder). Symlinked folders are never followed: one leading out of the root
gets a warning, one pointing inside it is already walked where it really is.

The walk stats every file (an in-place edit leaves its folder's mtime alone, so nothing cheaper
is complete); it keeps the per-file Python work small and does the system calls in one C-level
``map`` per walk.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass, field
from operator import attrgetter

from cairn.memory.paths import INDEX_FILE_NAME
from cairn.memory.store_cache import StatKey
from cairn.memory.watch import TreeWatcher

__all__ = ["Walk", "is_memory_name", "stat_file", "stat_key", "walk_root"]

_MEMORY_SUFFIX = ".md"
_UNREADABLE = os.stat_result((0,) * 10)  # stands in for a file that cannot be stat-ed

stat_key: Callable[[os.stat_result], StatKey] = attrgetter(
    "st_mtime_ns", "st_size", "st_ino", "st_ctime_ns"
)


@dataclass
class Walk:
    keys: dict[str, StatKey] = field(default_factory=dict)  # relative path -> stat key
    infos: dict[str, os.stat_result] = field(default_factory=dict)  # symlinks followed
    symlinks: set[str] = field(default_factory=set)  # symlinked files inside the root
    warnings: list[str] = field(default_factory=list)  # one per skipped folder


def is_memory_name(name: str) -> bool:
    return name.endswith(_MEMORY_SUFFIX) and not name.startswith(".") and name != INDEX_FILE_NAME


def _inside(real_root: str, target: str) -> bool:
    return target == real_root or target.startswith(real_root.rstrip(os.sep) + os.sep)


def _symlink_info(path: str) -> os.stat_result | None:
    """A symlinked file's stat (its target's); a dangling link keeps its own, to warn about."""
    try:
        info = os.stat(path)
    except OSError:
        try:
            return os.lstat(path)
        except OSError:
            return None
    return info if stat.S_ISREG(info.st_mode) else None


def stat_file(root: str, relative: str) -> tuple[os.stat_result, bool] | None:
    """The stat of one file under ``root`` and whether it is a symlink; None when not a memory."""
    path = os.path.join(root, relative)
    try:
        info = os.lstat(path)
    except OSError:
        return None
    if stat.S_ISLNK(info.st_mode):
        followed = _symlink_info(path)
        return None if followed is None else (followed, True)
    return (info, False) if stat.S_ISREG(info.st_mode) else None


def _safe_lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None  # removed while we walked
    except OSError:
        return _UNREADABLE  # still listed, so it gets its one "unreadable" warning


def walk_root(root: str, watcher: TreeWatcher | None = None) -> Walk:
    """Stat every memory file under ``root``, watching each folder before listing it."""
    walk = Walk()
    relatives: list[str] = []
    paths: list[str] = []
    real_root: str | None = None
    pending = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        if watcher is not None:
            watcher.watch(folder, prefix)
        try:
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError as error:
            reason = error.strerror or str(error)
            walk.warnings.append(f"{folder}: folder skipped (unreadable: {reason})")
            continue
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue
            # The common case first, in as few calls as possible: a regular *.md file.
            if name.endswith(_MEMORY_SUFFIX) and entry.is_file(follow_symlinks=False):
                if name != INDEX_FILE_NAME:
                    relatives.append(prefix + name)
                    paths.append(entry.path)
            elif entry.is_dir(follow_symlinks=False):
                pending.append((f"{prefix}{name}/", entry.path))
            elif entry.is_symlink():
                real_root = real_root or os.path.realpath(root)
                _walk_symlink(walk, entry, prefix, real_root)
    try:
        infos = list(map(os.lstat, paths))  # one C-level loop over the system calls
    except OSError:
        infos = list(map(_safe_lstat, paths))  # type: ignore[arg-type]
    for relative, info in zip(relatives, infos, strict=True):
        if info is not None:
            walk.infos[relative] = info
    walk.keys.update(zip(walk.infos, map(stat_key, walk.infos.values()), strict=True))
    return walk


def _walk_symlink(walk: Walk, entry: os.DirEntry[str], prefix: str, real_root: str) -> None:
    if entry.is_dir(follow_symlinks=True):
        if not _inside(real_root, os.path.realpath(entry.path)):
            walk.warnings.append(
                f"{entry.path}: folder skipped (symlink leading out of the memory root)"
            )
        return
    if not is_memory_name(entry.name):
        return
    info = _symlink_info(entry.path)
    if info is not None:
        relative = prefix + entry.name
        walk.infos[relative] = info
        walk.symlinks.add(relative)
