"""Cross-process locks of the memory: one per memory root, and Dream's ``consolidation.lock``.

**Root locks.** Every write into a memory root (an agent's ``write_file``/``edit``, an index
rebuild, meta and cursor updates, Forget and restore) happens while holding that root's lock, an
OS file lock (:mod:`filelock`) on ``.<root name>.lock`` beside the root. The kernel releases it
when the holding process dies, even by ``kill -9``, so a crash never blocks the next writer.
Critical sections are short (one file write, one index rebuild) and never wait on the model, so
a waiter waits milliseconds. Each acquisition opens its own file handle, so two tasks of one
process exclude each other like two processes do; a holder must not re-acquire a lock it holds.
Roots are always locked in the order given by :func:`lock_order` (project before user), which
rules out deadlocks.

Because every writer holds the lock, a temp file of an atomic write (``.<name>.<random>.tmp``)
found under a root while holding its lock belongs to a writer that died mid-write:
:func:`sweep_stale_temp_files` removes it. The sweep walks the whole root, so a process does it
the first time it locks a root and then at most every :data:`SWEEP_INTERVAL_SECONDS` (a write
must cost what it changes, not what the memory holds).

**consolidation.lock** (Dream, as in the reference): created exclusively with the holder's PID;
stale after an hour or when that PID is dead, and then removed by the next run.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import stat
import threading
import time
from collections.abc import AsyncIterator, Iterator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Protocol

from filelock import FileLock, Timeout

from cairn.debug_log import get_logger

__all__ = [
    "CONSOLIDATION_LOCK_NAME",
    "DREAM_LOCK_STALE_SECONDS",
    "LOCK_WAIT_SECONDS",
    "ConsolidationLock",
    "DatabaseSections",
    "LockWaitStopped",
    "MemoryBusy",
    "hold_local_roots",
    "hold_roots",
    "hold_roots_async",
    "lock_order",
    "pid_alive",
    "root_lock_path",
    "serve_from_database",
    "stop_serving_from_database",
    "sweep_stale_temp_files",
]

LOCK_WAIT_SECONDS = 30.0  # longest wait for a root lock before giving up (sections are short)
LOCK_POLL_SECONDS = 0.01  # between attempts while another writer holds a root lock
STALE_TEMP_SECONDS = 2.0  # a temp file this old under a held root lock is a dead writer's
SWEEP_INTERVAL_SECONDS = 600.0  # a process sweeps a root for dead writers' temp files this often
DREAM_LOCK_STALE_SECONDS = 3600.0  # a consolidation.lock older than this is stale (reference: 1 h)
CONSOLIDATION_LOCK_NAME = "consolidation.lock"
_TEMP_NAME = re.compile(r"^\..+\.tmp$")  # fsutil's atomic-write temp files: .<name>.<random>.tmp
_NO_SUBFOLDERS = 2  # a folder's link count without subfolders (where the file system counts)
_log = get_logger("MEMORY")


class MemoryBusy(TimeoutError):
    """Another writer held a memory root's lock for longer than :data:`LOCK_WAIT_SECONDS`."""

    def __init__(self, root: Path) -> None:
        super().__init__(
            f"{root}: another cairn process kept the memory locked for {LOCK_WAIT_SECONDS:.0f} s; "
            "try again in a moment"
        )
        self.root = root


class LockWaitStopped(Exception):
    """A wait for a memory root's lock was given up because its ``stop`` event was set (the
    process is closing); nothing was locked."""

    def __init__(self, root: Path) -> None:
        super().__init__(f"{root}: the wait for the memory's lock was stopped")
        self.root = root


def root_lock_path(root: Path) -> Path:
    """The lock file of a memory root: a dot file beside it, never inside (never a memory)."""
    root = Path(os.path.abspath(root))
    return root.parent / f".{root.name}.lock"


def lock_order(roots: Sequence[Path]) -> list[Path]:
    """``roots`` without duplicates, in the one order every caller locks them in."""
    unique: dict[str, Path] = {}
    for root in roots:
        unique.setdefault(os.path.abspath(root), Path(os.path.abspath(root)))
    return [unique[key] for key in sorted(unique)]


