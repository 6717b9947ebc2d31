"""The PostgreSQL memory backend: one memory for many processes, machines and tenants.

The database holds the memory of a namespace (see :mod:`~cairn.memory.store.postgres.schema`);
this machine reads it from a mirror folder (:mod:`~cairn.memory.store.postgres.mirror`), so
Recall, the prompt section and the memory agents work exactly as with files, and the in-process
index is fed file by file from the database's changes:

- **Writes.** Every locked memory write section (:func:`cairn.memory.store.locks.hold_roots`)
  is one transaction: it takes the namespace's advisory lock (``pg_advisory_xact_lock``, held
  until the transaction ends, released by the server when a process dies), catches the mirror
  up, lets the section write its files, then stores every file it changed (documents with their
  parsed fields, ``MEMORY.md``, the audit lines, the trash, the state files) and commits. A
  process killed in the middle leaves the previous state.
- **Reads.** A feed thread ``LISTEN``\\ s for the namespace's commits and pulls each change into
  the mirror as it happens; when no notification comes, it asks anyway every
  ``memory.postgres.pollSeconds`` (a bounded fallback for a missed one). The store notices the
  mirror's changed files (inotify) and re-indexes only those.
- **Dream's lock** is a session advisory lock on its own connection, held while the Dream runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import select
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.database import connect_timeout_option, keepalive_options
from cairn.debug_log import get_logger
from cairn.memory.paths import MemoryRoots
from cairn.memory.store.backend import MemoryBackendError
from cairn.memory.store.postgres.mirror import Shard, pull, push

if TYPE_CHECKING:
    import psycopg

    from cairn.memory.store.postgres.search import DatabaseSearch

__all__ = [
    "DSN_ENV",
    "NAMESPACE_ENV",
    "TENANT_PREFIX",
    "ConnectStopped",
    "MemoryBackendError",
    "PostgresBackend",
    "PostgresDreamLock",
    "mirror_folder",
    "namespace_key",
]

DSN_ENV = "CAIRN_MEMORY_DSN"
NAMESPACE_ENV = "CAIRN_MEMORY_NAMESPACE"
# Every daemon tenant's namespace starts with this, and no configured namespace may: a project
# configured with `acme/proj` must never read tenant acme's memory (#24).
TENANT_PREFIX = "tenants/"
LOCK_TIMEOUT_SECONDS = 30  # the longest a write waits for the namespace's lock
CONNECT_TIMEOUT_SECONDS = 10  # the default: a DSN's own connect_timeout wins
_CONNECT_POLL_SECONDS = 0.02  # how often a pull's connect under way looks at the stop event
SEARCH_APPLICATION_NAME = "cairn memory search"  # its connection in pg_stat_activity
_MIRROR_FOLDER = "postgres"  # under the memory base: one mirror per (database, namespace)
_DREAM_LOCK_SALT = "dream"
_log = get_logger("MEMORY")


def namespace_key(namespace: str, salt: str = "") -> int:
    """A stable signed 64-bit advisory-lock key for a namespace."""
    digest = hashlib.sha256(f"cairn-memory\0{salt}\0{namespace}".encode()).digest()
    return int.from_bytes(digest[:8], "big", signed=True)


def mirror_folder(base: Path, dsn: str, namespace: str) -> Path:
    """This machine's mirror of a namespace (its project memory is ``<mirror>/memory``)."""
    digest = hashlib.sha256(f"{dsn}\0{namespace}".encode()).hexdigest()[:16]
    return base / _MIRROR_FOLDER / digest


def channel_name(namespace: str) -> str:
    """The LISTEN/NOTIFY channel of a namespace (a digest: names never leak into pg_listener)."""
    return "cairn_memory_" + hashlib.sha256(namespace.encode()).hexdigest()[:24]


class ConnectStopped(Exception):
    """A catch-up pull gave up opening its connection: the process is closing
    (:meth:`PostgresBackend.interrupt`); nothing was pulled."""


def _import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise MemoryBackendError(
            'memory.backend is "postgres" but the PostgreSQL driver is not installed: '
            "pip install 'cairn-agent[postgres]' (psycopg 3)"
        ) from None
    return psycopg


@dataclass(frozen=True)
class PostgresConfig:
    dsn: str
    namespace: str
    user_namespace: str  # "" keeps user memory in files on this machine
    poll_seconds: float

    def for_tenant(self, tenant: str) -> PostgresConfig:
        """A daemon tenant's namespaces: ``tenants/<tenant>/<namespace>`` (its user memory
        too), a prefix no configured namespace has (:func:`backend_config`)."""
        prefix = f"{TENANT_PREFIX}{tenant}/"
        user = f"{prefix}{self.user_namespace}" if self.user_namespace else ""
        return replace(self, namespace=f"{prefix}{self.namespace}", user_namespace=user)


