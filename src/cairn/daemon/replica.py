"""This process as one replica of ``cairn serve --database`` (:mod:`cairn.daemon.replicas`):
its row in the database (its id, the URL the others forward to, a heartbeat), whether it is
ready for traffic (``GET /ready``), and the answers a replica gives when it cannot serve a
request now (503 ``database_unavailable`` or ``replica_draining``, :class:`ServedElsewhere`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import secrets
import socket
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from cairn.daemon.config import RETRY_AFTER_SECONDS, DaemonConfig
from cairn.daemon.errors import ApiError
from cairn.database.connection import Database, DatabaseUnavailable
from cairn.debug_log import get_logger
from cairn.recording.store.schema import HANDOVER_CHANNEL

if TYPE_CHECKING:
    from cairn.database.migrations import Component
    from cairn.recording.store.postgres import PostgresSessionStore

__all__ = [
    "LeaseMoved",
    "Replica",
    "ServedElsewhere",
    "default_replica_id",
    "draining",
    "hand_over",
    "not_found",
    "replica_schema",
    "tenant_name",
    "tenant_of",
    "unavailable",
]

_log = get_logger("DAEMON")


def replica_schema() -> list[Component]:
    """The tables a replica needs, in migration order (``cairn db migrate`` adds memory's)."""
    from cairn.recording.store.schema import sessions_schema

    return [sessions_schema()]


def default_replica_id() -> str:
    return f"{socket.gethostname()[:40]}-{os.getpid()}-{secrets.token_hex(3)}"


class ServedElsewhere(Exception):
    """Another live replica holds the session: forward the request to ``url``."""

    def __init__(self, owner: str, url: str) -> None:
        super().__init__(f"session served by replica {owner} at {url}")
        self.owner = owner
        self.url = url


class LeaseMoved(Exception):
    """The lease this replica kept on an idle session was taken over meanwhile: the request
    starts again (taking the lease, or forwarded to its holder)."""

    def __init__(self, session_id: str) -> None:
        super().__init__(f"the lease on session {session_id} moved to another replica")


def unavailable(message: str = "The session database is unavailable; retry shortly.") -> ApiError:
    return ApiError(
        503,
        message,
        "database_unavailable",
        headers={"Retry-After": str(RETRY_AFTER_SECONDS)},
    )


def draining() -> ApiError:
    return ApiError(
        503,
        "This replica is shutting down; retry (another replica takes the request).",
        "replica_draining",
        headers={"Retry-After": "1"},
    )


class Replica:
    """This process in the database: its id, where it listens, whether it is ready."""

    def __init__(self, config: DaemonConfig, database: Database, *, url: str) -> None:
        self.config = config
        self.database = database
        self.id = config.replica_id or default_replica_id()
        self.url = config.advertise_url or url
        self.draining = False
        self.schema_problem: str | None = "not checked yet"
        self.database_problem: str | None = None
        self._heartbeat: asyncio.Task[None] | None = None

    async def start(self) -> None:
        """Bring the tables up to date (or say why not), then register this replica."""
        await asyncio.to_thread(self._migrate)
        await self._register()
        self._heartbeat = asyncio.ensure_future(self._beat())

    def _migrate(self) -> None:
        from cairn.database.migrations import migrate, schema_status

        with self.database.connect() as connection:
            try:
                for step in migrate(connection, replica_schema()):
                    _log.info(f"migrated: {step}")
            except Exception as error:  # e.g. a role without CREATE: `cairn db migrate` does it
                _log.warning(f"migrating the session tables failed: {error}")
            self.schema_problem = _schema_problem(schema_status(connection, replica_schema()))

    async def _register(self) -> None:
        async with self.database.connection() as connection, connection.transaction():
            cursor = await connection.execute(
                "SELECT now() - seen_at < %s * interval '1 second' FROM cairn_replicas "
                "WHERE replica_id = %s",
                (self.config.lease_seconds * 2, self.id),
            )
            found = await cursor.fetchone()
            if found is not None and found[0]:
                raise DatabaseUnavailable(
                    f"another replica named {self.id!r} is running: each replica needs its own "
                    "--replica-id"
                )
            await connection.execute(
                "INSERT INTO cairn_replicas (replica_id, url) VALUES (%s, %s) "
                "ON CONFLICT (replica_id) DO UPDATE SET url = EXCLUDED.url, "
                "started_at = now(), seen_at = now()",
                (self.id, self.url),
            )

    async def _beat(self) -> None:
        while True:
            await asyncio.sleep(self.config.lease_seconds / 3)
            try:
                async with self.database.connection() as connection, connection.transaction():
                    await connection.execute(
                        "UPDATE cairn_replicas SET seen_at = now(), url = %s WHERE replica_id = %s",
                        (self.url, self.id),
                    )
                if self.schema_problem is not None:
                    await asyncio.to_thread(self._migrate)
            except Exception as error:
                self.database_problem = f"the database does not answer: {error}"
            else:
                self.database_problem = None

    def readiness(self) -> str | None:
        """Why this replica should not get traffic now, or None."""
        if self.draining:
            return "shutting down"
        return self.database_problem or self.schema_problem

    async def check(self) -> str | None:
        """:meth:`readiness`, asking the database now (``GET /ready``)."""
        if self.draining:
            return "shutting down"
        try:
            async with self.database.connection() as connection:
                await connection.execute("SELECT 1")
        except Exception as error:
            self.database_problem = f"the database does not answer: {error}"
        else:
            self.database_problem = None
        return self.readiness()

    async def aclose(self) -> None:
        if self._heartbeat is not None:
            self._heartbeat.cancel()
            await asyncio.gather(self._heartbeat, return_exceptions=True)
        with contextlib.suppress(Exception):
            async with self.database.connection() as connection, connection.transaction():
                await connection.execute(
                    "DELETE FROM cairn_replicas WHERE replica_id = %s", (self.id,)
                )


def _schema_problem(statuses: Sequence[Any]) -> str | None:
    behind = [f"{s.name} {s.current} < {s.expected}" for s in statuses if not s.up_to_date]
    if not behind:
        return None
    return f"the database schema is behind ({', '.join(behind)}): run cairn db migrate"


def not_found(session_id: str, *, closed: bool = False) -> ApiError:
    message = f'No session with id "{session_id}"'
    if closed:
        message += " open: it was closed (load it with POST /session/{id}/load)"
    return ApiError(404, message, "session_not_found", sessionId=session_id)


def tenant_of(store: PostgresSessionStore) -> str | None:
    return tenant_name(store.tenant)


def tenant_name(value: str) -> str | None:
    from cairn.database.connection import NO_TENANT

    return None if value == NO_TENANT else value


async def hand_over(database: Database, sessions: Sequence[tuple[str, str, str]]) -> None:
    """Tell every replica that these sessions (``(tenant, project, session_id)``, as the
    database names them) have prompts waiting and no replica: a draining replica's last act."""
    if not sessions:
        return
    with contextlib.suppress(Exception):
        async with database.connection() as connection, connection.transaction():
            for key in sessions:
                await connection.execute(
                    "SELECT pg_notify(%s, %s)", (HANDOVER_CHANNEL, "\t".join(key))
                )
