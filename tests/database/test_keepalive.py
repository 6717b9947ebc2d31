"""TCP keepalive on cairn's database connections, against a real PostgreSQL on loopback: every
connection the pool, ``connect`` and ``aconnect`` open has libpq's keepalive parameters on its
socket, and a DSN (or a service file) that sets one keeps its own value. (A host that vanishes
without a word cannot be staged on loopback without root; the kernel's part is not tested.)
The connect timeout likewise: a DSN's ``connect_timeout`` wins over cairn's default."""

from __future__ import annotations

import asyncio
from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cairn.database import connection as connection_module
from cairn.database.connection import Database, DatabaseUnavailable
from cairn.database.keepalive import KEEPALIVE_PARAMETERS, connect_timeout_option

from ..memory.postgres_helpers import (
    SilentDatabase,
    postgres_dsn,
    postgres_server,
    socket_keepalive,
)
from ..polling import DEADLINE_SECONDS

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


async def test_every_connection_the_database_opens_carries_the_keepalive_options(
    postgres_dsn: str,
) -> None:
    database = Database(postgres_dsn)
    try:
        async with database.connection() as pooled:
            assert socket_keepalive(pooled) == KEEPALIVE_PARAMETERS
        async with await database.aconnect() as listener:
            assert socket_keepalive(listener) == KEEPALIVE_PARAMETERS
        with database.connect() as blocking:
            assert socket_keepalive(blocking) == KEEPALIVE_PARAMETERS
    finally:
        await database.aclose()


async def test_a_dsns_own_keepalive_values_win(postgres_dsn: str) -> None:
    dsn = make_conninfo(postgres_dsn, keepalives_idle=7, tcp_user_timeout=12345)
    database = Database(dsn)
    try:
        async with database.connection() as pooled:
            found = socket_keepalive(pooled)
    finally:
        await database.aclose()

    assert found == {**KEEPALIVE_PARAMETERS, "keepalives_idle": 7, "tcp_user_timeout": 12345}


def test_a_service_files_keepalive_values_win(
    postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """libpq lets a connection's parameters override its service file's: a DSN naming a
    service gets none of cairn's."""
    given = conninfo_to_dict(postgres_dsn)
    services = tmp_path / "pg_service.conf"
    services.write_text(f"[cairn]\nhost={given['host']}\nport={given['port']}\nkeepalives_idle=7\n")
    monkeypatch.setenv("PGSERVICEFILE", str(services))
    dsn = make_conninfo(service="cairn", dbname=given["dbname"], user=given["user"])

    with Database(dsn).connect() as connection:
        assert socket_keepalive(connection)["keepalives_idle"] == 7


async def test_a_dsns_own_connect_timeout_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    """Regression: cairn's connect timeout overrode the DSN's ``connect_timeout``. A database
    that accepts and never answers: ``connect`` and the pool (``aconnect``), at once, give up
    at the DSN's 2 s, not at the default (an hour here)."""
    monkeypatch.setattr(connection_module, "CONNECT_TIMEOUT_SECONDS", 3600)
    silent = SilentDatabase()
    database = Database(f"postgresql://nobody@127.0.0.1:{silent.port}/cairn?connect_timeout=2")

    async def pooled() -> None:
        async with database.connection():
            pass

    try:
        blocking, pool = await asyncio.wait_for(  # a hang guard: the default is an hour here
            asyncio.gather(asyncio.to_thread(database.connect), pooled(), return_exceptions=True),
            DEADLINE_SECONDS,
        )
    finally:
        silent.close()
        await database.aclose()

    assert isinstance(blocking, DatabaseUnavailable), blocking
    assert isinstance(pool, DatabaseUnavailable), pool
    assert "cannot reach the database" in str(pool)


def test_the_connect_timeout_is_cairns_only_where_the_user_named_none(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv("PGCONNECT_TIMEOUT", raising=False)
    assert connect_timeout_option("postgresql://cairn@db/cairn", 10) == {"connect_timeout": 10}
    assert connect_timeout_option("postgresql://cairn@db/cairn?connect_timeout=3", 10) == {}
    assert connect_timeout_option("host=db dbname=cairn connect_timeout=0", 10) == {}  # (forever)
    assert connect_timeout_option("not a dsn ===", 10) == {"connect_timeout": 10}

    monkeypatch.setenv("PGCONNECT_TIMEOUT", "4")  # libpq reads it when no parameter is given

    assert connect_timeout_option("postgresql://cairn@db/cairn", 10) == {}
