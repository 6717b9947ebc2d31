"""The tenant a pooled connection names (#31): named once per connection, named again whenever
a transaction is for another tenant or the transaction that named it did not commit, so row-level
security always shows a transaction its own tenant's rows only. Against a real PostgreSQL."""

from __future__ import annotations

from collections.abc import AsyncIterator

import pytest

from cairn.daemon.replica import replica_schema
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