class PostgresBackend:
    """Memory kept in PostgreSQL, read through a local mirror (see the module docstring)."""

    name = "postgres"

    def __init__(self, config: PostgresConfig, *, base: Path, user_root: Path) -> None:
        self.config = config
        mirror = mirror_folder(base, config.dsn, config.namespace)
        project = Shard(config.namespace, "project", mirror / "memory", state_dir=mirror)
        self.shards: list[Shard] = [project]
        if config.user_namespace:
            user_root = mirror_folder(base, config.dsn, config.user_namespace) / "memories"
            self.shards.append(Shard(config.user_namespace, "user", user_root))
        self.roots = MemoryRoots(project=project.root, user=user_root, state_dir=mirror)
        self._psycopg = _import_psycopg()
        self._keepalive = keepalive_options(config.dsn)  # a host gone silent is noticed
        # Two connections: one for write sections (serialized by the mirror's local locks),
        # one for catching up outside them (the feed, the first read).
        self._connection: psycopg.Connection[Any] | None = None
        self._reader: psycopg.Connection[Any] | None = None
        self._read_lock = threading.Lock()
        # Set at shutdown (interrupt, close): a catch-up pull gives up its wait for the
        # mirror's lock, and none starts after (the next process catches up).
        self._stopping = threading.Event()
        self._sections = 0  # write sections open now (each has caught the mirror up)
        self._pulled = False
        self._feed: _Feed | None = None
        self._search: DatabaseSearch | None = None
        for shard in self.shards:
            shard.load()

    # --- connections --------------------------------------------------------------------------

    def connect(self, **options: Any) -> psycopg.Connection[Any]:
        try:
            return self._psycopg.connect(
                self.config.dsn,
                **connect_timeout_option(self.config.dsn, CONNECT_TIMEOUT_SECONDS),
                **self._keepalive,
                **options,
            )
        except self._psycopg.Error as error:
            raise MemoryBackendError(f"cannot reach the memory database: {error}") from None

    def _conn(self) -> psycopg.Connection[Any]:
        if self._connection is None or self._connection.closed:
            self._connection = self._open()
        return self._connection

    def _read_conn(self, stop: threading.Event | None = None) -> psycopg.Connection[Any]:
        """The pulls' connection; ``stop``: opened in a thread of its own that is left behind
        once ``stop`` is set (:class:`ConnectStopped`), as a closing process must not wait for
        a database that does not answer (the connect timeout, 10 s)."""
        if self._reader is None or self._reader.closed:
            reader = self._open() if stop is None else _abandonable(self._open, stop)
            # One snapshot per pull: under READ COMMITTED each query saw its own, so a write
            # committed between two of a pull's queries could be counted as pulled, half-read.
            reader.isolation_level = self._psycopg.IsolationLevel.REPEATABLE_READ
            self._reader = reader
        return self._reader

    def _open(self) -> psycopg.Connection[Any]:
        from cairn.memory.store.postgres.schema import ensure_schema

        connection = self.connect()
        ensure_schema(connection)
        return connection

    # --- sections: one transaction per locked write ---------------------------------------------

    def shards_of(self, roots: Sequence[Path]) -> list[Shard]:
        wanted = {os.path.abspath(root) for root in roots}
        return [shard for shard in self.shards if os.path.abspath(shard.root) in wanted]

    @contextlib.contextmanager
    def section(self, roots: Sequence[Path]) -> Iterator[None]:
        """The write transaction of a locked section over ``roots`` (the local locks held)."""
        shards = self.shards_of(roots)
        if not shards:
            yield
            return
        begun = self.begin(shards)
        try:
            yield
        except BaseException:
            self.rollback(shards)
            raise
        self.commit(shards, begun)

    def begin(self, shards: Sequence[Shard]) -> dict[str, int]:
        """Lock the namespaces, catch the mirror up; the write's ``seq`` per namespace."""
        connection = self._conn()
        seqs: dict[str, int] = {}
        self._sections += 1
        try:
            connection.execute(f"SET lock_timeout = '{LOCK_TIMEOUT_SECONDS}s'")
            for namespace in sorted({shard.namespace for shard in shards}):
                seqs[namespace] = self._lock_namespace(connection, namespace)
            with connection.cursor() as cursor:
                for shard in shards:
                    _use(cursor, shard.namespace)
                    pull(cursor, shard)
        except BaseException:
            self._sections -= 1
            with contextlib.suppress(Exception):
                connection.rollback()
            raise
        return seqs

    def _lock_namespace(self, connection: psycopg.Connection[Any], namespace: str) -> int:
        with connection.cursor() as cursor:
            _use(cursor, namespace)
            try:
                cursor.execute("SELECT pg_advisory_xact_lock(%s)", (namespace_key(namespace),))
            except self._psycopg.errors.LockNotAvailable:
                from cairn.memory.store.locks import MemoryBusy

                raise MemoryBusy(Path(f"postgres:{namespace}")) from None
            cursor.execute(
                "INSERT INTO cairn_memory_namespaces (namespace) VALUES (%s) "
                "ON CONFLICT (namespace) DO NOTHING",
                (namespace,),
            )
            cursor.execute(
                "UPDATE cairn_memory_namespaces SET seq = seq + 1 WHERE namespace = %s "
                "RETURNING seq",
                (namespace,),
            )
            row = cursor.fetchone()
        assert row is not None
        return int(row[0])

    def commit(self, shards: Sequence[Shard], seqs: Mapping[str, int]) -> None:
        self._sections -= 1
        connection = self._conn()
        wrote: set[str] = set()
        try:
            with connection.cursor() as cursor:
                for shard in shards:
                    _use(cursor, shard.namespace)
                    if push(cursor, shard, seqs[shard.namespace]):
                        wrote.add(shard.namespace)
                for namespace in wrote:
                    _use(cursor, namespace)
                    cursor.execute(
                        "SELECT pg_notify(%s, %s)",
                        (channel_name(namespace), str(seqs[namespace])),
                    )
            if wrote:
                connection.commit()
            else:
                connection.rollback()  # nothing changed: no sequence number used
        except BaseException:
            self.rollback(shards)
            raise
        for shard in shards:
            shard.save()

    def rollback(self, shards: Sequence[Shard]) -> None:
        """Undo a failed section: the transaction, and its files in the mirror."""
        self._sections = max(self._sections - 1, 0)
        if self._connection is not None and not self._connection.closed:
            with contextlib.suppress(Exception):
                self._connection.rollback()
        for shard in shards:
            _restore(shard)
        with contextlib.suppress(Exception), self._read_lock:  # one snapshot (see _read_conn)
            self._pull(shards, self._read_conn())  # the caller holds the local locks already

    # --- reads ---------------------------------------------------------------------------------

    def pull_now(self, shards: Sequence[Shard] | None = None) -> list[str]:
        """Catch the mirror up with the database (local locks: the caller's, or taken here);
        :class:`~cairn.memory.store.locks.LockWaitStopped` or :class:`ConnectStopped` when
        :meth:`interrupt` stopped it before it began (its wait for the mirror's lock or for its
        connection included)."""
        from cairn.memory.store.locks import hold_local_roots

        targets = list(shards if shards is not None else self.shards)
        roots = [shard.root for shard in targets]
        # The root locks first, as a section holds them when its rollback takes the read lock:
        # the other order stalled a failed section until this pull gave up waiting.
        with hold_local_roots(roots, stop=self._stopping), self._read_lock:
            return self._pull(targets, self._read_conn(self._stopping))

    def _pull(self, targets: Sequence[Shard], connection: psycopg.Connection[Any]) -> list[str]:
        changed: list[str] = []
        try:
            with connection.cursor() as cursor:
                for shard in targets:
                    _use(cursor, shard.namespace)
                    changed += pull(cursor, shard)
            connection.rollback()  # read only
        except BaseException:
            with contextlib.suppress(Exception):
                connection.rollback()
            raise
        for shard in targets:
            shard.save()
        return changed

    def ensure_pulled(self) -> None:
        """Before the store's first refresh: the mirror as the database holds it, and the feed
        that keeps it so. Best effort: an unreachable database leaves the mirror as it was, and
        so does a process closing (:meth:`interrupt`), even one waiting for the mirror's lock."""
        from cairn.memory.store.locks import LockWaitStopped

        if self._pulled or self._stopping.is_set():
            return
        self._pulled = True
        try:
            if not self._sections:  # a section caught the mirror up (and holds its locks)
                self.pull_now()
        except (LockWaitStopped, ConnectStopped):
            _log.debug("catching the memory mirror up: given up, the process is closing")
            return
        except Exception as error:
            _log.warning(f"memory database not reachable, using the local mirror: {error}")
        if self._feed is None and not self._stopping.is_set():
            self._feed = _Feed(self)
            self._feed.start()

    def interrupt(self) -> None:
        """At shutdown, before :meth:`close`: a catch-up pull waiting for the mirror's lock or
        for its connection (the warm-up's, the feed's) gives up now, and none starts after. A
        write section and a pull under way are not interrupted: the mirror is never left
        half-pulled."""
        self._stopping.set()

    def warm_up_search(self) -> DatabaseSearch:
        """Recall's fast phase from the database while the mirror and its index warm up
        (:mod:`~cairn.memory.store.postgres.search`)."""
        if self._search is None:
            from cairn.memory.store.postgres.search import DatabaseSearch

            def connect() -> psycopg.Connection[Any]:
                from cairn.memory.store.postgres.schema import ensure_schema

                connection = self.connect(application_name=SEARCH_APPLICATION_NAME)
                ensure_schema(connection)
                return connection

            self._search = DatabaseSearch(connect, self.shards)
        return self._search

    # --- Dream's lock --------------------------------------------------------------------------

    def vector_sync(self) -> Any:
        """The shared vectors of semantic candidates (``cairn_memory_vectors``)."""
        from cairn.memory.store.postgres.vectors import DatabaseVectors

        def connect() -> psycopg.Connection[Any]:
            connection = self.connect(autocommit=True)
            ensure_vector_table_quietly(connection)
            return connection

        return DatabaseVectors(connect, {shard.scope: shard.namespace for shard in self.shards})

    def dream_lock(self) -> PostgresDreamLock:
        return PostgresDreamLock(self)

    def close(self) -> None:
        from cairn.memory.store.locks import stop_serving_from_database

        stop_serving_from_database([shard.root for shard in self.shards], self)
        self.interrupt()  # the feed's pull waiting for the mirror's lock ends now
        if self._feed is not None:
            self._feed.stop()
            self._feed = None
        if self._search is not None:
            self._search.close()
        for shard in self.shards:
            shard.close()
        for connection in (self._connection, self._reader):
            if connection is not None:
                with contextlib.suppress(Exception):
                    connection.close()
        self._connection = self._reader = None


