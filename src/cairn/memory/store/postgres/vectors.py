"""Semantic candidates' vectors in the shared database (issue #26).

With the PostgreSQL backend, a memory's vector is computed once, by the process that first needs
it (the writer, in the background after its write, or the first Recall to meet it), and stored
in ``cairn_memory_vectors`` beside the documents; every other process takes it from there
instead of embedding the memory again. A row names the model and the digest of the text it was
made from, so a process only ever uses a vector of the same model for the same text.

The embedding column is pgvector's ``vector`` type when the server offers the extension (and the
role may create it), so the vectors can be searched in SQL too; otherwise it is ``bytea``
(little-endian float32), the plain-SQL fallback. cairn itself searches its local copy either way
(exact, in-process, a millisecond at 10,000 memories). The table has the same row-level security
as the others: a connection sees the rows of the namespace its transaction set. It is created on
first use, apart from the documents' schema, and holds nothing that cannot be recomputed.
"""

from __future__ import annotations

import contextlib
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cairn.debug_log import get_logger

if TYPE_CHECKING:
    import numpy as np
    import psycopg

__all__ = ["VECTOR_TABLE", "VectorRow", "ensure_vector_table", "fetch_vectors", "store_vectors"]

VECTOR_TABLE = "cairn_memory_vectors"
_log = get_logger("MEMORY")

VectorRow = tuple[str, bytes, "np.ndarray"]  # (relative path, text digest, unit vector)

_CREATE = """
CREATE TABLE IF NOT EXISTS cairn_memory_vectors (
    namespace text NOT NULL,
    scope text NOT NULL CHECK (scope IN ('project', 'user')),
    path text NOT NULL,
    model text NOT NULL,
    digest bytea NOT NULL,
    embedding {kind} NOT NULL,
    PRIMARY KEY (namespace, scope, path)
);
ALTER TABLE cairn_memory_vectors ENABLE ROW LEVEL SECURITY;
ALTER TABLE cairn_memory_vectors FORCE ROW LEVEL SECURITY;
DROP POLICY IF EXISTS cairn_namespace ON cairn_memory_vectors;
CREATE POLICY cairn_namespace ON cairn_memory_vectors
    USING (namespace = current_setting('cairn.namespace', true))
    WITH CHECK (namespace = current_setting('cairn.namespace', true));
"""
_LOCK = 0x6361_6972_6E76  # pg_advisory_xact_lock key while creating the table


def ensure_vector_table(connection: psycopg.Connection[Any]) -> str:
    """Create the table when missing; returns its embedding column's type (``vector`` with
    pgvector, else ``bytea``)."""
    kind = _column_kind(connection)
    if kind is not None:
        return kind
    with connection.transaction():
        connection.execute("SELECT pg_advisory_xact_lock(%s)", (_LOCK,))
        made = _column_kind(connection)  # by the process that held the lock before
        if made is not None:  # (its ALTER TABLE again would wait behind that process's writes)
            return made
        kind = "vector" if _pgvector(connection) else "bytea"
        connection.execute(_CREATE.format(kind=kind))
    return _column_kind(connection) or kind


def _column_kind(connection: psycopg.Connection[Any]) -> str | None:
    with connection.transaction():
        found = connection.execute(
            "SELECT udt_name FROM information_schema.columns "
            "WHERE table_name = %s AND column_name = 'embedding'",
            (VECTOR_TABLE,),
        ).fetchone()
    return None if found is None else str(found[0])


def _pgvector(connection: psycopg.Connection[Any]) -> bool:
    """Whether pgvector is (or can be made) available, inside the caller's transaction."""
    available = connection.execute(
        "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
    ).fetchone()
    if available is None:
        return False
    try:
        with connection.transaction():  # a savepoint: a refused CREATE EXTENSION is undone
            connection.execute("CREATE EXTENSION IF NOT EXISTS vector")
    except Exception as error:  # not allowed for this role: the plain-SQL fallback
        _log.debug(f"pgvector not usable ({error}); vectors are stored as bytea")
        return False
    return True


def _encode(vector: np.ndarray, kind: str) -> Any:
    import numpy as np

    if kind == "vector":
        return "[" + ",".join(f"{value:.7g}" for value in vector.tolist()) + "]"
    return np.asarray(vector, dtype="<f4").tobytes()


