"""Connections to cairn's PostgreSQL database, and the tenant every transaction speaks for.

:class:`Database` holds a small pool of asynchronous connections (a daemon's turns share them)
and opens plain synchronous ones for blocking callers (migrations, worker threads). Every table
that holds a tenant's rows has a ``tenant`` column and a row-level security policy showing a
transaction only the rows of the tenant its connection names (``cairn.tenant``), as the memory
tables do with their namespace: :meth:`Database.transaction` names it first, so a query that
forgot its ``WHERE tenant = …`` still sees one tenant only.

A pooled connection keeps the tenant it named (``set_config(…, false)``) and names another only
when a transaction is for another tenant (:meth:`Database.name_tenant`): one statement fewer per
transaction. The setting lasts only if the transaction that made it commits, so the pool
believes it only then; a connection that failed, rolled back or came back mid-transaction names
its tenant again next time. Tenant tables are read and written through
:meth:`Database.transaction` (several statements, one transaction) or
:meth:`Database.statements` (pooled connections are in autocommit: each statement its own
transaction), both naming the tenant first.

A pooled connection can die while it waits in the pool (PostgreSQL restarted, the backend was
ended by ``pg_terminate_backend``, a proxy closed it after an idle timeout): the pool checks it
when handing it out, so nobody's statement runs on a dead one. Free on every checkout: a server
that ended a connection has said so (its goodbye, or the end of the stream, waits on the
socket), and an idle connection's server says nothing otherwise. After
:data:`IDLE_CHECK_SECONDS` unused, also a ``SELECT 1`` bounded by :data:`PING_TIMEOUT_SECONDS`
(a connection a network dropped silently). A dead connection is closed and the next one tried,
else a new one opened; a failed ``SELECT 1`` closes every idle one (they went the same way).
Every connection has TCP keepalive (:mod:`cairn.database.keepalive`): one whose database host
vanished without a word fails within about 40 s instead of the kernel's 15 minutes.
A connection lost *during* a statement (:class:`ConnectionLost`) is the caller's to judge: the
statement may have committed just before its answer was lost. Work that may run twice (reads,
and writes that a second run leaves as the first did and answers alike) goes through
:meth:`Database.rerun_if_lost`, which runs it once more on another connection; other writes
fail with it (see :mod:`cairn.recording.store.commits` for the session writes).
"""

from __future__ import annotations

import asyncio
import contextlib
import select
import time
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from cairn.database.keepalive import connect_timeout_option, keepalive_options
from cairn.debug_log import get_logger

if TYPE_CHECKING:
    import psycopg

__all__ = [
    "CONNECT_TIMEOUT_SECONDS",
    "DATABASE_ENV",
    "NO_TENANT",
    "ConnectionLost",
    "Database",
    "DatabaseUnavailable",
    "import_psycopg",
    "redact",
]

DATABASE_ENV = "CAIRN_DATABASE_URL"
CONNECT_TIMEOUT_SECONDS = 5  # a database that does not answer within this is unavailable
# (the default: a DSN's own connect_timeout wins, see cairn.database.keepalive)
POOL_SIZE = 8  # connections a process keeps at most (the daemon's turns take turns on them)
IDLE_CHECK_SECONDS = 30.0  # a pooled connection unused this long answers a SELECT 1 first
PING_TIMEOUT_SECONDS = CONNECT_TIMEOUT_SECONDS  # ... within this, or it is closed
# The tenant of a daemon that serves none: no tenant name can be this (cairn.daemon.tenancy).
NO_TENANT = "(none)"
_log = get_logger("DATABASE")
_T = TypeVar("_T")


class DatabaseUnavailable(RuntimeError):
    """The database cannot be reached now (or the driver is missing); retry later."""


class ConnectionLost(DatabaseUnavailable):
    """The connection was lost under a statement (or the server broke the statement off: a
    deadlock, a shutdown): it may have committed just before its answer was lost."""


def import_psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise DatabaseUnavailable(
            "the PostgreSQL driver is not installed: pip install 'cairn-agent[postgres]' "
            "(psycopg 3)"
        ) from None
    return psycopg


def redact(dsn: str) -> str:
    """``dsn`` without its password, for messages."""
    scheme, sep, rest = dsn.partition("://")
    if not sep or "@" not in rest:
        return dsn if "password" not in dsn else "(a DSN with a password)"
    credentials, _, host = rest.rpartition("@")
    user = credentials.partition(":")[0]
    return f"{scheme}://{user}@{host}"


