"""Finding the memory files of a root: the full stat walk and the single-file stat.

A memory file is a regular ``*.md`` file (or a symlink to one inside the root) anywhere under the
root, except the generated ``MEMORY.md`` and anything whose name starts with a dot (temp files of
atomic writes, a trash folder). Other entries named like memories (a FIFO, a device, a symlink to
one) are listed too, so the store warns about them instead of skipping them in silence; they are
never opened. Symlinked folders are never followed: one leading out of the root
gets a warning, one pointing inside it is already walked where it really is.

The walk stats every file (an in-place edit leaves its folder's mtime alone, so nothing cheaper
is complete); it keeps the per-file Python work small and does the system calls in one C-level
``map`` per folder.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import field
from operator import attrgetter
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.memory.paths import INDEX_FILE_NAME
from cairn.values import Value

if TYPE_CHECKING:
    from cairn.memory.store.records import StatKey
    from cairn.memory.store.watch import TreeWatcher

__all__ = [
    "Walk", "holds_memories", "is_memory_name", "list_names", "stat_file", "stat_key",
    "walk_root", "walk_symlink",
]  # fmt: skip

_MEMORY_SUFFIX = ".md"
_UNREADABLE = os.stat_result((stat.S_IFREG,) + (0,) * 9)  # a file that cannot be stat-ed
_FILE_TYPE = 0o170000  # the file-type bits of st_mode (stat.S_IFMT)

stat_key: Callable[[os.stat_result], StatKey] = attrgetter(
    "st_mtime_ns", "st_size", "st_ino", "st_ctime_ns"
)


class Walk(Value, frozen=False):
    keys: dict[str, StatKey] = field(default_factory=dict)  # relative path -> stat key
    infos: dict[str, os.stat_result] = field(default_factory=dict)  # symlinks followed
    symlinks: set[str] = field(default_factory=set)  # symlinked files inside the root
    warnings: list[str] = field(default_factory=list)  # one per skipped folder
    # find's records of the plain files (see find_walk), which are then not in keys and infos
    listing: bytes | None = None


def is_memory_name(name: str) -> bool:
    return name.endswith(_MEMORY_SUFFIX) and not name.startswith(".") and name != INDEX_FILE_NAME


def holds_memories(root: Path) -> bool:
    """Whether ``root`` holds any memory file (stops at the first one found)."""
    try:
        return any(path.name != INDEX_FILE_NAME for path in root.rglob("*.md"))
    except OSError:
        return False


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
    return None if stat.S_ISDIR(info.st_mode) else info


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
    return None if stat.S_ISDIR(info.st_mode) else (info, False)


def _safe_lstat(path: str) -> os.stat_result | None:
    try:
        return os.lstat(path)
    except FileNotFoundError:
        return None  # removed while we walked
    except OSError:
        return _UNREADABLE  # still listed, so it gets its one "unreadable" warning


def _lstat_all(paths: list[str]) -> list[os.stat_result | None]:
    try:
        return list(map(os.lstat, paths))  # one C-level loop over the system calls
    except OSError:
        return list(map(_safe_lstat, paths))  # something vanished or failed: one by one


def walk_root(root: str, watcher: TreeWatcher | None = None) -> Walk:
    """Stat every memory file under ``root``, watching each folder before listing it.

    Each folder is listed by name and every entry lstat-ed in one batch; the file mode then says
    file, folder or symlink (cheaper than a ``DirEntry`` per file, and the stat is needed anyway).
    """
    walk = Walk()
    real_root: str | None = None
    pending = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        if watcher is not None:
            watcher.watch(folder, prefix)
        try:
            names = [name for name in os.listdir(folder) if not name.startswith(".")]
        except OSError as error:
            reason = error.strerror or str(error)
            walk.warnings.append(f"{folder}: folder skipped (unreadable: {reason})")
            continue
        base = folder + os.sep
        for name, info in zip(names, _lstat_all([base + name for name in names]), strict=True):
            if info is None:
                continue
            kind = info.st_mode & _FILE_TYPE
            if kind == stat.S_IFDIR:
                pending.append((f"{prefix}{name}/", base + name))
            elif kind == stat.S_IFLNK:
                real_root = real_root or os.path.realpath(root)
                walk_symlink(walk, base + name, prefix + name, real_root)
            elif name.endswith(_MEMORY_SUFFIX) and name != INDEX_FILE_NAME:
                walk.infos[prefix + name] = info  # FIFOs and devices too: parsing warns about them
    walk.keys.update(zip(walk.infos, map(stat_key, walk.infos.values()), strict=True))
    return walk


def walk_symlink(walk: Walk, path: str, relative: str, real_root: str) -> None:
    """Add the symlink at ``path`` to ``walk`` as the walk sees it: a memory file (its target's
    stat), nothing, or a warning for a folder leading out of the root."""
    if os.path.isdir(path):
        if not _inside(real_root, os.path.realpath(path)):
            walk.warnings.append(f"{path}: folder skipped (symlink leading out of the memory root)")
        return
    if not is_memory_name(relative.rsplit("/", 1)[-1]):
        return
    info = _symlink_info(path)
    if info is not None:
        walk.infos[relative] = info
        walk.symlinks.add(relative)


def list_names(root: str) -> tuple[set[str], list[str]]:
    """The relative paths of the memory files under ``root`` by name alone, and one warning per
    folder skipped (unreadable): what a listing needs to notice files added or removed since the
    index was saved, without the stat of every file :func:`walk_root` makes (75,000 names in
    tens of milliseconds instead of half a second).

    Only names not ending in ``.md`` are stat-ed, to find the subfolders; a folder's link count
    (two plus its subfolders) says whether a ``*.md`` name is a folder too, and where it does
    not add up (a file system that does not count them), every entry is typed instead.
    """
    names: set[str] = set()
    warnings: list[str] = []
    pending = [("", root)]
    while pending:
        prefix, folder = pending.pop()
        try:
            links = os.lstat(folder).st_nlink
            listed = os.listdir(folder)
        except OSError as error:
            warnings.append(f"{folder}: folder skipped (unreadable: {error.strerror or error})")
            continue
        base = folder + os.sep
        # (is_memory_name's tests inline: one Python call a name is most of 75,000 names' cost)
        named = [name for name in listed if name.endswith(_MEMORY_SUFFIX)]
        memories = [name for name in named if name[0] != "." and name != INDEX_FILE_NAME]
        others = [name for name in listed if name[0] != "." and not name.endswith(_MEMORY_SUFFIX)]
        folders = [name for name in others if _is_folder(base + name)]
        if links != len(folders) + 2:  # a folder named *.md, or no link count: type them all
            folders += [name for name in memories if _is_folder(base + name)]
            memories = [name for name in memories if name not in folders]
        pending += [(f"{prefix}{name}/", base + name) for name in folders]
        names.update(map(prefix.__add__, memories))
    return names, warnings


def _is_folder(path: str) -> bool:
    try:
        return stat.S_ISDIR(os.lstat(path).st_mode)
    except OSError:
        return False