def _decode(value: Any, kind: str, dim: int) -> np.ndarray | None:
    import numpy as np

    if kind == "vector":
        text = str(value).strip("[]")
        array = np.array([float(part) for part in text.split(",")] if text else [], np.float32)
    else:
        data = bytes(value)
        if len(data) != 4 * dim:
            return None
        array = np.frombuffer(data, dtype="<f4").astype(np.float32)
    if array.shape != (dim,) or not np.isfinite(array).all():
        return None
    return array


def fetch_vectors(
    connection: psycopg.Connection[Any],
    namespace: str,
    scope: str,
    model: str,
    dim: int,
    wanted: Mapping[str, bytes],
) -> list[VectorRow]:
    """The stored vectors of ``wanted`` (relative path -> digest of its current text) made by
    ``model`` from that same text; rows that do not decode are left out."""
    if not wanted:
        return []
    kind = ensure_vector_table(connection)
    cast = "::text" if kind == "vector" else ""
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('cairn.namespace', %s, true)", (namespace,))
        cursor.execute(
            f"SELECT path, digest, embedding{cast} FROM cairn_memory_vectors "  # noqa: S608 - fixed text
            "WHERE namespace = %s AND scope = %s AND model = %s AND path = ANY(%s)",
            (namespace, scope, model, list(wanted)),
        )
        rows = cursor.fetchall()
    found: list[VectorRow] = []
    for path, digest, embedding in rows:
        if wanted.get(path) != bytes(digest):
            continue  # made from another text: the memory changed since
        vector = _decode(embedding, kind, dim)
        if vector is not None:
            found.append((path, bytes(digest), vector))
    return found


def store_vectors(
    connection: psycopg.Connection[Any],
    namespace: str,
    scope: str,
    model: str,
    rows: Sequence[VectorRow],
    removed: Sequence[str] = (),
) -> None:
    """Upsert ``rows`` and drop the vectors of ``removed`` paths, in one transaction."""
    if not rows and not removed:
        return
    kind = ensure_vector_table(connection)
    cast = "::vector" if kind == "vector" else ""
    with connection.transaction(), connection.cursor() as cursor:
        cursor.execute("SELECT set_config('cairn.namespace', %s, true)", (namespace,))
        if removed:
            cursor.execute(
                "DELETE FROM cairn_memory_vectors WHERE namespace = %s AND scope = %s "
                "AND path = ANY(%s)",
                (namespace, scope, list(removed)),
            )
        cursor.executemany(
            "INSERT INTO cairn_memory_vectors (namespace, scope, path, model, digest, embedding) "  # noqa: S608 - fixed text
            f"VALUES (%s, %s, %s, %s, %s, %s{cast}) "
            "ON CONFLICT (namespace, scope, path) DO UPDATE SET model = EXCLUDED.model, "
            "digest = EXCLUDED.digest, embedding = EXCLUDED.embedding",
            [(namespace, scope, path, model, digest, _encode(vector, kind))
             for path, digest, vector in rows],
        )  # fmt: skip


class DatabaseVectors:
    """The store's view of the shared vectors: per scope, fetch and store (blocking calls,
    made from a worker thread, on a connection of their own)."""

    def __init__(self, connect: Any, namespaces: Mapping[str, str]) -> None:
        self._connect = connect  # () -> psycopg.Connection
        self._namespaces = dict(namespaces)  # scope -> namespace
        self._connection: psycopg.Connection[Any] | None = None

    def _conn(self) -> psycopg.Connection[Any]:
        if self._connection is None or self._connection.closed:
            self._connection = self._connect()
        return self._connection

    def fetch(
        self, scope: str, model: str, dim: int, wanted: Mapping[str, bytes]
    ) -> list[VectorRow]:
        namespace = self._namespaces.get(scope)
        if namespace is None:
            return []
        return fetch_vectors(self._conn(), namespace, scope, model, dim, wanted)

    def store(
        self, scope: str, model: str, rows: Sequence[VectorRow], removed: Sequence[str] = ()
    ) -> None:
        namespace = self._namespaces.get(scope)
        if namespace is not None:
            store_vectors(self._conn(), namespace, scope, model, rows, removed)

    def close(self) -> None:
        if self._connection is not None:
            with contextlib.suppress(Exception):
                self._connection.close()
            self._connection = None
