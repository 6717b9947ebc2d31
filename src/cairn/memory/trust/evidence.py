"""Evidence: the workspace files a memory is about, and reading them without leaving the
workspace.

An evidence entry names a file by its path relative to the workspace (the folder the project
memory belongs to: the git root, or the workspace itself with
``CAIRN_MEMORY_PROJECT_SCOPE=workspace``) and records its content when the fact was learned: the
git blob hash (``git hash-object --no-filters``: ``sha1("blob <size>\\0" + bytes)``) when git
tracks the file, else its SHA-256, and its size.

Reading evidence never leaves the workspace and never blocks: the path is opened one component
at a time below the workspace with ``O_NOFOLLOW`` (a symlink anywhere is refused, so is ``..``),
the file without blocking and only when it is a regular file, and never past
:data:`MAX_EVIDENCE_BYTES`. What cannot be checked that way is *unverifiable*, with the reason
(:class:`Unverifiable`), never an error.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import stat
from collections.abc import Iterator, Sequence
from pathlib import Path, PurePosixPath
from typing import Literal

from cairn.debug_log import get_logger
from cairn.values import Value

__all__ = [
    "MAX_EVIDENCE_BYTES",
    "Evidence",
    "FileState",
    "HashKind",
    "Unverifiable",
    "git_blob_hash",
    "lstat_inside",
    "open_inside",
    "read_state",
    "regular_size",
    "stat_key",
    "tracked_paths",
    "workspace_relative",
]

MAX_EVIDENCE_BYTES = 8 * 1024 * 1024  # a larger file is never hashed: "cannot verify"
GIT_TIMEOUT_SECONDS = 5.0  # `git ls-files` when a memory is written
_CHUNK = 1024 * 1024
_log = get_logger("MEMORY")

HashKind = Literal["git", "sha256"]


class Unverifiable(Exception):
    """Evidence that cannot be checked (outside the workspace, a symlink, too large, ...)."""


class Evidence(Value):
    """One evidence entry: a workspace file and its content when the fact was learned."""

    path: str  # POSIX, relative to the workspace
    kind: HashKind
    digest: str  # hex
    size: int | None = None

    def matches(self, state: FileState) -> bool:
        """Whether the file's current content is the recorded one."""
        if self.size is not None and state.size != self.size:
            return False
        return state.digest(self.kind) == self.digest


class FileState(Value):
    """A workspace file as read now: its size and both digests."""

    size: int
    git: str
    sha256: str
    stat_key: tuple[int, int, int, int, int]  # (dev, ino, size, mtime_ns, ctime_ns)

    def digest(self, kind: HashKind) -> str:
        return self.git if kind == "git" else self.sha256


