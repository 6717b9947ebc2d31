"""The embedding vectors of one memory root, beside its lexical index (issue #26).

A :class:`VectorTable` maps each memory (its path relative to the root) to one row of a float32
matrix: the unit-length embedding of :func:`embedding_text`, with the file's stat key and a
digest of that text. A memory whose stat key changed is embedded again only when its text
did (the digest decides), so touching a file costs nothing. Rows of removed memories are reused.

The table is saved as ``<root's index folder>/<scope>.vec``: a CRC-checked ``marshal`` snapshot
holding the model id, the paths, stat keys, digests and the rows as float16 (512 bytes a memory
at 256 dimensions), and ``<scope>.vecj``, a journal (:mod:`~cairn.memory.store.journal`) with one
entry per row put or removed since: a save appends the rows that changed (issue #28; the
snapshot is 5 MB at 10,000 memories) and rewrites the snapshot only once the journal has grown.
Any problem with the snapshot (damaged, another model or format, another root) means one warning
and a rebuild: the vectors are computed again in the background, never in a turn; a torn journal
tail loses only the rows past it, which are computed again.

numpy is imported with this module, which the store imports only on the refined and
background paths.
"""

from __future__ import annotations

import hashlib
import marshal
import zlib
from array import array
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from cairn.debug_log import get_logger
from cairn.fsutil import atomic_write_bytes
from cairn.memory.store.cache import StatKey
from cairn.memory.store.embedding import MAX_EMBED_CHARS
from cairn.memory.store.journal import (
    GENERATION_BYTES,
    Journal,
    index_lock,
    new_generation,
    read_generation,
)

__all__ = [
    "COMPACT_VECTOR_ENTRIES",
    "EMBED_BODY_CHARS",
    "VECTOR_FORMAT",
    "VectorTable",
    "embedding_text",
    "load_vectors",
    "rank_rows",
    "save_vectors",
    "text_digest",
]

VECTOR_FORMAT = 2  # bump when the layout below changes (2: a generation, a journal)
EMBED_BODY_CHARS = 600  # body characters embedded after the name and description
COMPACT_VECTOR_ENTRIES = 4_096  # journal entries before the snapshot is written again
_FILE_PREFIX = b"cairn-recall-vectors\n"  # then the generation, a CRC-32, the marshal payload
_MAGIC = "cairn-recall-vectors"
_JOURNAL_MAGIC = b"cairn-recall-vectors"
_MARSHAL_VERSION = 4
_DIGEST_BYTES = 8
_log = get_logger("MEMORY")


def embedding_text(title: str, description: str, body: str) -> str:
    """What a memory's vector is made from: name, description and the start of the body."""
    text = f"{title}\n{description}\n{body[:EMBED_BODY_CHARS]}"
    return text[:MAX_EMBED_CHARS]


def text_digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogatepass"), digest_size=8).digest()