def _new_lock(root: Path) -> FileLock:
    path = root_lock_path(root)
    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path), thread_local=False)


class DatabaseSections(Protocol):
    """A backend whose roots mirror a database (PostgreSQL): while their locks are held, one
    transaction runs (begun after the local locks, committed before they are released)."""

    def shards_of(self, roots: Sequence[Path]) -> Sequence[Any]: ...

    def begin(self, shards: Sequence[Any]) -> Mapping[str, int]: ...

    def commit(self, shards: Sequence[Any], begun: Mapping[str, int]) -> None: ...

    def rollback(self, shards: Sequence[Any]) -> None: ...


_databases: dict[str, DatabaseSections] = {}  # root (absolute) -> the backend serving it
_swept: dict[str, float] = {}  # root (absolute) -> when this process last swept it (monotonic)
_young_temps: dict[str, list[Path]] = {}  # root -> temp files too young at its last sweep


def serve_from_database(roots: Sequence[Path], backend: DatabaseSections) -> None:
    """Lock ``roots`` with ``backend``'s transactions from now on (a database backend opened)."""
    for root in roots:
        _databases[os.path.abspath(root)] = backend


def stop_serving_from_database(roots: Sequence[Path], backend: DatabaseSections) -> None:
    """``backend`` closed: its roots are plain folders again (unless another backend took them)."""
    for root in roots:
        if _databases.get(os.path.abspath(root)) is backend:
            del _databases[os.path.abspath(root)]


def _database_sections(roots: Sequence[Path]) -> list[tuple[DatabaseSections, list[Any]]]:
    found: dict[int, tuple[DatabaseSections, list[Path]]] = {}
    for root in roots:
        backend = _databases.get(os.path.abspath(root))
        if backend is not None:
            found.setdefault(id(backend), (backend, []))[1].append(root)
    return [(backend, list(backend.shards_of(served))) for backend, served in found.values()]


@contextlib.contextmanager
def hold_roots(roots: Sequence[Path], *, timeout: float = LOCK_WAIT_SECONDS) -> Iterator[None]:
    """Hold the locks of ``roots`` (blocking, for synchronous callers such as Forget); for a
    root mirrored from a database, the body is also one transaction of that database."""
    with hold_local_roots(roots, timeout=timeout):
        sections = _database_sections(roots)
        if not sections:
            yield
            return
        begun = [backend.begin(shards) for backend, shards in sections]
        try:
            yield
        except BaseException:
            for backend, shards in sections:
                backend.rollback(shards)
            raise
        for (backend, shards), seqs in zip(sections, begun, strict=True):
            backend.commit(shards, seqs)


@contextlib.contextmanager
def hold_local_roots(
    roots: Sequence[Path],
    *,
    timeout: float = LOCK_WAIT_SECONDS,
    stop: threading.Event | None = None,
) -> Iterator[None]:
    """Hold the file locks of ``roots`` on this machine only (no database transaction).

    ``stop``: while it is set, or once it is set during the wait, give up at once with
    :class:`LockWaitStopped` (a wait that is optional, such as a catch-up pull, must not keep
    a closing process for :data:`LOCK_WAIT_SECONDS`)."""
    held: list[FileLock] = []
    try:
        for root in lock_order(roots):
            lock = _new_lock(root)
            _acquire(lock, root, timeout, stop)
            held.append(lock)
            _sweep_now_and_then(root)
        yield
    finally:
        for lock in reversed(held):
            lock.release()


