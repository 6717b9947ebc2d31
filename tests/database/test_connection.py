"""The pool of connections to cairn's database (#31), against a real PostgreSQL. The tenant a
pooled connection names: named once per connection, named again whenever a transaction is for
another tenant or the transaction that named it did not commit, so row-level security always
shows a transaction its own tenant's rows only. A pooled connection that died while idle is
replaced before anyone's statement runs on it."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cairn.daemon.replica import replica_schema
from cairn.database import connection as connection_module
from cairn.database.connection import Database
from cairn.database.migrations import migrate

from ..memory.postgres_helpers import postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@pytest.fixture
async def database(postgres_dsn: str) -> AsyncIterator[Database]:
    """One pooled connection, so every transaction below reuses it; a session for each of two
    tenants."""
    database = Database(postgres_dsn, pool_size=1)
    with database.connect() as connection:
        list(migrate(connection, replica_schema()))
    for tenant in ("acme", "globex"):
        async with database.transaction(tenant) as connection:
            await connection.execute(
                "INSERT INTO cairn_sessions (tenant, project, session_id, cwd) "
                "VALUES (%s, 'p', %s, '/work')",
                (tenant, f"{tenant}-session"),
            )
    yield database
    await database.aclose()


async def visible(database: Database, tenant: str) -> list[str]:
    async with database.transaction(tenant) as connection:
        cursor = await connection.execute("SELECT session_id FROM cairn_sessions")
        return [row[0] for row in await cursor.fetchall()]


async def test_one_pooled_connection_shows_each_transaction_its_own_tenant_only(
    database: Database,
) -> None:
    assert await visible(database, "acme") == ["acme-session"]
    assert await visible(database, "acme") == ["acme-session"]
    assert await visible(database, "globex") == ["globex-session"]
    assert await visible(database, "acme") == ["acme-session"]


async def test_a_tenant_named_in_a_rolled_back_transaction_is_named_again(
    database: Database,
) -> None:
    """The naming of a transaction that rolled back is undone with it: the pool must not
    believe the connection names that tenant (it still names the one before)."""
    assert await visible(database, "acme") == ["acme-session"]
    with pytest.raises(RuntimeError):
        async with database.transaction("globex") as connection:
            await connection.execute("SELECT 1")
            raise RuntimeError("the caller gave up")

    assert await visible(database, "globex") == ["globex-session"]


async def backend(database: Database, tenant: str = "acme") -> int:
    """The server process of the pooled connection a statement gets."""
    async with database.statements(tenant) as connection:
        cursor = await connection.execute("SELECT pg_backend_pid()")
        row = await cursor.fetchone()
    assert row is not None
    return int(row[0])


async def test_a_pooled_connection_ended_while_idle_is_replaced_before_a_statement_runs(
    database: Database, postgres_dsn: str
) -> None:
    """Regression: the pool handed out a connection whose server process had ended (a
    PostgreSQL restart, ``pg_terminate_backend``, a proxy's idle timeout) and the statement
    failed on it although the database was up."""
    before = await backend(database)
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:
        admin.execute("SELECT pg_terminate_backend(%s, 10000)", (before,))

    after = await backend(database)

    assert after != before
    assert database.replaced == 1
    assert await visible(database, "acme") == ["acme-session"]  # named again on the new one


async def test_a_connection_idle_past_the_check_that_does_not_answer_is_replaced(
    postgres_dsn: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A connection a network dropped without a word (its socket open, nothing comes back):
    unused past ``idle_check_seconds``, it gets a ``SELECT 1``, is closed when that is not
    answered within the ping timeout, and a new one serves the statement."""
    monkeypatch.setattr(connection_module, "PING_TIMEOUT_SECONDS", 0.5)
    conninfo = conninfo_to_dict(postgres_dsn)
    async with Relay(str(conninfo["host"]), int(conninfo["port"])) as relay:
        database = Database(make_conninfo(postgres_dsn, port=relay.port), idle_check_seconds=0)
        try:
            before = await backend(database)
            relay.silence()  # the connection made so far gets no answer any more

            after = await backend(database)
        finally:
            await database.aclose()

    assert after != before
    assert database.replaced == 1


class Relay:
    """A TCP relay to PostgreSQL on a loopback port: :meth:`silence` stops passing the bytes
    of the connections open now, both ways, leaving their sockets open (a dropped network)."""

    def __init__(self, host: str, port: int) -> None:
        self.target = (host, port)
        self.port = 0
        self._silenced: set[int] = set()
        self._open: set[int] = set()
        self._server: asyncio.Server | None = None

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        self.port = int(self._server.sockets[0].getsockname()[1])
        return self

    async def __aexit__(self, *exc: object) -> None:
        assert self._server is not None
        self._server.close()

    def silence(self) -> None:
        self._silenced |= self._open

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        number = id(writer)
        self._open.add(number)
        upstream_reader, upstream_writer = await asyncio.open_connection(*self.target)

        async def pipe(source: asyncio.StreamReader, sink: asyncio.StreamWriter) -> None:
            with contextlib.suppress(OSError):
                while data := await source.read(65536):
                    if number in self._silenced:
                        continue  # swallowed: nothing passes, nothing closes
                    sink.write(data)
                    await sink.drain()
            sink.close()

        await asyncio.gather(pipe(reader, upstream_writer), pipe(upstream_reader, writer))
