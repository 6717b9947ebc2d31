"""Moving a project folder of the earlier key layout to its unambiguous key.

An earlier cairn named ``projects/<key>`` by the reference's key alone (every character that is
not a letter or a digit turned into ``-``), so ``/x/a-b``, ``/x/a.b``, ``/x/a_b`` and ``/x/a b``
shared one folder: recordings, checkpoints, memory and cursors. The first time a project needs
its folder under the new key (:func:`cairn.config.paths.project_key`) and the old one exists:

- when nothing in the old folder says it was another project's (every recording whose first
  record names a folder belongs to this project, or its owner cannot be told), the folder is
  renamed: one atomic step;
- otherwise it was shared: this project gets a copy of everything that cannot be told apart
  (memory, checkpoints, cursors; git objects hard-linked) and its own recordings, which leave
  the old folder; the rest stays for the other projects, whose own first start does the same.

Nothing is deleted that was not first copied to its new place, and every step runs under a lock
of the ``projects`` folder, so concurrent processes migrate a folder once. A process that
cannot get the lock in time goes on with the new folder, and the migration that held the lock
merges into it instead of replacing it.
"""

from __future__ import annotations

import contextlib
import json
import os
import shutil
from collections.abc import Iterator
from pathlib import Path

from cairn.config.paths import folder_log, sanitize_path_key

__all__ = ["migrate_reference_folder", "recording_owner"]

LOCK_NAME = ".migration.lock"  # in the projects folder: one migration at a time
LOCK_TIMEOUT_SECONDS = 120.0  # a split copies checkpoints: it may take a while
FIRST_LINE_MAX_BYTES = 1 << 20  # of a recording, read to find the folder it ran in
_RECORDING_FOLDERS = ("chats", "tenants/*/chats")  # where a project folder keeps recordings
_NOT_COPIED = ("lock", "*.lock")  # lock files: recreated on use, and a copy could look held


class _Log:
    """The debug log when it is loaded (it sits a layer above config), else nothing."""

    @staticmethod
    def info(message: str) -> None:
        log = folder_log()
        if log is not None:
            log.info(message)

    @staticmethod
    def warning(message: str) -> None:
        log = folder_log()
        if log is not None:
            log.warning(message)


_log = _Log()


def migrate_reference_folder(root: Path, legacy: Path, target: Path) -> None:
    """Move (or split) ``legacy``, the earlier folder of project ``root``, to ``target``."""
    from filelock import FileLock, Timeout

    lock = FileLock(str(legacy.parent / LOCK_NAME))
    try:
        lock.acquire(timeout=LOCK_TIMEOUT_SECONDS)
    except Timeout:
        _log.warning(f"another cairn process is migrating {legacy}; using {target}")
        return
    except OSError as exc:
        _log.warning(f"cannot lock {legacy.parent} to migrate {legacy.name}: {exc}")
        return
    try:
        if legacy.is_dir() and not target.exists():
            _migrate(root, legacy, target)
    except OSError as exc:
        _log.warning(f"migrating {legacy} to {target} failed: {exc}")
    finally:
        lock.release()


def recording_owner(recording: Path, legacy_key: str) -> Path | None:
    """The project a recording in a folder named ``legacy_key`` belongs to: the folder its
    first record ran in, or the ancestor of it whose reference key is ``legacy_key`` (the key
    keeps a path's length, so at most one ancestor has it); ``None`` when it cannot be told."""
    try:
        with recording.open("rb") as handle:
            line = handle.readline(FIRST_LINE_MAX_BYTES)
        cwd = json.loads(line).get("cwd")
    except (OSError, ValueError, AttributeError):
        return None
    if not isinstance(cwd, str) or not cwd.startswith("/"):
        return None
    path = Path(cwd)
    for candidate in (path, *path.parents):
        if len(str(candidate)) == len(legacy_key) and sanitize_path_key(candidate) == legacy_key:
            return candidate
    return None


def _migrate(root: Path, legacy: Path, target: Path) -> None:
    owners = {r: recording_owner(r, legacy.name) for r in _recordings(legacy)}
    others = {owner for owner in owners.values() if owner is not None and owner != root}
    if not others:
        _move(legacy, target)
        _log.info(f"project folder {legacy.name} moved to {target.name}")
        return
    _split(legacy, target, [recording for recording, owner in owners.items() if owner == root])
    _log.info(
        f"project folder {legacy.name} was shared with {len(others)} other project(s): "
        f"{target.name} got a copy of it and this project's recordings"
    )


def _recordings(folder: Path) -> Iterator[Path]:
    for pattern in _RECORDING_FOLDERS:
        for chats in folder.glob(pattern):
            with contextlib.suppress(OSError):
                yield from (p for p in chats.iterdir() if p.suffix == ".jsonl" and p.is_file())


def _move(legacy: Path, target: Path) -> None:
    try:
        os.rename(legacy, target)
    except OSError:
        if not target.is_dir():
            raise
        _merge(legacy, target)  # made meanwhile by a process that could not wait for us


def _split(legacy: Path, target: Path, ours: list[Path]) -> None:
    temp = legacy.parent / f".{target.name}.migrating-{os.getpid()}"
    shutil.rmtree(temp, ignore_errors=True)
    recordings = set(_recordings(legacy))
    shutil.copytree(
        legacy,
        temp,
        symlinks=True,
        ignore=lambda folder, names: _skipped(Path(folder), names, recordings),
        copy_function=_link_or_copy,
    )
    for recording in ours:
        copy = temp / recording.relative_to(legacy)
        copy.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(recording, copy)
    _move(temp, target)
    shutil.rmtree(temp, ignore_errors=True)  # left only when it was merged file by file
    for recording in ours:  # in the new folder now: they leave the shared one
        with contextlib.suppress(OSError):
            recording.unlink()


def _skipped(folder: Path, names: list[str], recordings: set[Path]) -> set[str]:
    import fnmatch

    return {
        name
        for name in names
        if folder / name in recordings or any(fnmatch.fnmatch(name, p) for p in _NOT_COPIED)
    }


def _link_or_copy(source: str, destination: str) -> object:
    """Git objects never change once written: a hard link shares them; anything else is copied
    (recordings and audit trails are appended to in place)."""
    if f"{os.sep}objects{os.sep}" in source:
        with contextlib.suppress(OSError):
            os.link(source, destination)
            return destination
    return shutil.copy2(source, destination)


def _merge(source: Path, target: Path) -> None:
    """Move every entry of ``source`` that ``target`` lacks into it; what both hold stays in
    ``source`` (nothing is overwritten or lost)."""
    for entry in list(source.iterdir()):
        there = target / entry.name
        if not there.exists() and not there.is_symlink():
            os.rename(entry, there)
        elif entry.is_dir() and not entry.is_symlink() and there.is_dir():
            _merge(entry, there)
    with contextlib.suppress(OSError):
        source.rmdir()