def _acquire(lock: FileLock, root: Path, timeout: float, stop: threading.Event | None) -> None:
    if stop is None:
        try:
            lock.acquire(timeout=timeout, poll_interval=LOCK_POLL_SECONDS)
        except Timeout:
            raise MemoryBusy(root) from None
        return
    deadline = time.monotonic() + timeout
    while not stop.is_set():  # looked at between waits of one poll each
        left = deadline - time.monotonic()
        try:
            lock.acquire(
                timeout=min(LOCK_POLL_SECONDS, max(left, 0)), poll_interval=LOCK_POLL_SECONDS
            )
        except Timeout:
            if left <= 0:
                raise MemoryBusy(root) from None
            continue
        return
    raise LockWaitStopped(root)


@contextlib.asynccontextmanager
async def hold_roots_async(
    roots: Sequence[Path], *, timeout: float = LOCK_WAIT_SECONDS
) -> AsyncIterator[None]:
    """Hold the locks of ``roots`` without blocking the event loop while waiting.

    Each attempt takes every lock with a non-blocking ``flock`` or, when one is busy, releases
    those it got; between attempts the task sleeps holding nothing. So a waiting or cancelled
    task never keeps a lock that a synchronous caller on the same event loop could block on.
    The body must not await while holding the locks (it runs a few file operations).
    """
    ordered = lock_order(roots)
    held = await _acquire_all(ordered, timeout)
    try:
        for root in ordered:
            _sweep_now_and_then(root)
        sections = _database_sections(ordered)
        begun = [await asyncio.to_thread(b.begin, shards) for b, shards in sections]
        try:
            yield
        except BaseException:
            for backend, shards in sections:
                await asyncio.to_thread(backend.rollback, shards)
            raise
        for (backend, shards), seqs in zip(sections, begun, strict=True):
            await asyncio.to_thread(backend.commit, shards, seqs)
    finally:
        for lock in reversed(held):
            lock.release()


async def _acquire_all(roots: list[Path], timeout: float) -> list[FileLock]:
    deadline = time.monotonic() + timeout
    while True:
        held: list[FileLock] = []
        busy: Path | None = None
        for root in roots:
            lock = _new_lock(root)
            try:
                lock.acquire(timeout=0)
            except Timeout:
                busy = root
                break
            held.append(lock)
        if busy is None:
            return held
        for lock in reversed(held):
            lock.release()
        if time.monotonic() >= deadline:
            raise MemoryBusy(busy)
        await asyncio.sleep(LOCK_POLL_SECONDS)


def _sweep_now_and_then(root: Path) -> None:
    """:func:`sweep_stale_temp_files` at the first lock of ``root`` in this process, then at
    most every :data:`SWEEP_INTERVAL_SECONDS` (call with its lock held)."""
    key = os.path.abspath(root)
    now = time.monotonic()
    last = _swept.get(key)
    if last is not None and now - last < SWEEP_INTERVAL_SECONDS:
        young = _young_temps.pop(key, [])
        if young:  # temp files too young to judge at the last sweep: judged again now
            _remove_stale([path for path in young if path.exists()], _young_temps, key)
        return
    _swept[key] = now
    kept: list[Path] = []
    sweep_stale_temp_files(root, kept=kept)
    if kept:
        _young_temps[key] = kept


def _remove_stale(paths: list[Path], young: dict[str, list[Path]], key: str) -> None:
    now = time.time()
    for path in paths:
        try:
            if now - path.lstat().st_mtime < STALE_TEMP_SECONDS:
                young.setdefault(key, []).append(path)
                continue
            path.unlink()
        except OSError:
            continue
        _log.warning(f"{path}: removed a temp file left by an interrupted memory write")


