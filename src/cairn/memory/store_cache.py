"""The parse cache of one memory root, and its persisted form.

Each file under a root has a record keyed by its relative path and holding the file's stat key
``(mtime_ns, size, inode, ctime_ns)``: a :class:`DocRecord` for a memory (its parsed fields and
its id in the lexical index), a :class:`SkipRecord` for a file that is not one (the reason, so its
warning is listed without reading the file again). A refresh re-reads only files whose stat key
changed.

The records and the root's :class:`~cairn.memory.lexical_index.LexicalIndex` are saved together
in one ``marshal`` file written atomically, so a new process starts from them instead of parsing
and indexing every file. Any problem with the file (missing, damaged, another format, Python or
scorer version, another root) means "no cache": the store then rebuilds, logging one debug line.
"""

from __future__ import annotations

import marshal
import sys
from array import array
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes
from cairn.memory.lexical_index import LexicalIndex

__all__ = [
    "CACHE_FORMAT",
    "DocRecord",
    "ShardCache",
    "SkipRecord",
    "StatKey",
    "load_cache",
    "save_cache",
]

CACHE_FORMAT = 1  # bump when the layout below changes
_MAGIC = "cairn-recall-index"
_MARSHAL_VERSION = 4
_RUNTIME = (
    sys.implementation.cache_tag,
    sys.byteorder,
    array("i").itemsize,
    array("f").itemsize,
)  # marshal and the index's raw arrays are only portable within one runtime
_log = get_logger("MEMORY")

StatKey = tuple[int, int, int, int]  # (st_mtime_ns, st_size, st_ino, st_ctime_ns)


class DocRecord(NamedTuple):
    stat_key: StatKey
    doc_id: int  # id in the root's lexical index
    type: str
    title: str
    description: str
    body: str
    mtime: float
    size: int
    symlink: bool  # a symlink inside the root: re-stat on every refresh


class SkipRecord(NamedTuple):
    stat_key: StatKey
    reason: str
    detail: str


@dataclass
class ShardCache:
    records: dict[str, DocRecord | SkipRecord] = field(default_factory=dict)
    index: LexicalIndex = field(default_factory=LexicalIndex)
    next_id: int = 0


def _header(root: str, scope: str, fingerprint: str) -> tuple[Any, ...]:
    return (_MAGIC, CACHE_FORMAT, _RUNTIME, fingerprint, root, scope)


def _record(raw: Any) -> DocRecord | SkipRecord:
    if len(raw) == len(DocRecord._fields):
        return DocRecord._make(raw)
    if len(raw) == len(SkipRecord._fields):
        return SkipRecord._make(raw)
    raise ValueError("record of unknown shape")


def _decode(data: bytes, header: tuple[Any, ...]) -> ShardCache:
    saved_header, next_id, raw_records, index_state = marshal.loads(data)  # noqa: S302 - our own file
    if saved_header != header:
        raise ValueError("written by another format, runtime, scorer or root")
    records = {str(path): _record(raw) for path, raw in raw_records.items()}
    index = LexicalIndex.from_state(index_state)
    doc_count = sum(1 for record in records.values() if isinstance(record, DocRecord))
    if doc_count != index.doc_count or not isinstance(next_id, int):
        raise ValueError("records and index disagree")
    return ShardCache(records=records, index=index, next_id=next_id)


def load_cache(path: Path, *, root: str, scope: str, fingerprint: str) -> ShardCache | None:
    """The saved cache of ``root``, or None (with one debug line) when it cannot be used."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return None
    except OSError as error:
        _log.debug(f"recall index {path} unreadable ({error}); rebuilding")
        return None
    try:
        return _decode(data, _header(root, scope, fingerprint))
    except Exception as error:  # any damage at all means "rebuild"
        _log.debug(f"recall index {path} not usable ({type(error).__name__}: {error}); rebuilding")
        return None


def save_cache(path: Path, cache: ShardCache, *, root: str, scope: str, fingerprint: str) -> bool:
    """Write the cache atomically; False (logged) when the folder is not writable."""
    records = {relative: tuple(record) for relative, record in cache.records.items()}
    payload = (_header(root, scope, fingerprint), cache.next_id, records, cache.index.to_state())
    try:
        atomic_write_bytes(path, marshal.dumps(payload, _MARSHAL_VERSION), durable=False)
    except OSError as error:
        _log.debug(f"recall index {path} not saved: {error}")
        return False
    return True
