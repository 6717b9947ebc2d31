"""A replica that loses its database mid-turn (#31, bad input): it finishes nothing it cannot
record, answers a clear 503 the client can retry, is not ready until the database is back, and
then serves the session again with everything recorded before the loss intact.

The loss is real: the test's database stops taking connections and the replica's are ended
(``ALTER DATABASE ... ALLOW_CONNECTIONS false``, ``pg_terminate_backend``), as when the
database's host goes away.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import psycopg
import pytest
from psycopg.conninfo import conninfo_to_dict

from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply
from cairn.testing.postgres import PostgresServer

from ..memory.postgres_helpers import postgres_dsn, postgres_server
from ..polling import eventually_awaited
from .helpers import collect_until, of_type, said
from .test_replicas import StartReplica, start_replica

__all__ = ["postgres_dsn", "postgres_server", "start_replica"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

HELD = "HOLD "


@contextmanager
def database_lost(server: PostgresServer, dsn: str) -> Iterator[None]:
    """The database of ``dsn`` refuses connections and ends the open ones, until the block
    ends."""
    name = conninfo_to_dict(dsn)["dbname"]
    with psycopg.connect(server.dsn(), autocommit=True) as admin:
        admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS false')
        admin.execute(  # waits until each has ended (a terminated backend ends soon after)
            "SELECT pg_terminate_backend(pid, 10000) FROM pg_stat_activity WHERE datname = %s",
            (name,),
        )
        try:
            yield
        finally:
            admin.execute(f'ALTER DATABASE "{name}" WITH ALLOW_CONNECTIONS true')



def recorded(dsn: str, session_id: str) -> list[tuple[int, str]]:
    with psycopg.connect(dsn) as connection:
        connection.execute("SELECT set_config('cairn.tenant', '(none)', false)")
        rows = connection.execute(
            "SELECT seq, record FROM cairn_session_records WHERE session_id = %s ORDER BY seq",
            (session_id,),
        ).fetchall()
    return [(int(seq), str(record)) for seq, record in rows]


async def test_a_replica_losing_its_database_mid_turn_stops_the_turn_and_answers_503(
    start_replica: StartReplica,
    scripted_server: ScriptedServer,
    postgres_server: PostgresServer,
    postgres_dsn: str,
) -> None:
    """The held turn's answer arrives while the database is gone: the turn stops with
    ``database_unavailable`` (nothing of it is kept), a prompt meanwhile is a 503 with
    Retry-After, ``/ready`` fails; once the database is back the retried prompt runs, the
    stopped turn is reported interrupted in the log, and the first turn's records are all
    still there.

    Regression: a turn started before its ``running`` state reached the database (the write
    was still queued when the database went), so the replica resuming the session found the
    prompt queued and ran it a second time."""
    released = threading.Event()

    def answer(request: RecordedRequest) -> Reply | None:
        text = said(request) if request.purpose == "main" else ""
        if text.startswith(HELD):
            return Reply(text=f"echo: {text}", hold=released)
        return reply(f"echo: {text}") if text else None

    scripted_server.handler = answer  # type: ignore[assignment]
    r1 = await start_replica("r1", lease_seconds=2.0)
    session_id = await r1.create_session()
    await r1.prompt(session_id, "first")
    await collect_until(r1.http, session_id, "turn_complete")
    before = recorded(postgres_dsn, session_id)
    watching = asyncio.ensure_future(
        collect_until(r1.http, session_id, "turn_error", last_event_id=None, timeout=60)
    )

    async def watched() -> bool:
        status = await r1.http.get(f"/session/{session_id}/status")
        return int(status.json()["subscribers"]) == 1

    assert await eventually_awaited(watched)
    second = await r1.prompt(session_id, f"{HELD}second")
    await scripted_server.async_wait_for_requests(2, purpose="main")
    url, key = f"/session/{session_id}/prompt", {"Idempotency-Key": "third-1"}

    with database_lost(postgres_server, postgres_dsn):
        released.set()  # the answer comes; there is nowhere to record it
        stopped = await watching
        refused = await r1.http.post(url, json={"prompt": "third"}, headers=key)

        async def not_ready() -> bool:
            return (await r1.http.get("/ready")).status_code == 503

        assert await eventually_awaited(not_ready)
        reason = (await r1.http.get("/ready")).json()["reason"]

    async def ready() -> bool:
        return (await r1.http.get("/ready")).status_code == 200

    assert await eventually_awaited(ready)

    async def admitted() -> bool:
        answer = await r1.http.post(url, json={"prompt": "third"}, headers=key)
        return answer.status_code == 202

    assert await eventually_awaited(admitted)  # the client's retry, as the SDK does it
    frames = await collect_until(r1.http, session_id, "turn_complete", count=2, timeout=60)

    [error] = of_type(stopped, "turn_error")
    assert error.data["code"] == "database_unavailable" and error.data["retryable"] is True
    assert refused.status_code == 503, refused.text
    assert refused.json()["code"] == "database_unavailable"
    assert refused.headers["Retry-After"]
    assert "database" in reason
    ended = [f.data["text"] for f in of_type(frames, "turn_complete")]
    assert ended == ["echo: first", "echo: third"]
    [reported] = [f for f in of_type(frames, "turn_error") if f.id is not None]
    assert (reported.data["promptId"], reported.data["code"]) == (second["promptId"], "interrupted")
    assert recorded(postgres_dsn, session_id)[: len(before)] == before
    asked = [said(r) for r in scripted_server.requests_for("main")]
    assert asked == ["first", f"{HELD}second", "third"]  # the stopped turn is not run again
