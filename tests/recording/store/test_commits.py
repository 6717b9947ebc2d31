"""Group commit (#31): the writes of the sessions a replica holds, flushing at once, share one
transaction against a real PostgreSQL; a refused write fails only its own session, a lost
database fails every waiting one, and nothing written before is lost."""

from __future__ import annotations

import asyncio
from pathlib import Path

import psycopg
import pytest

from cairn.database.connection import DatabaseUnavailable
from cairn.recording.store.postgres import PostgresSessionStore, SessionWriter

from ...memory.postgres_helpers import postgres_dsn, postgres_server
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


async def test_a_group_whose_connection_is_lost_fails_every_waiting_session_clearly(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """A lost database mid-group: every writer waiting on it fails with DatabaseUnavailable
    (the turn's 503), none of the group is written, and what was acknowledged before stays."""
    first, second = await writers(store, 2)
    for writer in (first, second):
        writer.add_event("turn_complete", event("turn_complete"))
    with psycopg.connect(postgres_dsn, autocommit=True) as admin:  # the pool's connections die
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )

    outcomes = await asyncio.gather(first.drain(), second.drain(), return_exceptions=True)

    assert all(isinstance(outcome, DatabaseUnavailable) for outcome in outcomes), outcomes
    assert all("the database is unavailable" in str(outcome) for outcome in outcomes)
    assert not first.holds_lease and not second.holds_lease
    assert event_types(postgres_dsn, "s1") == ["turn_started"]
    assert event_types(postgres_dsn, "s2") == ["turn_started"]
