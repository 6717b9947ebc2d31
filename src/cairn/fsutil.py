"""Atomic file writes (a reader sees the old file or the new one, never half of either), and
reads that refuse anything but a regular file (a FIFO or a device never blocks or floods them)."""

from __future__ import annotations

import contextlib
import errno
import json
import os
import stat
from pathlib import Path
from typing import Any

__all__ = [
    "FileTooLarge",
    "NotRegularFile",
    "atomic_write_bytes",
    "atomic_write_json",
    "atomic_write_text",
    "file_kind",
    "read_regular_bytes",
    "read_regular_file",
]

TEMP_NAME_TRIES = 10_000  # random names tried for a temp file (tempfile.TMP_MAX)
_KINDS = (
    (stat.S_ISDIR, "a folder"),
    (stat.S_ISFIFO, "a FIFO"),
    (stat.S_ISCHR, "a device"),
    (stat.S_ISBLK, "a device"),
    (stat.S_ISSOCK, "a socket"),
)


class NotRegularFile(OSError):
    """A path that should be a regular file is a FIFO, a device, a socket or a folder."""

    def __init__(self, path: Path | str, mode: int) -> None:
        super().__init__(errno.EINVAL, f"not a regular file: {file_kind(mode)}", str(path))
        self.kind = file_kind(mode)


class FileTooLarge(OSError):
    """The file is larger than the caller reads."""


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a FIFO", "a device", ...)."""
    for test, kind in _KINDS:
        if test(mode):
            return kind
    return "a regular file" if stat.S_ISREG(mode) else "a special file"


def read_regular_bytes(path: Path | str, *, limit: int = -1) -> bytes:
    """The bytes of ``path`` (at most ``limit`` when given), which must be a regular file.

    Raises :class:`NotRegularFile` for anything else, checked before opening and again on the
    descriptor, opened without blocking: a FIFO swapped in meanwhile can never hang the caller.
    """
    mode = os.stat(path).st_mode
    if not stat.S_ISREG(mode):  # checked before opening: opening a device can have effects
        raise NotRegularFile(path, mode)
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)
    fd = os.open(path, flags)
    with os.fdopen(fd, "rb") as handle:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotRegularFile(path, mode)
        return handle.read(limit)


def atomic_write_bytes(path: Path, data: bytes, *, durable: bool = True) -> None:
    """Write ``data`` to a temp file beside ``path``, then rename it over ``path``.

    The temp file lives in the same folder so the rename is atomic; on any error it is removed.
    ``durable`` fsyncs before the rename so a crash cannot leave an empty file behind.
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    mode = None
    with contextlib.suppress(OSError):
        mode = path.stat().st_mode & 0o777
    fd, tmp = _create_temp(path)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            if durable:
                handle.flush()
                os.fsync(handle.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        os.replace(tmp, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        raise


def _create_temp(path: Path) -> tuple[int, str]:
    """A new temp file beside ``path`` with the mode a plain write gets (0666 less the umask).

    ``tempfile.mkstemp`` would create it 0600, and a new file would keep that mode.
    """
    for _ in range(TEMP_NAME_TRIES):
        name = path.parent / f".{path.name}.{os.urandom(6).hex()}.tmp"
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(name)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name beside {path}")


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", durable=durable)


def read_regular_file(path: Path | str, *, max_bytes: int) -> bytes:
    """The whole of the regular file ``path``; :class:`FileTooLarge` past ``max_bytes``."""
    data = read_regular_bytes(path, limit=max_bytes + 1)
    if len(data) > max_bytes:
        raise FileTooLarge(errno.EFBIG, f"larger than {max_bytes} bytes", str(path))
    return data
