"""TCP keepalive on cairn's database connections, against a real PostgreSQL on loopback: every
connection the pool, ``connect`` and ``aconnect`` open has libpq's keepalive parameters on its
socket, and a DSN (or a service file) that sets one keeps its own value. (A host that vanishes
without a word cannot be staged on loopback without root; the kernel's part is not tested.)"""

from __future__ import annotations

from pathlib import Path

import pytest
from psycopg.conninfo import conninfo_to_dict, make_conninfo

from cairn.database.connection import Database
from cairn.database.keepalive import KEEPALIVE_PARAMETERS

from ..memory.postgres_helpers import postgres_dsn, postgres_server, socket_keepalive

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
