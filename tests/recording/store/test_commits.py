"""Group commit (#31): the writes of the sessions a replica holds, flushing at once, share one
transaction against a real PostgreSQL; a refused write fails only its own session, a dead
connection is replaced (or a group lost mid-statement sent again only when that cannot write it
twice), a database that is gone fails every waiting one, and nothing written before is lost."""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import psycopg
import pytest

from cairn.database.connection import CONNECT_TIMEOUT_SECONDS, DatabaseUnavailable
from cairn.recording.store.postgres import PostgresSessionStore, SessionWriter
from cairn.testing.postgres import PostgresServer

from ...daemon.test_replica_outages import database_lost
from ...memory.postgres_helpers import end_connections, postgres_dsn, postgres_server
from ...polling import eventually_awaited
from .test_writer import event, logged, records, store

__all__ = ["postgres_dsn", "postgres_server", "store"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


async def writers(store: PostgresSessionStore, count: int) -> list[SessionWriter]:
    """``count`` new sessions leased here, each with one event written (acknowledged)."""
    leased = []
    for number in range(1, count + 1):
        lease = await store.create(f"s{number}", owner="a", cwd=Path("/work"))
        assert lease is not None
        writer = store.writer(lease)
        writer.add_event("turn_started", event("turn_started"))
        await writer.drain()
        leased.append(writer)
    return leased


def event_types(dsn: str, session_id: str) -> list[str]:
    """The session's logged events (read on a connection of its own: the pool's may be dead)."""
    query = "SELECT type FROM cairn_session_events WHERE session_id = %s ORDER BY seq"
    return [row[0] for row in logged(dsn, query, session_id)]


async def test_sessions_flushing_at_once_share_one_transaction(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    first, second, third = await writers(store, 3)
    commits = store.sessions.commits(store.tenant)
    before = commits.transactions
    for writer in (first, second, third):
        writer.add_record({"type": "user", "uuid": "u"}, b'{"type": "user", "uuid": "u"}\n')
        writer.add_event("turn_complete", event("turn_complete"))

    await asyncio.gather(first.drain(), second.drain(), third.drain())

    assert commits.transactions == before + 1
    for session_id in ("s1", "s2", "s3"):
        assert event_types(postgres_dsn, session_id) == ["turn_started", "turn_complete"]
        assert records(postgres_dsn, session_id) == 1


async def test_a_refused_write_fails_its_own_session_only_and_the_group_is_written_once(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """The refused statement rolls its group back mid-way: the others are written again, one by
    one, exactly once; the refused session's writer fails with a clear error and what it had
    written before stays."""
    first, refused, third = await writers(store, 3)
    for writer in (first, refused, third):
        writer.add_event("turn_complete", event("turn_complete"))
    # PostgreSQL's text cannot hold a NUL character: this record is refused.
    refused.add_record({"type": "user", "uuid": "u"}, b'{"type": "user", "uuid": "u\x00"}\n')

    outcomes = await asyncio.gather(
        first.drain(), refused.drain(), third.drain(), return_exceptions=True
    )

    assert outcomes[0] is None and outcomes[2] is None
    assert isinstance(outcomes[1], DatabaseUnavailable)
    assert "session s2: the database refused the write" in str(outcomes[1])
    assert refused.failed is outcomes[1]
    assert event_types(postgres_dsn, "s1") == ["turn_started", "turn_complete"]
    assert event_types(postgres_dsn, "s3") == ["turn_started", "turn_complete"]
    assert event_types(postgres_dsn, "s2") == ["turn_started"]
    assert records(postgres_dsn, "s2") == 0
    first.add_event("turn_started", event("turn_started"))  # the others go on writing
    await first.drain()
    assert (event_types(postgres_dsn, "s1"))[-1] == "turn_started"


async def test_a_group_after_its_idle_connections_ended_is_written_on_fresh_ones(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """The pool's connections ended while idle (``pg_terminate_backend``, as a PostgreSQL
    restart or a proxy's idle timeout does), the database still up: the next group is written
    once, on a new connection, and every writer waiting on it hears of its commit.

    Regression: the group ran on the dead connection and failed every waiting writer with
    DatabaseUnavailable (the turns' 503)."""
    first, second = await writers(store, 2)
    commits = store.sessions.commits(store.tenant)
    for writer in (first, second):
        writer.add_event("turn_complete", event("turn_complete"))
    assert end_connections(postgres_dsn) > 0

    await asyncio.gather(first.drain(), second.drain())

    assert store.database.replaced > 0 and commits.resent == 0
    assert first.holds_lease and second.holds_lease
    assert event_types(postgres_dsn, "s1") == ["turn_started", "turn_complete"]
    assert event_types(postgres_dsn, "s2") == ["turn_started", "turn_complete"]


async def test_a_lease_renewal_whose_connection_is_lost_mid_statement_goes_again(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """A renewal is idempotent (absolute values, the same row count again): its connection
    ended while the statement ran, it is sent once more on a fresh connection."""
    [writer] = await writers(store, 1)
    commits = store.sessions.commits(store.tenant)

    with row_locked(postgres_dsn, "s1") as unlock:
        renewal = asyncio.ensure_future(writer.renew())
        assert await eventually_async_check(lambda: end_blocked(postgres_dsn))
        unlock()
        await renewal

    assert commits.resent == 1
    assert writer.holds_lease
    assert event_types(postgres_dsn, "s1") == ["turn_started"]


async def test_a_write_of_events_whose_connection_is_lost_mid_statement_is_not_sent_again(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """Events are not idempotent (the statement may have committed just before its answer was
    lost; sent again, it would collide with its own rows): the writer fails with
    DatabaseUnavailable, and nothing is written twice."""
    [writer] = await writers(store, 1)
    commits = store.sessions.commits(store.tenant)
    writer.add_event("turn_complete", event("turn_complete"))

    with row_locked(postgres_dsn, "s1") as unlock:
        drained = asyncio.ensure_future(writer.drain())
        assert await eventually_async_check(lambda: end_blocked(postgres_dsn))
        unlock()
        with pytest.raises(DatabaseUnavailable, match="the database is unavailable"):
            await drained

    assert commits.resent == 0
    assert event_types(postgres_dsn, "s1") == ["turn_started"]


async def test_a_group_whose_database_is_gone_fails_every_waiting_session_clearly(
    store: PostgresSessionStore, postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    """A database that really is gone (it refuses new connections, its open ones ended):
    every writer waiting on the group fails with DatabaseUnavailable (the turn's 503) within
    the connect timeout, none of the group is written, and what was acknowledged before
    stays."""
    first, second = await writers(store, 2)
    for writer in (first, second):
        writer.add_event("turn_complete", event("turn_complete"))

    with database_lost(postgres_server, postgres_dsn):
        started = time.monotonic()
        outcomes = await asyncio.gather(first.drain(), second.drain(), return_exceptions=True)
        took = time.monotonic() - started

    assert all(isinstance(outcome, DatabaseUnavailable) for outcome in outcomes), outcomes
    assert all("cannot reach the database" in str(outcome) for outcome in outcomes), outcomes
    assert took < CONNECT_TIMEOUT_SECONDS
    assert not first.holds_lease and not second.holds_lease
    assert event_types(postgres_dsn, "s1") == ["turn_started"]
    assert event_types(postgres_dsn, "s2") == ["turn_started"]


def end_blocked(dsn: str) -> bool:
    """End the connection whose statement waits on a row lock; whether there was one."""
    with psycopg.connect(dsn, autocommit=True) as admin:
        row = admin.execute(
            "SELECT count(*) FILTER (WHERE pg_terminate_backend(pid, 10000)) FROM "
            "pg_stat_activity WHERE datname = current_database() AND wait_event_type = 'Lock'"
        ).fetchone()
    return row is not None and int(row[0]) > 0


@contextmanager
def row_locked(dsn: str, session_id: str) -> Iterator[Callable[[], None]]:
    """The session's row locked by another transaction (a write of it waits mid-statement)
    until the function yielded is called (or the block ends)."""
    with psycopg.connect(dsn) as holder:
        holder.execute("SELECT set_config('cairn.tenant', '(none)', true)")
        holder.execute(
            "SELECT 1 FROM cairn_sessions WHERE session_id = %s FOR UPDATE", (session_id,)
        )
        yield holder.rollback
        holder.rollback()


async def eventually_async_check(check: Callable[[], bool]) -> bool:
    """``check`` polled in a worker thread (it blocks on the database) until it holds."""
    return await eventually_awaited(lambda: asyncio.to_thread(check))