def git_blob_hash(data: bytes) -> str:
    """The blob hash git gives these bytes (``git hash-object --no-filters``)."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data, usedforsecurity=False).hexdigest()


def workspace_relative(raw: str, workspace: Path) -> str:
    """``raw`` (relative to the workspace, or absolute inside it) as a clean relative POSIX path;
    :class:`Unverifiable` when it is empty, outside the workspace or not valid UTF-8."""
    text = raw.strip()
    if not text:
        raise Unverifiable("an empty path")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        raise Unverifiable("the file name is not valid UTF-8") from None
    if "\x00" in text:
        raise Unverifiable("the path holds a NUL character")
    path = Path(text)
    if path.is_absolute():
        for base in {str(workspace), os.path.realpath(workspace)}:
            with contextlib.suppress(ValueError):
                path = path.relative_to(base)
                break
        else:
            raise Unverifiable(f"{text} is outside the workspace")
    parts = PurePosixPath(path.as_posix()).parts
    if not parts or any(part in ("..", "") for part in parts) or parts == (".",):
        raise Unverifiable(f"{text} is outside the workspace")
    return PurePosixPath(*[p for p in parts if p != "."]).as_posix()


def _stat_key(info: os.stat_result) -> tuple[int, int, int, int, int]:
    return info.st_dev, info.st_ino, info.st_size, info.st_mtime_ns, info.st_ctime_ns


@contextlib.contextmanager
def open_inside(workspace: Path, relative: str) -> Iterator[int]:
    """A read-only descriptor of the regular file ``relative`` under ``workspace``, opened one
    component at a time without following a symlink; :class:`Unverifiable` otherwise."""
    parts = PurePosixPath(relative).parts
    absolute = PurePosixPath(relative).is_absolute() or "\x00" in relative
    if absolute or not parts or any(part in ("..", ".", "") for part in parts):
        raise Unverifiable(f"{relative} is outside the workspace")
    try:
        folder = os.open(workspace, os.O_RDONLY | os.O_DIRECTORY)
    except OSError as error:
        raise Unverifiable(f"the workspace {workspace} is gone ({error.strerror})") from None
    try:
        for part in parts[:-1]:
            inner = _open_component(folder, part, relative, os.O_DIRECTORY)
            os.close(folder)
            folder = inner
        info = os.stat(parts[-1], dir_fd=folder, follow_symlinks=False)
        if stat.S_ISLNK(info.st_mode):
            raise Unverifiable(f"{relative} is a symlink")
        if not stat.S_ISREG(info.st_mode):  # a FIFO or a device is never opened
            raise Unverifiable(f"{relative} is not a regular file")
        fd = _open_component(folder, parts[-1], relative, os.O_NONBLOCK)
    finally:
        os.close(folder)
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise Unverifiable(f"{relative} is not a regular file")
        yield fd
    finally:
        os.close(fd)


def _open_component(folder: int, name: str, relative: str, flags: int) -> int:
    try:
        return os.open(name, os.O_RDONLY | os.O_NOFOLLOW | flags, dir_fd=folder)
    except FileNotFoundError:
        raise
    except OSError as error:
        if error.errno == errno.ELOOP or _is_link(folder, name):
            raise Unverifiable(f"{relative} goes through a symlink") from None
        if error.errno == errno.ENOTDIR:
            raise FileNotFoundError(
                errno.ENOENT, "a folder on the way is a file", relative
            ) from None
        raise Unverifiable(f"{relative} cannot be read ({error.strerror})") from None


def _is_link(folder: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.stat(name, dir_fd=folder, follow_symlinks=False).st_mode)
    except OSError:
        return False


def read_state(
    workspace: Path,
    relative: str,
    *,
    limit: int = MAX_EVIDENCE_BYTES,
    kinds: tuple[HashKind, ...] = ("git", "sha256"),
) -> FileState:
    """The file as it is now, with the digests of ``kinds`` (the others ``""``).
    :class:`FileNotFoundError` when it (or a folder on the way) does not exist;
    :class:`Unverifiable` when it cannot be read safely or is over ``limit`` bytes."""
    with open_inside(workspace, relative) as fd:
        info = os.fstat(fd)
        if info.st_size > limit:
            raise Unverifiable(f"{relative} is {info.st_size:,} bytes, too large to check")
        git = hashlib.sha1(b"blob %d\0" % info.st_size, usedforsecurity=False)
        sha = hashlib.sha256()
        hashers = [h for kind, h in (("git", git), ("sha256", sha)) if kind in kinds]
        size = 0
        while chunk := os.read(fd, _CHUNK):
            size += len(chunk)
            if size > info.st_size:
                raise Unverifiable(f"{relative} changed while it was read")
            for hasher in hashers:
                hasher.update(chunk)
        if size != info.st_size:
            raise Unverifiable(f"{relative} changed while it was read")
        return FileState(
            size,
            git.hexdigest() if "git" in kinds else "",
            sha.hexdigest() if "sha256" in kinds else "",
            _stat_key(info),
        )


def stat_key(workspace: Path, relative: str) -> tuple[int, int, int, int, int] | None:
    """The file's stat key (symlinks not followed), or None when it does not exist (or the
    path leads out of the workspace: never looked at)."""
    info = lstat_inside(workspace, relative)
    return None if info is None else _stat_key(info)


def lstat_inside(workspace: Path, relative: str) -> os.stat_result | None:
    """``lstat`` of the file (None when it does not exist, or the path leads out of the
    workspace: never looked at)."""
    path = PurePosixPath(relative)
    if path.is_absolute() or ".." in path.parts:
        return None
    try:
        return os.lstat(workspace / relative)
    except (OSError, ValueError):
        return None


def regular_size(info: os.stat_result) -> int | None:
    """The size of a regular file's stat (None for anything else)."""
    return info.st_size if stat.S_ISREG(info.st_mode) else None


def tracked_paths(workspace: Path, relatives: Sequence[str]) -> set[str]:
    """Which of ``relatives`` git tracks in ``workspace`` (none when git or the repository is
    missing). Runs ``git ls-files``: only when a memory is written, never at Recall."""
    if not relatives or not (workspace / ".git").exists():
        return set()
    import subprocess  # only when a memory with evidence is written

    command = ["git", "-C", str(workspace), "ls-files", "-z", "--", *relatives]
    environment = {**os.environ, "GIT_OPTIONAL_LOCKS": "0"}
    try:
        done = subprocess.run(  # a fixed argv; the paths come after "--"
            command, capture_output=True, timeout=GIT_TIMEOUT_SECONDS, env=environment, check=False
        )
    except (OSError, subprocess.SubprocessError) as error:
        _log.debug(f"git ls-files in {workspace} failed: {error!r}")
        return set()
    if done.returncode != 0:
        return set()
    listed = {os.fsdecode(name) for name in done.stdout.split(b"\0") if name}
    return {relative for relative in relatives if relative in listed}
