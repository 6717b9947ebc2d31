"""A real ``cairn serve --database`` replica whose database connections die while the database
itself stays up (#31): ended by ``pg_terminate_backend``, by a PostgreSQL restart, or by a
proxy's idle timeout. The replica's pool replaces a dead connection before it writes on it, so
the turns waiting on the next group commit, and the prompts after it, succeed (no 503, no
``turn_error``), and every session's records and events are all there, each once.

Regression: the pool handed out its idle connections unchecked, so the first group commit after
the connections ended ran on a dead one and failed every turn in its group with
``database_unavailable`` although the database was back.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import psycopg
import pytest

from cairn.sdk import DaemonClient, PromptAdmission
from cairn.testing import ScriptedServer, reply
from cairn.testing.postgres import PostgresServer

from ..daemon.helpers import said
from ..memory.postgres_helpers import end_connections, postgres_dsn, postgres_server
from ..polling import eventually_async
from .test_daemon_replicas import HELD, NO_TENANT, REPLICA_WAIT, TOKEN, Replica, free_port, model

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(240)]

SESSIONS = 4  # sessions writing at once (their turns' writes share group commits)


@dataclass
class Served:
    replica: Replica
    dsn: str
    released: threading.Event


@pytest.fixture
async def served(
    cairn_env: dict[str, str], project: Path, scripted_server: ScriptedServer, postgres_dsn: str,
    tmp_path: Path,
) -> AsyncIterator[Served]:  # fmt: skip
    """One replica over the test's database, its model holding ``HOLD`` prompts until
    ``released``."""
    released = threading.Event()
    scripted_server.handler = model(released)  # type: ignore[assignment]
    scripted_server.default = reply("ok")
    env = dict(cairn_env)
    home = tmp_path / "replica"
    env.update(HOME=str(home / "home"), CAIRN_HOME=str(home / "cairn-home"))
    for folder in ("home", "cairn-home"):
        (home / folder).mkdir(parents=True)
    args = ["--token", TOKEN, "--database", postgres_dsn]
    replica = Replica("r1", free_port(), env, args, project)
    try:
        await asyncio.to_thread(replica.start)
        yield Served(replica, postgres_dsn, released)
    finally:
        released.set()
        replica.reap()


def logged(dsn: str, table: str, session_id: str, column: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as connection:
        connection.execute("SELECT set_config('cairn.tenant', %s, false)", (NO_TENANT,))
        rows = connection.execute(
            f"SELECT seq, {column} FROM {table} WHERE session_id = %s ORDER BY seq",  # noqa: S608
            (session_id,),
        ).fetchall()
    return [(int(seq), str(value)) for seq, value in rows]


async def turns(client: DaemonClient, sessions: list[str], prompt: str) -> list[str]:
    """``prompt`` on every session at once (never retried: a 503 fails the test); the
    answers."""
    admissions = [
        await client.prompt(session_id, f"{prompt} {n}") for n, session_id in enumerate(sessions)
    ]
    return await ended(client, sessions, admissions)


async def ended(
    client: DaemonClient, sessions: list[str], admissions: list[PromptAdmission]
) -> list[str]:
    """The answers of the admitted prompts (a ``turn_error`` fails the test)."""
    pairs = zip(sessions, admissions, strict=True)
    ends = await asyncio.wait_for(
        asyncio.gather(*(client.wait_for_turn(s, a) for s, a in pairs)), REPLICA_WAIT
    )
    return [end.final_text for end in ends]


def assert_logged_once(dsn: str, sessions: list[str], turns_each: int) -> None:
    """Every session's records and events are numbered 1..n without a gap (nothing lost, none
    twice), with ``turns_each`` completed turns and no failed one."""
    for session_id in sessions:
        records = logged(dsn, "cairn_session_records", session_id, "record")
        events = logged(dsn, "cairn_session_events", session_id, "type")
        assert [seq for seq, _ in records] == list(range(1, len(records) + 1))
        assert [seq for seq, _ in events] == list(range(1, len(events) + 1))
        kinds = [kind for _, kind in events]
        assert kinds.count("turn_complete") == turns_each, kinds
        assert "turn_error" not in kinds, kinds


async def test_turns_waiting_on_the_database_when_its_connections_end_complete_without_a_503(
    served: Served, scripted_server: ScriptedServer
) -> None:
    """Connections ended while turns wait on the model (their next writes, the lease renewals
    and the answers, go on dead connections) and again between turns (the next admissions
    and group commits): every turn completes, none is refused or run twice."""
    async with DaemonClient(served.replica.url, TOKEN, retries=0) as client:
        sessions = [(await client.create_session()).session_id for _ in range(SESSIONS)]
        first = await turns(client, sessions, "first")
        held = [await client.prompt(s, f"{HELD}second {n}") for n, s in enumerate(sessions)]
        await scripted_server.async_wait_for_requests(2 * SESSIONS, purpose="main")

        def started() -> bool:
            return all(
                [kind for _, kind in logged(served.dsn, "cairn_session_events", s, "type")].count(
                    "turn_started"
                )
                == 2
                for s in sessions
            )

        assert await eventually_async(started)
        assert end_connections(served.dsn) > 0
        served.released.set()
        second = await ended(client, sessions, held)
        assert end_connections(served.dsn) > 0
        third = await turns(client, sessions, "third")

    assert first == [f"echo: first {n}" for n in range(SESSIONS)]
    assert second == [f"echo: {HELD}second {n}" for n in range(SESSIONS)]
    assert third == [f"echo: third {n}" for n in range(SESSIONS)]
    asked = sorted(said(r) for r in scripted_server.requests_for("main"))
    assert asked == sorted(
        f"{prompt} {n}" for prompt in ("first", f"{HELD}second", "third") for n in range(SESSIONS)
    )
    assert_logged_once(served.dsn, sessions, 3)


async def test_a_postgresql_restart_between_turns_fails_no_turn(
    served: Served, scripted_server: ScriptedServer, postgres_server: PostgresServer
) -> None:
    """PostgreSQL restarted (a fast shutdown ends every connection) while the sessions are
    idle: the next prompts are admitted and their turns complete on fresh connections."""
    async with DaemonClient(served.replica.url, TOKEN, retries=0) as client:
        sessions = [(await client.create_session()).session_id for _ in range(SESSIONS)]
        first = await turns(client, sessions, "first")
        await asyncio.to_thread(postgres_server.restart)
        second = await turns(client, sessions, "second")

    assert first == [f"echo: first {n}" for n in range(SESSIONS)]
    assert second == [f"echo: second {n}" for n in range(SESSIONS)]
    assert len(scripted_server.requests_for("main")) == 2 * SESSIONS
    assert_logged_once(served.dsn, sessions, 2)
