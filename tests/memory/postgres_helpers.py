"""A real PostgreSQL for the memory tests: one throw-away cluster per test run, a database per test.

The server is started by the tests themselves (``initdb`` + ``pg_ctl`` in a temp dir, as
``nobody`` when the tests run as root, on a free loopback port); without the server binaries the
PostgreSQL tests are skipped with the reason (``.ci/system-packages`` installs them in CI).
Each test's database is owned by an ordinary role, so row-level security applies to cairn's
connections as it would in production (a superuser would bypass it).
"""

from __future__ import annotations

import contextlib
import itertools
import socket
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest

from cairn.testing.postgres import PostgresServer, find_postgres_bin

from ..conftest import POSTGRES_GROUP

APP_ROLE = "cairn_app"  # what cairn connects as: not a superuser, owns its database
_numbers = itertools.count(1)

# The "postgres" parameter of a fixture that asks for the server only then
# (``request.getfixturevalue``), which tests/conftest.py cannot see: it carries the marks the
# conftest gives every test using ``postgres_server`` (slow, and the server's xdist group).
ON_POSTGRES = pytest.param(
    "postgres", marks=[pytest.mark.slow, pytest.mark.xdist_group(POSTGRES_GROUP)]
)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    if find_postgres_bin() is None:
        pytest.skip("PostgreSQL is not installed (.ci/system-packages installs it)")
    with PostgresServer() as server:
        server.create_role(APP_ROLE)
        yield server


@pytest.fixture
def postgres_dsn(postgres_server: PostgresServer) -> str:
    """A fresh database owned by the ordinary role; the DSN cairn connects with."""
    return postgres_server.create_database(f"memory_{next(_numbers)}", owner=APP_ROLE)


def end_connections(dsn: str) -> int:
    """``pg_terminate_backend`` on every other connection to ``dsn``'s database (as a
    PostgreSQL restart or a proxy's idle timeout ends them), waiting until each has ended; how
    many there were."""
    import psycopg  # only the tests that end connections need the driver

    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM "
            "pg_stat_activity WHERE datname = current_database() AND pid <> pg_backend_pid()"
        ).fetchone()
    assert row is not None
    return int(row[0])


def socket_keepalive(connection: Any) -> dict[str, int]:
    """The keepalive settings the kernel holds for ``connection``'s socket, by libpq's names."""
    with socket.fromfd(connection.fileno(), socket.AF_INET, socket.SOCK_STREAM) as sock:
        return {
            "keepalives": sock.getsockopt(socket.SOL_SOCKET, socket.SO_KEEPALIVE),
            "keepalives_idle": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPIDLE),
            "keepalives_interval": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPINTVL),
            "keepalives_count": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_KEEPCNT),
            "tcp_user_timeout": sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_USER_TIMEOUT),
        }


class SilentDatabase:
    """A server that accepts connections and never answers (a database that hangs); it notes
    when each connection was given up by its client."""

    def __init__(self) -> None:
        self.listener = socket.socket()
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen()
        self.port = self.listener.getsockname()[1]
        self.accepted: list[float] = []
        self.closed: list[float] = []
        self._connections: list[socket.socket] = []
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                connection, _ = self.listener.accept()
            except OSError:
                return
            self.accepted.append(time.monotonic())
            self._connections.append(connection)
            threading.Thread(target=self._hold, args=(connection,), daemon=True).start()

    def _hold(self, connection: socket.socket) -> None:
        with connection:
            while connection.recv(4096):
                pass
        self.closed.append(time.monotonic())

    def close(self) -> None:
        """Stop listening, and end the connections it holds (their clients' waits end)."""
        self.listener.close()
        for connection in self._connections:
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
