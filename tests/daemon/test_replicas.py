"""``cairn serve --database``: in-process replicas sharing one real PostgreSQL (#31).

Every test runs two or more daemons of this process over one database; the real-process
failover (kill -9, HAProxy, rolling restarts) is tests/e2e/test_daemon_replicas.py.
"""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from cairn.daemon.config import DaemonConfig
from cairn.daemon.server import DaemonServer
from cairn.testing import Reply, ScriptedServer, reply

from ..memory.postgres_helpers import postgres_dsn, postgres_server
from ..polling import eventually_async
from .helpers import RunningDaemon, collect_until, make_runtime, of_type

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(180)]

StartReplica = Callable[..., Awaitable[RunningDaemon]]
TOKEN = "replica-token"
HEADER = "X-Cairn-Tenant"


@pytest.fixture
async def start_replica(
    scripted_server: ScriptedServer, workspace: Path, home: Path, postgres_dsn: str
) -> AsyncIterator[StartReplica]:
    """``start(replica_id, task_checkpoint=True, **config)``: a daemon keeping its sessions in
    the test's database."""
    scripted_server.default = reply("ok")
    running: list[RunningDaemon] = []

    async def start(
        replica_id: str, *, task_checkpoint: bool = True, **overrides: Any
    ) -> RunningDaemon:
        runtime = make_runtime(scripted_server, workspace, task_checkpoint=task_checkpoint)
        options: dict[str, Any] = {"database": postgres_dsn, "replica_id": replica_id}
        config = DaemonConfig(workspace=workspace, port=0, **{**options, **overrides})
        server = DaemonServer(runtime, config)
        url = await server.start()
        headers = {"Authorization": f"Bearer {config.token}"} if config.token else {}
        http = httpx.AsyncClient(base_url=url, trust_env=False, headers=headers, timeout=20)
        daemon = RunningDaemon(server, runtime, url, http)
        running.append(daemon)
        return daemon

    yield start
    for daemon in running:
        await daemon.http.aclose()
        await daemon.server.stop()
        await daemon.runtime.aclose()


async def test_a_session_created_on_one_replica_runs_its_turn_on_another(
    start_replica: StartReplica, scripted_server: ScriptedServer
) -> None:
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    scripted_server.enqueue(reply(chunks=["Hel", "lo"]), purpose="main")

    admitted = await b.prompt(session_id, "hi")
    frames = await collect_until(a.http, session_id, "turn_complete")

    [done] = of_type(frames, "turn_complete")
    assert done.data["promptId"] == admitted["promptId"]
    assert done.data["text"] == "Hello"
    ids = [f.id for f in frames if f.id is not None]
    assert ids == list(range(1, len(ids) + 1))  # one sequence across replicas, no gap
    listed = (await a.http.get("/workspace/sessions")).json()["sessions"]
    assert [(s["sessionId"], s["displayName"], s["messageCount"]) for s in listed] == [
        (session_id, "hi", 2)
    ]


async def test_a_stream_on_one_replica_sees_the_turn_another_runs_as_it_runs(
    start_replica: StartReplica, scripted_server: ScriptedServer
) -> None:
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    scripted_server.enqueue(Reply(text="slow answer", delay=0.5), purpose="main")

    watching = asyncio.ensure_future(collect_until(a.http, session_id, "turn_complete"))
    await asyncio.sleep(0)  # the stream is open before the turn starts
    await b.prompt(session_id, "think")
    frames = await watching

    assert [f.data["text"] for f in of_type(frames, "turn_complete")] == ["slow answer"]
    status = (await a.http.get(f"/session/{session_id}/status")).json()
    assert status["turns"] == 1 and status["hasActivePrompt"] is False


async def test_another_replicas_status_counts_a_turn_as_soon_as_it_completes(
    start_replica: StartReplica, scripted_server: ScriptedServer
) -> None:
    """Regression: a session's turn count reached the database only when its lease was given
    up, so right after ``turn_complete`` (or while another prompt kept the lease) every other
    replica's status said 0 turns (the cross-replica stream test failed now and then on it)."""
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    released = threading.Event()
    scripted_server.enqueue(reply("first"), purpose="main")
    scripted_server.enqueue(Reply(text="second", hold=released), purpose="main")

    runner = (await b.prompt(session_id, "one"))["replicaId"]  # a, keeping the lease it took
    await b.prompt(session_id, "two")  # runs next, holding the lease on the runner
    other = b if runner == "a" else a
    await collect_until(other.http, session_id, "turn_complete")
    await scripted_server.async_wait_for_requests(2, purpose="main")
    status = (await other.http.get(f"/session/{session_id}/status")).json()
    released.set()

    assert (status["turns"], status["hasActivePrompt"], status["replicaId"]) == (1, True, runner)