def _abandonable(
    open_connection: Callable[[], psycopg.Connection[Any]], stop: threading.Event
) -> psycopg.Connection[Any]:
    """``open_connection()`` in a daemon thread, waited for until ``stop`` is set: then
    :class:`ConnectStopped`, and the connection, should it still open, is closed by its
    thread (nothing, not even the interpreter's exit, waits for that thread)."""
    result: list[psycopg.Connection[Any]] = []
    failure: list[BaseException] = []
    done, given_up = threading.Event(), threading.Event()
    lock = threading.Lock()  # the hand-over: the connection taken by the waiter, or closed

    def run() -> None:
        try:
            connection = open_connection()
        except BaseException as error:
            with lock:
                failure.append(error)
                done.set()
            return
        with lock:
            if not given_up.is_set():
                result.append(connection)
                done.set()
                return
        with contextlib.suppress(Exception):
            connection.close()

    threading.Thread(target=run, name="cairn-memory-connect", daemon=True).start()
    while not done.wait(_CONNECT_POLL_SECONDS):
        if stop.is_set():
            with lock:
                if not done.is_set():
                    given_up.set()
                    raise ConnectStopped("the memory database's connection was given up")
    if failure:
        raise failure[0]
    return result[0]


def ensure_vector_table_quietly(connection: psycopg.Connection[Any]) -> None:
    from cairn.memory.store.postgres.vectors import ensure_vector_table

    ensure_vector_table(connection)


