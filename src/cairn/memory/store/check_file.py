"""A small checksummed file beside a saved index that says what a check of its root saw.

Two checks keep one: ``find``'s (``<scope>.seen``, :mod:`~cairn.memory.store.seen`) and the
folders' (``<scope>.dirs``, :mod:`~cairn.memory.store.folders`). Both say the same things about
the index they were written on (the snapshot ``generation``, how many journal ``entries`` were
replayed, the memories ``changed`` since) plus their own ``payload``. The file is a magic line, a
CRC-32 of the body, and the body (``marshal``: our own file, checksummed, never another's). It
is a cache: a missing, damaged or foreign one reads as None and costs its check a full pass;
it is replaced atomically, and a failed write is only a cost.
"""

from __future__ import annotations

import contextlib
import marshal
import os
import zlib
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from cairn.memory.store.journal import temp_path
from cairn.values import Value

__all__ = ["CheckFile", "read_check_file", "write_check_file"]

_VERSION = 1
_CRC_BYTES = 4
_MARSHAL_VERSION = 4


class CheckFile(Value):
    generation: str  # the snapshot the records were loaded from ...
    entries: int  # ... with this many of its journal's entries
    changed: frozenset[str]  # memories whose record may differ from the index so loaded
    payload: object  # what the check itself keeps


def read_check_file(path: Path, magic: bytes, root: str) -> CheckFile | None:
    """The file at ``path`` when it starts with ``magic``, is whole and was written for
    ``root``; otherwise None."""
    try:
        data = path.read_bytes()
    except OSError:
        return None
    start = len(magic) + _CRC_BYTES
    if not data.startswith(magic) or len(data) < start:
        return None
    body = memoryview(data)[start:]
    if zlib.crc32(body) != int.from_bytes(data[len(magic) : start], "big"):
        return None
    try:
        version, saved_root, generation, entries, changed, payload = marshal.loads(body)  # noqa: S302 - our file, checksummed
    except (ValueError, TypeError, EOFError):
        return None
    if version != _VERSION or saved_root != root:
        return None
    return CheckFile(generation, entries, frozenset(changed.split("\0")) - {""}, payload)


def write_check_file(
    path: Path, magic: bytes, root: str, generation: str, entries: int, changed: Iterable[str],
    payload: bytes | dict[str, Any],
) -> None:  # fmt: skip
    """Replace the file at ``path`` atomically (a failure leaves the old one, or none)."""
    joined = "\0".join(changed)
    body = marshal.dumps((_VERSION, root, generation, entries, joined, payload), _MARSHAL_VERSION)
    temp = temp_path(path)
    try:
        with temp.open("wb") as handle:
            handle.write(magic + zlib.crc32(body).to_bytes(_CRC_BYTES, "big"))
            handle.write(body)
        os.replace(temp, path)
    except OSError:
        with contextlib.suppress(OSError):
            temp.unlink()