async def test_last_event_id_resumes_on_another_replica_without_loss_or_duplicates(
    start_replica: StartReplica,
) -> None:
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    await a.prompt(session_id, "one")
    first = await collect_until(a.http, session_id, "turn_complete")
    cursor = max(f.id for f in first if f.id is not None)
    await a.prompt(session_id, "two")

    rest = await collect_until(b.http, session_id, "turn_complete", last_event_id=cursor)

    ids = [f.id for f in rest if f.id is not None]
    assert ids == list(range(cursor + 1, cursor + 1 + len(ids)))
    assert len(of_type(rest, "turn_complete")) == 1


async def test_a_prompt_retried_on_another_replica_with_its_key_runs_once(
    start_replica: StartReplica, scripted_server: ScriptedServer
) -> None:
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    headers = {"Idempotency-Key": "deploy-42"}
    url = f"/session/{session_id}/prompt"

    first = await a.http.post(url, json={"prompt": "deploy"}, headers=headers)
    await collect_until(a.http, session_id, "turn_complete")
    again = await b.http.post(url, json={"prompt": "deploy"}, headers=headers)
    reused = await b.http.post(url, json={"prompt": "other"}, headers=headers)

    assert first.status_code == again.status_code == 202
    assert again.json()["promptId"] == first.json()["promptId"]
    assert again.json()["state"] == "done"
    assert reused.status_code == 422
    assert [r.last_user_text() for r in scripted_server.requests_for("main")] == ["deploy"]


async def test_a_request_reaching_a_replica_while_another_runs_the_turn_is_forwarded(
    start_replica: StartReplica, scripted_server: ScriptedServer
) -> None:
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    scripted_server.enqueue(Reply(text="first", delay=1.0), purpose="main")
    scripted_server.enqueue(reply("second"), purpose="main")

    first = await a.prompt(session_id, "one")
    second = await b.prompt(session_id, "two")  # a holds the lease: b forwards it there
    status = (await b.http.get(f"/session/{session_id}/status")).json()
    frames = await collect_until(b.http, session_id, "turn_complete", count=2)

    assert [p["promptId"] for p in status["pendingPrompts"]] == [
        first["promptId"],
        second["promptId"],
    ]
    assert status["replicaId"] == "a"
    ends = of_type(frames, "turn_complete")
    assert [e.data["text"] for e in ends] == ["first", "second"]


async def test_two_replicas_hammering_one_session_never_run_two_turns_at_once(
    start_replica: StartReplica, scripted_server: ScriptedServer
) -> None:
    a, b = await start_replica("a"), await start_replica("b")
    session_id = await a.create_session()
    turn_seconds = 0.15
    scripted_server.default = Reply(text="ok", delay=turn_seconds)
    url = f"/session/{session_id}/prompt"

    async def send(http: httpx.AsyncClient, text: str) -> int:
        for _ in range(100):  # a full queue (5) is a 429: wait and send again
            response = await http.post(url, json={"prompt": text})
            if response.status_code == 202:
                return 202
            assert response.status_code == 429, response.text
            await asyncio.sleep(0.05)
        return 429

    answers = await asyncio.gather(*(send(a.http if i % 2 else b.http, f"p{i}") for i in range(12)))
    await collect_until(a.http, session_id, "turn_complete", count=12, timeout=60)

    assert answers == [202] * 12
    times = sorted(r.received_at for r in scripted_server.requests_for("main"))
    assert len(times) == 12
    gaps = [later - earlier for earlier, later in itertools.pairwise(times)]
    assert min(gaps) >= turn_seconds * 0.9  # each turn began after the one before ended


async def test_a_dead_replicas_lease_blocks_the_session_only_until_it_expires(
    start_replica: StartReplica, postgres_dsn: str
) -> None:
    """The interrupted turn is reported (never run again) and the next prompt runs."""
    a = await start_replica("a", lease_seconds=2.0)
    session_id = await a.create_session()
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        connection.execute("SELECT set_config('cairn.tenant', '(none)', false)")
        connection.execute(
            "INSERT INTO cairn_replicas (replica_id, url) VALUES ('ghost', 'http://127.0.0.1:9')"
        )
        connection.execute(
            "UPDATE cairn_sessions SET owner = 'ghost', epoch = epoch + 1, "
            "running_prompt = 'lost-turn', lease_until = now() + interval '1.5 seconds'"
        )
    started = time.monotonic()

    admitted = await a.prompt(session_id, "again")  # the ghost does not answer: wait, take over
    frames = await collect_until(a.http, session_id, "turn_complete")

    waited = time.monotonic() - started
    lost = [f for f in of_type(frames, "turn_error") if f.data["promptId"] == "lost-turn"]
    assert len(lost) == 1, [(f.type, f.data) for f in frames]
    assert lost[0].data["code"] == "interrupted"
    assert of_type(frames, "turn_complete")[-1].data["promptId"] == admitted["promptId"]
    assert waited < 2.0 + 3.0  # the lease's expiry, and the turn


