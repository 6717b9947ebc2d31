"""Full-text search in the database: Recall's fast phase while this machine's index warms up.

A fresh machine (a new container, an empty mirror) must pull every document and build its local
index before the store can rank anything: seconds at 10,000 memories. Meanwhile Recall asks the
database, which keeps each document's words in ``cairn_memory_docs.search`` (a ``tsvector``
kept by a trigger on every write, with a GIN index; see
:mod:`~cairn.memory.store.postgres.schema`):

- the query's words are the local tokenizer's words before stemming (NFKC, lower case, two
  letters or more, English stop words dropped), OR-ed, stemmed by PostgreSQL's ``english``
  configuration (Snowball, as the local index stems), so "deploying" finds "deploy";
- ranked by ``ts_rank`` with the title above the description above the body (weights A, B, D),
  newest first among equals;
- one query per namespace of the memory, each under its row-level security (the transaction
  sets ``cairn.namespace``); tombstones (forgotten, deleted) have no words and never match.

CJK degrades: PostgreSQL's parser keeps a CJK run as one word where the local index makes
bigrams, so a CJK query word only matches a run that begins with it (a prefix match); such a
query may find nothing here until the local index is ready.

Best effort by construction: one connection of its own, opened ahead (:meth:`prepare`), a
statement timeout, and a bounded wait for a search already running (then nothing instead).
"""

from __future__ import annotations

import contextlib
import threading
import time
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.debug_log import get_logger
from cairn.memory.document import MemoryDoc
from cairn.memory.store import tokenizer
from cairn.memory.store.tokenizer import STOP_WORDS, load_pattern, query_tokens

if TYPE_CHECKING:
    import psycopg

    from cairn.memory.store.postgres.mirror import Shard

__all__ = ["DatabaseSearch", "tsquery_text"]

STATEMENT_TIMEOUT_MS = 2_000  # the longest one search runs in the server
_WAIT_S = STATEMENT_TIMEOUT_MS / 1000  # for the search or the preparation running now
_CLOSE_POLL_S = 0.02  # how often that wait looks whether the search was closed meanwhile
MAX_QUERY_WORDS = 64  # distinct words of a query sent (the local index keeps as many tokens)
_log = get_logger("MEMORY_RECALL")

_SEARCH = """
WITH q AS (SELECT to_tsquery('english', %s) AS q)
SELECT path, content, mtime, ts_rank(search, q.q) FROM cairn_memory_docs, q
WHERE namespace = %s AND scope = %s AND content IS NOT NULL AND search @@ q.q
ORDER BY ts_rank(search, q.q) DESC, mtime DESC, path
LIMIT %s
"""


def tsquery_text(query: str) -> str:
    """The ``to_tsquery`` text of ``query``: its words OR-ed ("" when it has none); a CJK word
    matches as a prefix (see the module docstring)."""
    words = [w for w in query_tokens(query, split=tokenizer.words) if w not in STOP_WORDS]
    terms = []
    for word in words[:MAX_QUERY_WORDS]:
        clean = "".join(ch for ch in word if ch.isalnum())  # tsquery syntax never gets in
        if clean:
            terms.append(f"'{clean}':*" if _cjk(clean) else f"'{clean}'")
    return " | ".join(terms)


def _cjk(word: str) -> bool:
    """Whether ``word`` is a CJK bigram of the tokenizer (Han, kana, Hangul)."""
    return unicodedata.name(word[0], "").startswith(("CJK", "HIRAGANA", "KATAKANA", "HANGUL"))


