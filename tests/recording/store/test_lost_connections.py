"""The session store's statements that may run twice, against a real PostgreSQL: a read, a lease
taken and a prompt admitted whose connection is lost mid-statement (``pg_terminate_backend``,
as a PostgreSQL restart, a failover or a proxy's timeout ends it) are run once more on another
connection, and answer as if nothing happened; an admission that committed before its answer
was lost is found, not admitted twice; a database that cannot be reached is not tried again."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest

from cairn.database.connection import DatabaseUnavailable
from cairn.recording.store.postgres import Lease, PostgresSessionStore, StoredPrompt
from cairn.testing.postgres import PostgresServer

from ...daemon.test_replica_outages import database_lost
from ...memory.postgres_helpers import postgres_dsn, postgres_server
from .test_commits import end_blocked, eventually_async_check, row_locked, writers
from .test_writer import expire_lease, logged, store

__all__ = ["postgres_dsn", "postgres_server", "store"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@contextmanager
def table_locked(dsn: str, table: str) -> Iterator[None]:
    """``table`` locked by another transaction (every statement on it waits mid-statement)
    until the block ends."""
    with psycopg.connect(dsn) as holder:
        holder.execute(f"LOCK TABLE {table} IN ACCESS EXCLUSIVE MODE")
        yield
        holder.rollback()


async def test_a_read_whose_connection_is_lost_mid_statement_is_answered_from_another(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    [writer] = await writers(store, 1)
    with table_locked(postgres_dsn, "cairn_session_events"):
        replay = asyncio.ensure_future(store.events_after("s1", 0, limit=10))
        assert await eventually_async_check(lambda: end_blocked(postgres_dsn))
    events, last, _ = await replay
    assert [e.type for e in events] == ["turn_started"] and last == 1
    assert store.database.rerun == 1
    assert writer.holds_lease


async def test_a_lease_whose_connection_is_lost_mid_statement_is_taken_on_another(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """Before: the replica answered 503 (the client retried); taking a lease may run twice
    (a first that committed unseen left it ours: the second takes it again)."""
    await writers(store, 1)
    expire_lease(postgres_dsn, "s1")
    with row_locked(postgres_dsn, "s1") as unlock:
        taking = asyncio.ensure_future(store.acquire("s1", owner="b"))
        assert await eventually_async_check(lambda: end_blocked(postgres_dsn))
        unlock()
        lease = await taking
    assert lease is not None and lease.owner == "b"
    assert store.database.rerun == 1
    again = await store.acquire("s1", owner="b")  # what a second try after a commit meets
    assert again is not None and again.epoch == lease.epoch + 1


async def test_an_admission_whose_connection_is_lost_mid_statement_is_kept_once(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    [writer] = await writers(store, 1)
    with table_locked(postgres_dsn, "cairn_session_prompts"):
        admitting = asyncio.ensure_future(admit(store, writer.lease, "p1"))
        assert await eventually_async_check(lambda: end_blocked(postgres_dsn))
    stored = await admitting
    assert stored.prompt_id == "p1" and stored.state == "queued"
    assert store.database.rerun == 1
    assert prompts(postgres_dsn, "s1") == [("p1", "queued")]


async def test_an_admission_that_committed_before_its_answer_was_lost_is_found_again(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    """The second try of an admission whose first committed unseen (no Idempotency-Key): it
    inserts nothing and finds the first by its prompt id. Before: LeaseLost, and the request,
    started again, admitted the prompt a second time."""
    [writer] = await writers(store, 1)
    first = await admit(store, writer.lease, "p1", running=True)
    second = await admit(store, writer.lease, "p1", running=True)
    assert (second.prompt_id, second.state) == (first.prompt_id, first.state) == ("p1", "running")
    assert prompts(postgres_dsn, "s1") == [("p1", "running")]


async def test_a_read_from_a_database_that_cannot_be_reached_is_not_tried_again(
    store: PostgresSessionStore, postgres_server: PostgresServer, postgres_dsn: str
) -> None:
    await writers(store, 1)
    lost = database_lost(postgres_server, postgres_dsn)
    with lost, pytest.raises(DatabaseUnavailable, match="cannot reach the database"):
        await store.summary("s1")
    assert store.database.rerun == 0
    summary = await store.summary("s1")  # back: the pool replaced its ended connections
    assert summary is not None and summary["eventSeq"] == 1


async def admit(
    store: PostgresSessionStore, lease: Lease, prompt_id: str, *, running: bool = False
) -> StoredPrompt:
    return await store.admit(
        "s1",
        lease,
        prompt_id=prompt_id,
        key=None,
        body={"prompt": [{"type": "text", "text": "hi"}]},
        digest="d",
        client_id=None,
        last_event_id=1,
        running=running,
    )


def prompts(dsn: str, session_id: str) -> list[tuple[str, str]]:
    query = "SELECT prompt_id, state FROM cairn_session_prompts WHERE session_id = %s"
    return [(row[0], row[1]) for row in logged(dsn, query, session_id)]