class VectorTable:
    """Relative path -> (stat key, text digest, row) for one root, over one matrix of rows."""

    def __init__(self, model_id: str, dim: int) -> None:
        self.model_id = model_id
        self.dim = dim
        self.matrix = np.zeros((0, dim), dtype=np.float32)
        self.keys: dict[str, StatKey] = {}
        self.digests: dict[str, bytes] = {}
        self.rows: dict[str, int] = {}
        self._names: list[str | None] = []  # row -> relative path (None: a free row)
        self._free: list[int] = []
        self._used: np.ndarray | None = None  # indexes of the rows in use (cached)
        self.changed: set[str] = set()  # rows put or removed since the last save
        self.generation = ""  # of the snapshot the table was loaded from or saved as
        self.journal_entries = 0

    @property
    def dirty(self) -> bool:
        return bool(self.changed)

    def __len__(self) -> int:
        return len(self.rows)

    def current(self, relative: str, key: StatKey) -> bool:
        return self.keys.get(relative) == key

    def same_text(self, relative: str, digest: bytes) -> bool:
        return self.digests.get(relative) == digest

    def touch(self, relative: str, key: StatKey) -> None:
        """The file changed but its embedded text did not: keep the row, note the new key."""
        self.keys[relative] = key
        self.changed.add(relative)

    def put(self, relative: str, key: StatKey, digest: bytes, vector: np.ndarray) -> None:
        row = self.rows.get(relative)
        if row is None:
            row = self._free.pop() if self._free else self._grow()
            self.rows[relative] = row
            self._names[row] = relative
            self._used = None
        self.matrix[row] = vector
        self.keys[relative] = key
        self.digests[relative] = digest
        self.changed.add(relative)

    def remove(self, relative: str) -> None:
        row = self.rows.pop(relative, None)
        if row is None:
            return
        self.keys.pop(relative, None)
        self.digests.pop(relative, None)
        self.matrix[row] = 0.0
        self._names[row] = None
        self._used = None
        self._free.append(row)
        self.changed.add(relative)

    def _grow(self) -> int:
        used = self.matrix.shape[0]
        grown = np.zeros((max(16, used * 2), self.dim), dtype=np.float32)
        grown[:used] = self.matrix
        self._free.extend(range(grown.shape[0] - 1, used, -1))
        self._names.extend([None] * (grown.shape[0] - used))
        self.matrix = grown
        return used

    def retain(self, alive: Callable[[str], bool]) -> None:
        """Drop the rows of memories that are gone."""
        for relative in [relative for relative in self.rows if not alive(relative)]:
            self.remove(relative)

    def scores(self, query: np.ndarray) -> tuple[list[str | None], np.ndarray]:
        """(relative path of each row, None for a free one; cosine similarity of each row to
        ``query``): one matrix-vector product over every row, no copy."""
        return self._names, self.matrix @ query

    @property
    def names(self) -> list[str | None]:
        """The relative path of each row, None for a free one."""
        return self._names

    def used_scores(self, query: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(:meth:`used_rows`, the cosine similarity of each to ``query``): one product over the
        matrix, no copy of it."""
        used = self.used_rows()
        scores = self.matrix @ query
        return used, scores if len(used) == len(scores) else scores[used]

    def used_rows(self) -> np.ndarray:
        """The indexes of the rows in use, ascending (kept until a row is taken or freed)."""
        if self._used is None:
            names = self._names
            used = np.fromiter((name is not None for name in names), dtype=bool, count=len(names))
            self._used = np.flatnonzero(used)
        return self._used

    # --- persistence --------------------------------------------------------------------

    def to_state(self) -> tuple[Any, ...]:
        relatives = list(self.rows)
        keys = array("q")
        for relative in relatives:
            keys.extend(self.keys[relative])
        rows = np.fromiter((self.rows[r] for r in relatives), dtype=np.int64, count=len(relatives))
        vectors = self.matrix[rows].astype(np.float16).tobytes()
        digests = b"".join(self.digests[relative] for relative in relatives)
        return ("\0".join(relatives), keys.tobytes(), digests, vectors)

    @classmethod
    def from_state(cls, model_id: str, dim: int, state: tuple[Any, ...]) -> VectorTable:
        joined, key_bytes, digests, vector_bytes = state
        relatives = joined.split("\0") if joined else []
        count = len(relatives)
        keys = array("q")
        keys.frombytes(key_bytes)
        if len(keys) != 4 * count or len(digests) != _DIGEST_BYTES * count:
            raise ValueError("vector table: columns of different lengths")
        if len(vector_bytes) != 2 * dim * count:
            raise ValueError("vector table: the rows do not match the model's dimensions")
        matrix = np.frombuffer(vector_bytes, dtype=np.float16).reshape(count, dim)
        if not np.isfinite(matrix).all():
            raise ValueError("vector table: a row is not finite")
        table = cls(model_id, dim)
        table.matrix = matrix.astype(np.float32)
        table._names = list(relatives)
        for row, relative in enumerate(relatives):
            table.rows[relative] = row
            table.keys[relative] = tuple(keys[4 * row : 4 * row + 4])  # type: ignore[assignment]
            at = _DIGEST_BYTES * row
            table.digests[relative] = bytes(digests[at : at + _DIGEST_BYTES])
        return table


def _header(model_id: str, dim: int, root: str, scope: str) -> tuple[Any, ...]:
    return (_MAGIC, VECTOR_FORMAT, model_id, dim, root, scope)


def _journal(path: Path) -> Journal:
    return Journal(path.with_suffix(".vecj"), _JOURNAL_MAGIC)


def _entry(table: VectorTable, relative: str) -> bytes:
    row = table.rows.get(relative)
    if row is None:
        return marshal.dumps(("x", relative), _MARSHAL_VERSION)
    vector = table.matrix[row].astype(np.float16).tobytes()
    return marshal.dumps(
        ("p", relative, table.keys[relative], table.digests[relative], vector), _MARSHAL_VERSION
    )


def _replay(table: VectorTable, payload: bytes) -> None:
    entry = marshal.loads(payload)  # noqa: S302 - our own file, checksummed
    if entry[0] == "x":
        table.remove(entry[1])
        return
    _, relative, key, digest, vector_bytes = entry
    if len(vector_bytes) != 2 * table.dim or len(digest) != _DIGEST_BYTES:
        raise ValueError("a journal row does not match the model's dimensions")
    vector = np.frombuffer(vector_bytes, dtype=np.float16).astype(np.float32)
    if not np.isfinite(vector).all():
        raise ValueError("a journal row is not finite")
    table.put(relative, tuple(key), bytes(digest), vector)


def load_vectors(path: Path, *, model_id: str, dim: int, root: str, scope: str) -> VectorTable:
    """The saved table of ``root`` (snapshot and journal), or an empty one (with one warning
    when a file was there but could not be used: damaged, another model version, another
    root)."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        return VectorTable(model_id, dim)
    except OSError as error:
        _log.warning(f"recall vectors {path} unreadable ({error}); recomputing them")
        return VectorTable(model_id, dim)
    try:
        start = len(_FILE_PREFIX) + GENERATION_BYTES
        if not data.startswith(_FILE_PREFIX) or len(data) < start + 4:
            raise ValueError("not a recall vector file")
        generation = data[len(_FILE_PREFIX) : start].decode("ascii")
        body = data[start + 4 :]
        if zlib.crc32(body) != int.from_bytes(data[start : start + 4], "big"):
            raise ValueError("checksum mismatch")
        header, state = marshal.loads(body)  # noqa: S302 - our own file, checksummed
        if header != _header(model_id, dim, root, scope):
            raise ValueError("written for another model, format or root")
        table = VectorTable.from_state(model_id, dim, state)
    except Exception as error:  # any damage at all means "recompute"
        _log.warning(f"recall vectors {path} not usable ({error}); recomputing them")
        return VectorTable(model_id, dim)
    table.generation = generation
    read = _journal(path).read(generation)
    if read is not None:
        try:
            for payload in read.entries:
                _replay(table, payload)
        except Exception as error:
            _log.warning(f"recall vectors journal of {path} not usable ({error}); recomputing")
            return VectorTable(model_id, dim)
        table.journal_entries = len(read.entries)
        if read.damaged:
            _log.warning(
                f"recall vectors journal of {path}: a damaged or torn entry after "
                f"{len(read.entries)} good ones; the rows past it are computed again"
            )
            table.journal_entries = COMPACT_VECTOR_ENTRIES + 1  # rewritten at the next save
    table.changed.clear()
    return table


def save_vectors(path: Path, table: VectorTable, *, root: str, scope: str) -> bool:
    """Append the rows that changed to the journal, or write a whole new snapshot (none yet,
    or the journal has grown); False (logged) when the folder is not writable."""
    if not table.changed and table.generation:
        return True
    try:
        with index_lock(path):
            current = read_generation(path, _FILE_PREFIX)
            whole = (
                current is None
                or current != table.generation
                or table.journal_entries + len(table.changed) > COMPACT_VECTOR_ENTRIES
            )
            if whole:
                generation = new_generation()
                payload = (_header(table.model_id, table.dim, root, scope), table.to_state())
                body = marshal.dumps(payload, _MARSHAL_VERSION)
                data = (_FILE_PREFIX + generation.encode("ascii")
                        + zlib.crc32(body).to_bytes(4, "big") + body)  # fmt: skip
                atomic_write_bytes(path, data, durable=False)
                _journal(path).reset(generation)
                table.generation, table.journal_entries = generation, 0
            else:
                entries = [_entry(table, relative) for relative in sorted(table.changed)]
                _journal(path).append(entries, table.generation)
                table.journal_entries += len(entries)
    except OSError as error:
        _log.debug(f"recall vectors {path} not saved: {error}")
        return False
    table.changed.clear()
    return True


def rank_rows(scores: np.ndarray, limit: int, key: Callable[[int], Any]) -> np.ndarray:
    """Indexes of the ``limit`` highest ``scores``, best first; equal scores in ``key`` order
    (one partition and one sort of the ``limit`` best, in numpy; ties, rare, in Python)."""
    if limit <= 0 or not len(scores):
        return np.empty(0, dtype=np.intp)
    negative = -scores
    if len(scores) > limit:
        top = np.argpartition(negative, limit - 1)[:limit]
        top = top[np.argsort(negative[top], kind="stable")]
    else:
        top = np.argsort(negative, kind="stable")
    values = negative[top]
    if bool((values[1:] == values[:-1]).any()):  # the same text twice, say: order by key
        rows = top.tolist()
        ranked = sorted(zip(values.tolist(), map(key, rows), rows, strict=True))
        top = np.array([at for _, _, at in ranked], dtype=np.intp)
    return top
