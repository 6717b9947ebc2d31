"""The session writer of ``cairn serve --database`` (#31) against a real PostgreSQL: what a
replica writes while it holds a session's lease, and nothing once another replica took it."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import psycopg
import pytest

from cairn.daemon.replica import replica_schema
from cairn.database.connection import Database
from cairn.database.migrations import migrate
from cairn.recording.store.postgres import LeaseLost, PostgresSessions, PostgresSessionStore

from ...memory.postgres_helpers import postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]


@pytest.fixture
async def store(postgres_dsn: str) -> AsyncIterator[PostgresSessionStore]:
    database = Database(postgres_dsn)
    with database.connect() as connection:
        list(migrate(connection, replica_schema()))
    sessions = PostgresSessions(database, lease_seconds=30.0)
    yield sessions.store("project", None)
    await database.aclose()


def expire_lease(dsn: str, session_id: str) -> None:
    """The owner stopped renewing: its lease ran out (as when its replica paused or died)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SELECT set_config('cairn.tenant', '(none)', false)")
        connection.execute(
            "UPDATE cairn_sessions SET lease_until = now() - interval '1 second' "
            "WHERE session_id = %s",
            (session_id,),
        )


def event(kind: str) -> Callable[[int], str]:
    """An event's envelope for its id."""
    return lambda seq: json.dumps({"id": seq, "type": kind})


def logged(dsn: str, query: str, session_id: str) -> list[tuple[Any, ...]]:
    """The rows of ``query`` about ``session_id``, read on a connection of the test's own."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SELECT set_config('cairn.tenant', '(none)', false)")
        return connection.execute(query, (session_id,)).fetchall()


def records(dsn: str, session_id: str) -> int:
    query = "SELECT count(*) FROM cairn_session_records WHERE session_id = %s"
    return int(logged(dsn, query, session_id)[0][0])


async def test_a_writer_whose_lease_was_taken_over_writes_nothing_and_learns_it(
    store: PostgresSessionStore, postgres_dsn: str
) -> None:
    lease = await store.create("s1", owner="a", cwd=Path("/work"))
    assert lease is not None
    writer = store.writer(lease)
    writer.add_event("turn_started", event("turn_started"))
    await writer.drain()
    expire_lease(postgres_dsn, "s1")
    taken = await store.acquire("s1", owner="b")

    writer.add_record({"type": "user", "uuid": "u1"}, b'{"type": "user", "uuid": "u1"}\n')
    writer.add_event("turn_complete", event("turn_complete"))
    writer.change(turns=1)
    with pytest.raises(LeaseLost):
        await writer.drain()

    events, last, _ = await store.events_after("s1", 0, limit=10)
    summary = await store.summary("s1")
    assert taken is not None and taken.event_seq == 1
    assert [(e.seq, e.type) for e in events] == [(1, "turn_started")] and last == 1
    assert records(postgres_dsn, "s1") == 0
    assert summary is not None and (summary["owner"], summary["turns"]) == ("b", 0)


async def test_a_release_writes_what_was_queued_then_frees_the_lease(
    store: PostgresSessionStore,
) -> None:
    lease = await store.create("s1", owner="a", cwd=Path("/work"))
    assert lease is not None
    writer = store.writer(lease)
    writer.add_event("turn_complete", event("turn_complete"))
    writer.change(turns=1)

    await writer.release()

    summary = await store.summary("s1")
    events, _, _ = await store.events_after("s1", 0, limit=10)
    assert [e.type for e in events] == ["turn_complete"]
    assert summary is not None
    assert (summary["owner"], summary["leaseLive"], summary["turns"]) == (None, False, 1)


async def test_a_prompts_last_state_in_one_flush_is_the_one_kept(
    store: PostgresSessionStore,
) -> None:
    """A flush updates a batch's prompt states in one statement: a prompt set twice in one
    batch (running, then done) ends in its last state."""
    lease = await store.create("s1", owner="a", cwd=Path("/work"))
    assert lease is not None
    await store.admit(
        "s1", lease, prompt_id="p1", key=None, body={"text": "hi"}, digest="d",
        client_id=None, last_event_id=0,
    )  # fmt: skip
    writer = store.writer(lease)
    writer.set_prompt_state("p1", "running", running=True)
    writer.set_prompt_state("p1", "done", running=False)
    writer.add_event("turn_complete", event("turn_complete"))

    await writer.drain()

    summary = await store.summary("s1")
    assert summary is not None and (summary["runningPrompt"], summary["prompts"]) == (None, [])
    assert [p.state for p in await store.queued_prompts("s1")] == []


async def test_a_prompt_admitted_running_is_the_sessions_running_prompt_at_once(
    store: PostgresSessionStore,
) -> None:
    """An idle session's prompt is kept as running by its admission: a replica resuming the
    session reports it interrupted, never runs it again."""
    lease = await store.create("s1", owner="a", cwd=Path("/work"))
    assert lease is not None
    stored = await store.admit(
        "s1", lease, prompt_id="p1", key="k1", body={"text": "hi"}, digest="d",
        client_id=None, last_event_id=0, running=True,
    )  # fmt: skip
    again = await store.admit(
        "s1", lease, prompt_id="p2", key="k1", body={"text": "hi"}, digest="d",
        client_id=None, last_event_id=0, running=True,
    )  # fmt: skip

    summary = await store.summary("s1")
    assert (stored.prompt_id, stored.state, again.prompt_id) == ("p1", "running", "p1")
    assert summary is not None and summary["runningPrompt"] == "p1"
    assert [p["promptId"] for p in summary["prompts"]] == ["p1"]