async def test_one_tenant_never_reaches_another_tenants_session(
    start_replica: StartReplica, postgres_dsn: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_SANDBOX", "1")
    root = tmp_path / "tenants"
    root.mkdir()
    options = {"token": TOKEN, "tenant_header": HEADER, "workspace_root": root}
    a = await start_replica("a", **options)
    b = await start_replica("b", **options)
    acme, globex = {HEADER: "acme"}, {HEADER: "globex"}
    created = await a.http.post("/session", json={}, headers=acme)
    session_id = created.json()["sessionId"]
    await a.http.post(f"/session/{session_id}/prompt", json={"prompt": "secret"}, headers=acme)
    await collect_until(
        httpx.AsyncClient(base_url=a.url, headers={**a.http.headers, **acme}, trust_env=False),
        session_id,
        "turn_complete",
    )

    for path, method, body in (
        (f"/session/{session_id}/status", "GET", None),
        (f"/session/{session_id}/events", "GET", None),
        (f"/session/{session_id}/prompt", "POST", {"prompt": "x"}),
        (f"/session/{session_id}/cancel", "POST", {}),
        (f"/session/{session_id}/load", "POST", {}),
    ):
        answer = await b.http.request(method, path, json=body, headers=globex)
        assert answer.status_code == 404, (path, answer.text)
    assert (await b.http.get("/workspace/sessions", headers=globex)).json()["sessions"] == []
    assert created.json()["workspaceCwd"] == str(root / "acme")
    with psycopg.connect(postgres_dsn) as connection:
        connection.execute("SELECT set_config('cairn.tenant', 'globex', true)")
        for table in ("cairn_sessions", "cairn_session_records", "cairn_session_events"):
            assert connection.execute(f"SELECT count(*) FROM {table}").fetchone() == (0,)  # noqa: S608
        connection.rollback()
        connection.execute("SELECT set_config('cairn.tenant', 'globex', true)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):  # the policy's WITH CHECK
            connection.execute(
                "INSERT INTO cairn_sessions (tenant, project, session_id, cwd) "
                "VALUES ('acme', 'p', 'x', '/')"
            )


async def test_ready_says_the_replica_and_a_plain_daemon_is_always_ready(
    start_replica: StartReplica, start_daemon: Callable[..., Awaitable[RunningDaemon]]
) -> None:
    replica = await start_replica("ready-1")
    plain = await start_daemon()

    assert (await replica.http.get("/ready")).json() == {"status": "ready", "replicaId": "ready-1"}
    assert (await plain.http.get("/ready")).json() == {"status": "ready"}
    capabilities = (await replica.http.get("/capabilities")).json()
    assert capabilities["mode"] == "replica" and "replicas" in capabilities["features"]


def lease_row(dsn: str, session_id: str) -> tuple[str | None, int]:
    """The session's lease as the database has it: (owner, epoch)."""
    with psycopg.connect(dsn, autocommit=True) as connection:
        connection.execute("SELECT set_config('cairn.tenant', '(none)', false)")
        row = connection.execute(
            "SELECT owner, epoch FROM cairn_sessions WHERE session_id = %s", (session_id,)
        ).fetchone()
    assert row is not None
    return row[0], int(row[1])


async def test_an_idle_sessions_lease_is_kept_for_its_next_prompt(
    start_replica: StartReplica, postgres_dsn: str
) -> None:
    """The next prompt runs on the replica that ran the last one without taking the lease
    again (the epoch stays), and one reaching another replica meanwhile is forwarded there.
    (The test does not wait for the linger to end: the next test does, with a short one.) No
    task checkpoint: the lease kept until it is recorded, 3 s after the turn, would hide a
    linger that gives the lease up at once."""
    kept_for = {"lease_seconds": 30.0, "linger_seconds": 8.0, "task_checkpoint": False}
    # (load-proof: 8 s to come back)
    a, b = await start_replica("a", **kept_for), await start_replica("b", **kept_for)
    session_id = await a.create_session()
    await a.prompt(session_id, "one")
    await collect_until(a.http, session_id, "turn_complete")
    kept = lease_row(postgres_dsn, session_id)

    again = await a.prompt(session_id, "two")
    elsewhere = await b.prompt(session_id, "three")
    await collect_until(b.http, session_id, "turn_complete", count=3)

    assert kept[0] == "a"
    assert (again["replicaId"], elsewhere["replicaId"]) == ("a", "a")
    assert lease_row(postgres_dsn, session_id)[1] == kept[1]  # never taken again


async def test_an_idle_sessions_lease_is_given_up_once_its_linger_is_over(
    start_replica: StartReplica, postgres_dsn: str
) -> None:
    """The lease is given up soon after the session went idle (0.5 s here; 2 s by default),
    and another replica takes it for the next prompt. (No task checkpoint: the lease would be
    kept until it is recorded, 3 s after the turn: tests/daemon/test_replica_history.py.)"""
    given_up_soon = {"lease_seconds": 30.0, "linger_seconds": 0.5, "task_checkpoint": False}
    a, b = await start_replica("a", **given_up_soon), await start_replica("b", **given_up_soon)
    session_id = await a.create_session()
    await a.prompt(session_id, "one")
    await collect_until(a.http, session_id, "turn_complete")

    assert await eventually_async(lambda: lease_row(postgres_dsn, session_id)[0] is None)
    moved = await b.prompt(session_id, "two")  # free now: b takes it
    assert moved["replicaId"] == "b"