def _use(cursor: psycopg.Cursor[Any], namespace: str) -> None:
    """The namespace the rest of the transaction sees (row-level security reads it)."""
    cursor.execute("SELECT set_config('cairn.namespace', %s, true)", (namespace,))


def _restore(shard: Shard) -> None:
    """Undo a failed section's files in the mirror: what it wrote goes, and the next pull
    (from the start) writes back every file as the database holds it."""
    from cairn.memory.store.postgres.mirror import local_changes, path_of

    changed, gone = local_changes(shard)
    for key in changed:
        path = path_of(shard, key)
        if path is not None:
            with contextlib.suppress(FileNotFoundError):
                path.unlink()
    for key in [*changed, *gone]:
        shard.drop(key)
    if changed or gone:
        shard.seq = 0


class PostgresDreamLock:
    """Dream's cross-process lock: a session advisory lock on a connection of its own, so the
    server releases it when this process dies (the file backend's ``consolidation.lock``)."""

    def __init__(self, backend: PostgresBackend) -> None:
        self._backend = backend
        self._key = namespace_key(backend.config.namespace, _DREAM_LOCK_SALT)
        self._connection: psycopg.Connection[Any] | None = None

    def holder(self, now: float, *, clean: bool = True, ours_is_stale: bool = False) -> int | None:
        """The server process id holding the lock for another cairn process, or None."""
        if self._connection is not None and not ours_is_stale:
            return os.getpid()
        with self._backend.connect(autocommit=True) as connection:
            row = connection.execute(
                "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted "
                "AND classid = %s AND objid = %s AND objsubid = 1",
                ((self._key >> 32) & 0xFFFF_FFFF, self._key & 0xFFFF_FFFF),
            ).fetchone()
        return int(row[0]) if row is not None else None

    def try_acquire(self, now: float, *, ours_is_stale: bool = False) -> bool:
        if self._connection is not None:
            return False
        connection = self._backend.connect(autocommit=True)
        row = connection.execute("SELECT pg_try_advisory_lock(%s)", (self._key,)).fetchone()
        if row is None or not row[0]:
            connection.close()
            return False
        self._connection = connection
        return True

    def release(self) -> None:
        connection, self._connection = self._connection, None
        if connection is not None:
            with contextlib.suppress(Exception):
                connection.execute("SELECT pg_advisory_unlock(%s)", (self._key,))
            with contextlib.suppress(Exception):
                connection.close()