def sweep_stale_temp_files(
    root: Path, *, min_age: float = STALE_TEMP_SECONDS, kept: list[Path] | None = None
) -> list[Path]:
    """Remove atomic-write temp files a dead writer left under ``root``; call with its lock held.

    Only files older than ``min_age`` seconds go, so a writer outside the lock protocol (a
    person's editor, the main agent writing memory itself) is not raced; the younger ones are
    added to ``kept`` (to be judged again later).
    """
    removed: list[Path] = []
    now = time.time()
    pending = [Path(os.path.abspath(root))]
    while pending:
        folder = pending.pop()
        try:
            if os.lstat(folder).st_nlink == _NO_SUBFOLDERS:  # (a memory type folder)
                # names alone (no DirEntry, no regex for each of 25,000 memories)
                names = [name for name in os.listdir(folder) if name[0] == "."]
                for name in filter(_TEMP_NAME.match, names):
                    _judge(folder / name, None, now, min_age, kept, removed)
                continue
            with os.scandir(folder) as listing:
                entries = list(listing)
        except OSError:
            continue
        for entry in entries:
            try:
                if entry.is_dir(follow_symlinks=False):
                    pending.append(Path(entry.path))
                elif _TEMP_NAME.match(entry.name):
                    _judge(Path(entry.path), entry, now, min_age, kept, removed)
            except OSError:
                continue
    for path in removed:
        _log.warning(f"{path}: removed a temp file left by an interrupted memory write")
    return removed


def _judge(
    path: Path, entry: os.DirEntry[str] | None, now: float, min_age: float,
    kept: list[Path] | None, removed: list[Path],
) -> None:  # fmt: skip
    """Remove the temp file at ``path`` when it is older than ``min_age`` (else add it to
    ``kept``); anything else there (a folder, a symlink, a file gone) is left alone."""
    try:
        info = entry.stat(follow_symlinks=False) if entry is not None else os.lstat(path)
        if not stat.S_ISREG(info.st_mode):
            return
        if now - info.st_mtime < min_age:
            if kept is not None:
                kept.append(path)
            return
        os.unlink(path)
    except OSError:
        return
    removed.append(path)


# --- consolidation.lock ------------------------------------------------------------------------


def pid_alive(pid: int) -> bool:
    """True when a process with this PID exists (it may belong to another user)."""
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    except OSError:
        return False
    return True


@dataclass(frozen=True)
class ConsolidationLock:
    """Dream's PID lock file (``<state dir>/consolidation.lock``)."""

    path: Path
    stale_after: float = DREAM_LOCK_STALE_SECONDS

    def holder(self, now: float, *, clean: bool = True, ours_is_stale: bool = False) -> int | None:
        """The PID of a live, fresh holder; a stale, dead or unreadable lock is removed.

        ``clean=False`` only looks. ``ours_is_stale``: a lock with our own PID is a leftover
        (a release that failed), since the caller knows no Dream of ours is running.
        """
        try:
            info = self.path.stat()
            text = self.path.read_text(encoding="utf-8", errors="replace").strip()
        except FileNotFoundError:
            return None
        except OSError as error:
            _log.warning(f"{self.path}: unreadable ({error}); treating it as stale")
            text, info = "", None
        pid = int(text) if text.isdigit() else 0
        fresh = info is not None and now - info.st_mtime <= self.stale_after
        ours = pid == os.getpid() and ours_is_stale
        if pid > 0 and fresh and pid_alive(pid) and not ours:
            return pid
        if not clean:
            return None
        reason = "dead holder" if pid > 0 and fresh else "stale or invalid"
        _log.warning(f"{self.path}: removing a {reason} Dream lock (pid {text or '?'})")
        with contextlib.suppress(FileNotFoundError):
            self.path.unlink()
        return None

    def try_acquire(self, now: float, *, ours_is_stale: bool = False) -> bool:
        """Create the lock with our PID; False when a live holder has it.

        Call with the project root lock held, so removing a stale lock cannot race another
        process that is creating a fresh one.
        """
        if self.holder(now, ours_is_stale=ours_is_stale) is not None:
            return False
        self.path.parent.mkdir(parents=True, exist_ok=True)
        try:
            fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o644)
        except FileExistsError:
            return False
        try:
            os.write(fd, f"{os.getpid()}\n".encode())
        finally:
            os.close(fd)
        return True

    def release(self) -> None:
        """Remove the lock if it is still ours."""
        try:
            text = self.path.read_text(encoding="utf-8").strip()
        except OSError:
            return
        if text == str(os.getpid()):
            with contextlib.suppress(FileNotFoundError):
                self.path.unlink()
