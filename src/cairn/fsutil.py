"""Atomic file writes: a reader sees the old file or the new one, never half of either."""

from __future__ import annotations

import contextlib
import json
import os
import secrets
import tempfile
from pathlib import Path
from typing import Any

__all__ = ["atomic_write_bytes", "atomic_write_json", "atomic_write_text"]


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
    for _ in range(tempfile.TMP_MAX):
        name = path.parent / f".{path.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(name, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o666), str(name)
        except FileExistsError:
            continue
    raise FileExistsError(f"no free temp file name beside {path}")


def atomic_write_text(path: Path, text: str, *, durable: bool = True) -> None:
    atomic_write_bytes(path, text.encode("utf-8"), durable=durable)


def atomic_write_json(path: Path, value: Any, *, durable: bool = True) -> None:
    atomic_write_text(path, json.dumps(value, indent=2, ensure_ascii=False) + "\n", durable=durable)