class _Feed(threading.Thread):
    """LISTEN for the namespaces' commits; pull each into the mirror (poll when silent)."""

    def __init__(self, backend: PostgresBackend) -> None:
        super().__init__(name="cairn-memory-feed", daemon=True)
        self._backend = backend
        self._stopped = threading.Event()
        # stop() writes to it: a wait for notifications ends at once (a cancel request does
        # not end psycopg's notifies(), which then ran out its timeout at every shutdown)
        self._wake, self._waker = socket.socketpair()

    def stop(self) -> None:
        self._stopped.set()
        with contextlib.suppress(OSError):
            self._waker.send(b"\0")
        self.join(timeout=5)
        if not self.is_alive():
            self._wake.close()
            self._waker.close()

    def run(self) -> None:
        poll = max(self._backend.config.poll_seconds, 0.1)
        while not self._stopped.is_set():
            try:
                self._listen(poll)
            except Exception as error:  # a dropped connection: poll until it comes back
                _log.debug(f"memory change feed: {error!r}; retrying")
                if self._stopped.wait(poll):
                    return
                self._pull()

    def _listen(self, poll: float) -> None:
        backend = self._backend
        with backend.connect(autocommit=True) as connection:
            for namespace in {shard.namespace for shard in backend.shards}:
                connection.execute(f"LISTEN {channel_name(namespace)}")
            self._pull()  # what committed before the LISTEN
            last = time.monotonic()
            while not self._stopped.is_set():
                left = max(poll - (time.monotonic() - last), 0.0)
                if self._notified(connection, left) or time.monotonic() - last >= poll:
                    if self._stopped.is_set():
                        return
                    self._pull()
                    last = time.monotonic()

    def _notified(self, connection: psycopg.Connection[Any], timeout: float) -> bool:
        """Wait up to ``timeout`` s for notifications (all taken at once) or :meth:`stop`."""
        wake = self._wake.fileno()
        ready, _, _ = select.select([connection.fileno(), wake], [], [], timeout)
        if not ready or wake in ready:
            return False
        return any(True for _ in connection.notifies(timeout=0))  # what arrived, drained

    def _pull(self) -> None:
        try:
            self._backend.pull_now()
        except Exception as error:
            _log.debug(f"memory change feed: pull failed: {error!r}")


def backend_config(
    settings: Any, environ: Mapping[str, str], default_namespace: Callable[[], str]
) -> PostgresConfig:
    """The backend's settings: ``memory.postgres`` with the environment's overrides."""
    postgres = settings.memory.postgres
    dsn = environ.get(DSN_ENV, "").strip() or postgres.dsn.strip()
    if not dsn:
        raise MemoryBackendError(
            'memory.backend is "postgres" but no database is configured: set '
            f"memory.postgres.dsn in settings.json or {DSN_ENV}"
        )
    namespace = environ.get(NAMESPACE_ENV, "").strip() or postgres.namespace.strip()
    user_namespace = postgres.user_namespace.strip()
    for name in (namespace, user_namespace):
        if name.startswith(TENANT_PREFIX):
            raise MemoryBackendError(
                f"the memory namespace {name!r} starts with {TENANT_PREFIX!r}, which is reserved "
                "for the tenants of `cairn serve --tenant-header`: choose another name"
            )
    return PostgresConfig(
        dsn=dsn,
        namespace=namespace or default_namespace(),
        user_namespace=user_namespace,
        poll_seconds=postgres.poll_seconds,
    )