class DatabaseSearch:
    """Searches the namespaces of ``shards`` over a connection of its own (see the module
    docstring); thread-safe, never raises."""

    def __init__(self, connect: Callable[[], psycopg.Connection[Any]], shards: Sequence[Shard]):
        self._connect = connect
        self._shards = list(shards)
        self._lock = threading.Lock()
        self._connection: psycopg.Connection[Any] | None = None
        self._closed = False  # closed: no connection is opened again

    @property
    def cold(self) -> bool:
        """Nothing of these namespaces was ever pulled into this machine's mirror."""
        return all(shard.seq == 0 and not shard.synced for shard in self._shards)

    def prepare(self) -> bool:
        """Load the tokenizer and the memory parser and open the connection now (a fresh
        machine's session start), so the first search only runs its query (loading the
        tokenizer alone takes tens of milliseconds); whether it is ready. Best effort."""
        if not self._lock.acquire(blocking=False):
            return False
        try:
            from cairn.memory.store import parse  # noqa: F401 - loaded now, used by a search

            load_pattern()  # any script's query is then only tokenized
            self._open()
            return True
        except Exception as error:
            _log.debug(f"database search unavailable: {error!r}")
            return False
        finally:
            self._release()

    def search(self, query: str, limit: int) -> list[tuple[MemoryDoc, str]]:
        """The best ``limit`` memories of each namespace for ``query`` with their text, best
        first; empty when the database cannot answer, or the search or preparation running
        now does not end soon, or the search is closed meanwhile (the caller bounds its own
        wait: it runs this in a thread, which a closing process would wait for)."""
        terms = tsquery_text(query)
        if not terms or limit <= 0 or not self._acquire():
            return []
        try:
            return self._search(terms, limit)
        except Exception as error:
            _log.warning(f"database search failed: {error!r}")
            self._drop()
            return []
        finally:
            self._release()

    def _acquire(self) -> bool:
        """The lock, within :data:`_WAIT_S`, unless :meth:`close` is called meanwhile."""
        deadline = time.monotonic() + _WAIT_S
        while not self._closed:
            left = deadline - time.monotonic()
            if self._lock.acquire(timeout=max(0.0, min(_CLOSE_POLL_S, left))):
                return True
            if left <= 0:
                return False
        return False

    def close(self) -> None:
        """Close the connection; never waits: a search or preparation running now (a
        connection being opened to a database that does not answer) closes it as it ends."""
        self._closed = True
        if self._lock.acquire(blocking=False):
            self._drop()
            self._lock.release()

    def _release(self) -> None:
        self._lock.release()
        if self._closed:  # close() may have found the lock taken: drop what was opened
            self.close()

    def _open(self) -> psycopg.Connection[Any]:
        if self._closed:
            raise RuntimeError("the database search is closed")
        connection = self._connection
        if connection is None or connection.closed:
            connection = self._connect()
            connection.execute(f"SET statement_timeout = {STATEMENT_TIMEOUT_MS}")
            connection.commit()
            self._connection = connection
        return connection

    def _search(self, terms: str, limit: int) -> list[tuple[MemoryDoc, str]]:
        from cairn.memory.store.parse import parse_memory_text

        connection = self._open()
        found: list[tuple[float, MemoryDoc, str]] = []
        try:
            for shard in self._shards:
                connection.execute(
                    "SELECT set_config('cairn.namespace', %s, true)", (shard.namespace,)
                )
                rows = connection.execute(
                    _SEARCH, (terms, shard.namespace, shard.scope, limit)
                ).fetchall()
                connection.rollback()  # read only; the next namespace in its own transaction
                for relative, content, mtime, rank in rows:
                    data = bytes(content)
                    text = data.decode("utf-8", "replace")
                    parsed = parse_memory_text(
                        text,
                        path=Path(shard.root) / relative,
                        relative_path=relative,
                        scope=shard.scope,
                        mtime=float(mtime),
                        size=len(data),
                    )
                    if isinstance(parsed, MemoryDoc):
                        found.append((-float(rank), parsed, text))
        finally:
            with contextlib.suppress(Exception):
                connection.rollback()
        found.sort(key=lambda hit: hit[0])  # stable: the project's first among equals
        return [(doc, text) for _, doc, text in found]  # the evidence check reads the text

    def _drop(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.close()