class Database:
    """One PostgreSQL database: a pool of asynchronous connections and plain ones on demand."""

    def __init__(
        self,
        dsn: str,
        *,
        pool_size: int = POOL_SIZE,
        idle_check_seconds: float = IDLE_CHECK_SECONDS,
    ) -> None:
        self.dsn = dsn
        self.idle_check_seconds = idle_check_seconds
        self._psycopg = import_psycopg()
        self._keepalive = keepalive_options(dsn)  # a host gone silent is noticed
        # Idle pooled connections, with when each was given back (the last one is used first).
        self._idle: list[tuple[psycopg.AsyncConnection[Any], float]] = []
        # The tenant each pooled connection names, once the transaction naming it committed.
        self._tenants: weakref.WeakKeyDictionary[Any, str] = weakref.WeakKeyDictionary()
        self._slots = asyncio.Semaphore(pool_size)
        self._closed = False
        self.round_trips = 0  # transactions and statements sent (the benchmark reports them)
        self.replaced = 0  # dead pooled connections closed at checkout (tests read it)
        self.rerun = 0  # work run again after its connection was lost under it (tests read it)

    @property
    def errors(self) -> type[Exception]:
        """psycopg's base error (connection losses, refused statements)."""
        error: type[Exception] = self._psycopg.Error
        return error

    def _timeout(self) -> dict[str, int]:
        return connect_timeout_option(self.dsn, CONNECT_TIMEOUT_SECONDS)

    def connect(self, **options: Any) -> psycopg.Connection[Any]:
        """A new blocking connection (the caller closes it)."""
        try:
            connection: psycopg.Connection[Any] = self._psycopg.connect(
                self.dsn, **self._timeout(), **self._keepalive, **options
            )
        except self._psycopg.Error as error:
            raise DatabaseUnavailable(f"cannot reach the database: {_first_line(error)}") from None
        return connection

    async def aconnect(self, **options: Any) -> psycopg.AsyncConnection[Any]:
        """A new asynchronous connection outside the pool (a ``LISTEN``er's)."""
        try:
            connection: psycopg.AsyncConnection[Any] = await self._psycopg.AsyncConnection.connect(
                self.dsn, **self._timeout(), **self._keepalive, **options
            )
        except self._psycopg.Error as error:
            raise DatabaseUnavailable(f"cannot reach the database: {_first_line(error)}") from None
        return connection

    @contextlib.asynccontextmanager
    async def connection(self) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection, idle (no transaction open) when handed out and given back."""
        if self._closed:
            raise DatabaseUnavailable("the database connection is closed")
        async with self._slots:
            connection = await self._checkout()
            try:
                yield connection
            except BaseException:
                self._tenants.pop(connection, None)
                await self._discard_or_reset(connection)
                raise
            if connection.closed or connection.broken or self._closed:
                await _close(connection)
            elif connection.info.transaction_status != self._psycopg.pq.TransactionStatus.IDLE:
                self._tenants.pop(connection, None)
                await self._discard_or_reset(connection)
            else:
                self._idle.append((connection, time.monotonic()))

    async def _checkout(self) -> psycopg.AsyncConnection[Any]:
        """A live idle connection (the dead ones closed on the way), else a new one."""
        while self._idle:
            connection, since = self._idle.pop()
            if _ended(connection):
                self.replaced += 1
                await _close(connection)
                continue
            recent = time.monotonic() - since < self.idle_check_seconds
            if recent or await self._answers(connection):
                return connection
            self.replaced += 1 + len(self._idle)  # the others idle as long went the same way
            idle, self._idle = self._idle, []
            for other, _ in idle:
                await _close(other)
        # Autocommit: a lone statement is its own transaction (no BEGIN and COMMIT).
        return await self.aconnect(autocommit=True)

    async def _answers(self, connection: psycopg.AsyncConnection[Any]) -> bool:
        """Whether ``connection`` answers ``SELECT 1`` within :data:`PING_TIMEOUT_SECONDS`;
        closed if not (closing it, not cancelling the query, ends a wait on a dead network)."""
        ping = asyncio.ensure_future(connection.execute("SELECT 1"))
        try:
            await asyncio.wait_for(asyncio.shield(ping), PING_TIMEOUT_SECONDS)
        except BaseException as error:
            await _close(connection)
            ping.cancel()
            with contextlib.suppress(BaseException):
                await ping
            if isinstance(error, (TimeoutError, self._psycopg.Error)):
                return False
            raise
        self.round_trips += 1
        return True

    async def _discard_or_reset(self, connection: psycopg.AsyncConnection[Any]) -> None:
        if connection.closed or connection.broken or self._closed:
            await _close(connection)
            return
        try:
            await connection.rollback()
        except Exception:
            await _close(connection)
        else:
            self._idle.append((connection, time.monotonic()))

    @contextlib.asynccontextmanager
    async def transaction(self, tenant: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """One transaction that sees ``tenant``'s rows only (row-level security); committed
        when the block ends, rolled back if it raises. A lost connection is
        :class:`DatabaseUnavailable`."""
        try:
            # In a pipeline: the BEGIN (and the tenant) go with the first query (one round trip).
            async with self.connection() as connection:
                async with connection.pipeline(), connection.transaction():
                    named = await self.name_tenant(connection, tenant)
                    self.round_trips += 1
                    yield connection
                    status = connection.info.transaction_status
                    failed = status == self._psycopg.pq.TransactionStatus.INERROR
                if named and not failed:  # committed: the connection names it from now on
                    self.named(connection, tenant)
        except self._psycopg.OperationalError as error:
            raise ConnectionLost(f"the database is unavailable: {_first_line(error)}") from None

    @contextlib.asynccontextmanager
    async def statements(self, tenant: str) -> AsyncIterator[psycopg.AsyncConnection[Any]]:
        """A pooled connection naming ``tenant``, outside any transaction: each statement is
        its own transaction, one round trip (a pipeline and a transaction block cost the
        driver several times a lone statement's CPU). For reads, and writes of one statement;
        a connection lost is :class:`ConnectionLost`, one that cannot be made
        :class:`DatabaseUnavailable`."""
        try:
            async with self.connection() as connection:
                if self._tenants.get(connection) != tenant:
                    self._tenants.pop(connection, None)
                    await connection.execute(
                        "SELECT set_config('cairn.tenant', %s, false)", (tenant,)
                    )
                    self._tenants[connection] = tenant  # committed: it was its own transaction
                self.round_trips += 1
                yield connection
        except self._psycopg.OperationalError as error:
            raise ConnectionLost(f"the database is unavailable: {_first_line(error)}") from None

    async def rerun_if_lost(
        self, tenant: str, work: Callable[[psycopg.AsyncConnection[Any]], Awaitable[_T]]
    ) -> _T:
        """``work`` on :meth:`statements`' connection for ``tenant``; once more, on another
        connection, when the first was lost under it (a PostgreSQL restart or failover, a
        backend ended, a proxy's timeout). Only for work that may run twice: reads, and writes
        that a second run, after a first that committed unseen, leaves as they were and answers
        as the first would have. A database that cannot be reached is not tried again (that
        would double the wait for its 503)."""
        try:
            async with self.statements(tenant) as connection:
                return await work(connection)
        except ConnectionLost as lost:
            _log.warning(f"connection lost under a statement ({lost}); once more")
            self.rerun += 1
        async with self.statements(tenant) as connection:
            return await work(connection)

    async def name_tenant(self, connection: psycopg.AsyncConnection[Any], tenant: str) -> bool:
        """Queue naming ``tenant`` on ``connection`` (in its transaction) unless it names it
        already; True when it was queued: the caller records it (:attr:`_tenants`) once that
        transaction committed, never before (a rollback undoes it)."""
        if self._tenants.get(connection) == tenant:
            return False
        self._tenants.pop(connection, None)  # unknown until the naming transaction commits
        await connection.execute("SELECT set_config('cairn.tenant', %s, false)", (tenant,))
        return True

    def named(self, connection: psycopg.AsyncConnection[Any], tenant: str) -> None:
        """The transaction that named ``tenant`` on ``connection`` committed."""
        self._tenants[connection] = tenant

    async def aclose(self) -> None:
        self._closed = True
        idle, self._idle = self._idle, []
        for connection, _ in idle:
            await _close(connection)


def _ended(connection: psycopg.AsyncConnection[Any]) -> bool:
    """Whether an idle connection is over, without a round trip: closed, broken, or its socket
    has something to read (a server speaks to an idle connection only to end it)."""
    if connection.closed or connection.broken:
        return True
    try:
        poll = select.poll()  # not select(): a daemon's descriptors may pass FD_SETSIZE
        poll.register(connection.fileno(), select.POLLIN)
        return bool(poll.poll(0))
    except (OSError, ValueError):
        return True


async def _close(connection: psycopg.AsyncConnection[Any]) -> None:
    with contextlib.suppress(Exception):
        await connection.close()


def _first_line(error: BaseException) -> str:
    text = str(error).strip()
    return text.splitlines()[0] if text else type(error).__name__
