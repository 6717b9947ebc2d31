"""Three real ``cairn serve --database`` replicas behind a real HAProxy, over a real PostgreSQL,
driven through the SDK (#31): any replica serves any session, a replica killed mid-turn loses
nothing that was recorded, and a rolling restart under load fails no request and loses no event.

The load balancer is the one docs/daemon.md documents (``cairn.testing.haproxy``): round robin,
no stickiness. Each replica has its own ``HOME`` and ``CAIRN_HOME``: nothing of a session is
shared on disk, only in the database. The module's tests share one cluster
(:func:`shared_cluster`): starting three replicas and the balancer for each test was most of
their CPU.
"""

from __future__ import annotations

import asyncio
import contextlib
import signal
import socket
import subprocess
import threading
import time
from collections.abc import AsyncGenerator, AsyncIterator, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import psycopg
import pytest

from cairn.sdk import DaemonClient, DaemonEvent, UnavailableError
from cairn.testing import RecordedRequest, Reply, ScriptedServer, reply
from cairn.testing.fixtures import isolated_env
from cairn.testing.haproxy import HAProxy, find_haproxy
from cairn.testing.postgres import PostgresServer

from ..daemon.helpers import said
from ..memory.postgres_helpers import APP_ROLE, postgres_server
from ..polling import eventually_async, eventually_awaited
from .conftest import CAIRN, write_settings
from .test_daemon import cleared, first_line, shared_model

__all__ = ["postgres_server", "shared_model"]  # fixtures

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(240),
    pytest.mark.skipif(find_haproxy() is None, reason="HAProxy is not installed"),
]

TOKEN = "replicas-token"
START_TIMEOUT = 60.0  # seconds for a replica to print its URL on a loaded machine
FAILOVER_BOUND = 10.0  # the bound: a session moves within this after kill -9
REPLICA_WAIT = 60.0  # seconds for a replica (or the balancer) to see a change under load
HELD = "HOLD "  # a prompt starting with this runs until the test releases it
NO_TENANT = "(none)"


def free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


@dataclass
class Replica:
    """One ``cairn serve`` process, restarted on the same port (the load balancer's address)."""

    name: str
    port: int
    env: dict[str, str]
    args: list[str]
    cwd: Path
    process: subprocess.Popen[str] | None = None

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    @property
    def log(self) -> Path:
        """Its stderr (the operator's log), every run appended: a pipe nobody reads would fill
        up and stop the replica."""
        return Path(self.env["HOME"]).parent / "stderr.log"

    @property
    def running(self) -> bool:
        return self.process is not None and self.process.poll() is None

    def start(self) -> None:
        with self.log.open("a") as log:
            self.process = subprocess.Popen(
                [*CAIRN, "serve", "--port", str(self.port), "--replica-id", self.name, *self.args],
                cwd=self.cwd,
                env=self.env,
                stdin=subprocess.DEVNULL,
                stdout=subprocess.PIPE,
                stderr=log,
                text=True,
            )
        line = first_line(self.process, START_TIMEOUT)
        assert "listening on " in line, (line, self.log.read_text()[-3000:])

    def terminate(self) -> int:
        """SIGTERM: drain and exit; its exit code."""
        assert self.process is not None
        self.process.send_signal(signal.SIGTERM)
        return self.process.wait(60)

    def kill(self) -> None:
        assert self.process is not None
        self.process.kill()  # SIGKILL: no drain, no lease given up
        self.process.wait(30)

    def reap(self) -> None:
        if self.process is None:
            return
        if self.process.poll() is None:
            self.process.kill()
            self.process.wait(30)
        if self.process.stdout is not None:
            self.process.stdout.close()


@dataclass
class Cluster:
    replicas: list[Replica]
    balancer: HAProxy
    dsn: str
    released: threading.Event = field(default_factory=threading.Event)

    def client(self, **options: Any) -> DaemonClient:
        return DaemonClient(self.balancer.url, TOKEN, **options)

    def by_name(self, name: str | None) -> Replica:
        [found] = [r for r in self.replicas if r.name == name]
        return found

    async def all_ready(self) -> None:
        """Until every replica says it is ready and the load balancer sends to all of them."""
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:

            async def ready(replica: Replica) -> bool:
                with contextlib.suppress(httpx.HTTPError):
                    return (await http.get(f"{replica.url}/ready")).status_code == 200
                return False

            for replica in self.replicas:
                up = await eventually_awaited(lambda r=replica: ready(r), REPLICA_WAIT)  # type: ignore[misc]
                assert up, f"{replica.name} is not ready"
        await self.balanced()

    async def balanced(self) -> None:
        """Until the load balancer has answered from every replica (its checks passed)."""
        seen: set[str] = set()
        async with httpx.AsyncClient(trust_env=False, timeout=5) as http:

            async def answered_by_all() -> bool:
                with contextlib.suppress(httpx.HTTPError):
                    answer = await http.get(
                        f"{self.balancer.url}/capabilities",
                        headers={"Authorization": f"Bearer {TOKEN}"},
                    )
                    if answer.status_code == 200:
                        seen.add(answer.json()["replicaId"])
                return seen >= {r.name for r in self.replicas}

            balanced = await eventually_awaited(answered_by_all, REPLICA_WAIT)
            assert balanced, (seen, self.balancer.log[-2000:])

    def rows(self, table: str, session_id: str, column: str) -> list[tuple[int, str]]:
        """``(seq, column)`` of a session's rows, in order, read straight from the database."""
        with psycopg.connect(self.dsn) as connection:
            connection.execute("SELECT set_config('cairn.tenant', %s, false)", (NO_TENANT,))
            return [
                (int(seq), value)
                for seq, value in connection.execute(
                    f"SELECT seq, {column} FROM {table} WHERE session_id = %s ORDER BY seq",  # noqa: S608
                    (session_id,),
                ).fetchall()
            ]

    def records(self, session_id: str) -> list[tuple[int, str]]:
        return self.rows("cairn_session_records", session_id, "record")

    def events(self, session_id: str) -> list[tuple[int, str]]:
        return self.rows("cairn_session_events", session_id, "type")


def model(released: threading.Event) -> Any:
    """The scripted model: ``HOLD ...`` answers once the test releases it, anything else at
    once with ``echo: <prompt>``."""

    def answer(request: RecordedRequest) -> Reply | None:
        if request.purpose != "main":
            return None
        text = said(request)
        if text.startswith(HELD):
            return Reply(text=f"echo: {text}", hold=released)
        return reply(f"echo: {text}")

    return answer


def renamed(name: str) -> str:
    """The next replica id of a replica started again: ``r1`` → ``r1-2`` → ``r1-3``."""
    base, _, generation = name.partition("-")
    return f"{base}-{int(generation or 1) + 1}"


@pytest.fixture
def scripted_server(shared_model: ScriptedServer) -> ScriptedServer:
    """The cluster's scripted model (its replicas are pointed at it), :func:`cleared`."""
    return cleared(shared_model)


@pytest.fixture(scope="module")
def shared_cluster(
    shared_model: ScriptedServer,
    postgres_server: PostgresServer,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[Cluster]:
    """Three replicas (each with its own home) behind HAProxy, over one database, for the
    module. Sharing them is sound: each test makes its own sessions (ids the daemon draws) and
    reads back only theirs, gets the model with nothing recorded and its own ``released``, and
    starts with every replica running and balanced (:func:`cluster` starts again one that a test
    before killed or stopped); a replica keeps nothing of a session but its lease, and no test
    asks for another's sessions."""
    root = tmp_path_factory.mktemp("replicas")
    cairn_env = isolated_env(shared_model.base_url, root)
    project = root / "project"  # as the project fixture makes it
    (project / ".git").mkdir(parents=True)
    write_settings(project, {"memory": {"enableManagedAutoMemory": False}})
    dsn = postgres_server.create_database(f"replicas_{root.name}", owner=APP_ROLE)
    replicas: list[Replica] = []
    for number in range(1, 4):
        env = dict(cairn_env)
        home = root / f"replica-{number}"
        env.update(HOME=str(home / "home"), CAIRN_HOME=str(home / "cairn-home"))
        for folder in ("home", "cairn-home"):
            (home / folder).mkdir(parents=True)
        args = ["--token", TOKEN, "--database", dsn, "--drain-seconds", "20"]
        replicas.append(Replica(f"r{number}", free_port(), env, args, project))
    balancer = HAProxy([f"127.0.0.1:{r.port}" for r in replicas], token=TOKEN)
    cluster = Cluster(replicas, balancer, dsn)
    try:
        with ThreadPoolExecutor(len(replicas)) as starting:
            list(starting.map(Replica.start, replicas))
        balancer.start()
        yield cluster
    finally:
        cluster.released.set()
        for replica in replicas:
            replica.reap()
        balancer.stop()


@pytest.fixture
async def cluster(
    shared_cluster: Cluster, scripted_server: ScriptedServer
) -> AsyncIterator[Cluster]:
    """The module's cluster with every replica running (one a test before killed or stopped is
    started again, on its port: a killed one under a new replica id, since its own stays taken
    for two leases), ready and balanced, answering from ``scripted_server``."""
    shared_cluster.released = threading.Event()
    scripted_server.handler = model(shared_cluster.released)  # type: ignore[assignment]
    scripted_server.default = reply("ok")
    try:
        for replica in shared_cluster.replicas:
            if not replica.running:
                replica.reap()
                if replica.process is not None and replica.process.returncode != 0:  # killed
                    replica.name = renamed(replica.name)
                await asyncio.to_thread(replica.start)
        await shared_cluster.all_ready()
        yield shared_cluster
    finally:
        shared_cluster.released.set()


class Follower:
    """A client following one session's events through the load balancer, reconnecting as
    the SDK does; what it saw, in order."""

    def __init__(self, client: DaemonClient, session_id: str) -> None:
        self.events: list[DaemonEvent] = []
        self.error: BaseException | None = None  # why following stopped, if it did
        self._task = asyncio.ensure_future(self._follow(client, session_id))

    async def _follow(self, client: DaemonClient, session_id: str) -> None:
        try:
            async with contextlib.aclosing(client.events(session_id, last_event_id=0)) as stream:
                async for event in stream:
                    self.events.append(event)
        except Exception as error:  # the test reports it
            self.error = error

    def caught_up(self, last: int) -> bool:
        return self.error is not None or (bool(self.ids) and self.ids[-1] >= last)

    def ended(self, prompt_id: str) -> DaemonEvent | None:
        for event in self.events:
            if event.type in ("turn_complete", "turn_error") and event.prompt_id == prompt_id:
                return event
        return None

    @property
    def ids(self) -> list[int]:
        return [e.id for e in self.events if e.id is not None]

    async def stop(self) -> None:
        self._task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await self._task


async def turn_end(stream: AsyncGenerator[DaemonEvent, None], prompt_id: str) -> DaemonEvent:
    """The ``turn_complete`` of ``prompt_id`` on ``stream`` (closed then)."""
    async with contextlib.aclosing(stream) as events:
        async for event in events:
            if event.type == "turn_complete" and event.prompt_id == prompt_id:
                return event
    raise AssertionError(f"the stream ended before {prompt_id} completed")


async def test_prompts_land_on_any_replica_and_a_stream_on_one_sees_another_run_the_turn(
    cluster: Cluster, scripted_server: ScriptedServer
) -> None:
    async with cluster.client() as client:
        sessions = [(await client.create_session()).session_id for _ in range(3)]
        admissions = [
            await client.prompt(session_id, f"turn {n} of {session_id[:8]}")
            for n in range(3)
            for session_id in sessions
        ]
        for session_id, admission in zip(sessions * 3, admissions, strict=True):
            await client.wait_for_turn(session_id, admission)

        # A turn run by one replica, streamed by another (each addressed directly).
        runner, watcher = cluster.replicas[0], cluster.replicas[1]
        async with (
            DaemonClient(runner.url, TOKEN) as on_runner,
            DaemonClient(watcher.url, TOKEN) as on_watcher,
        ):
            admission = await on_runner.prompt(sessions[0], "run by r1, watched on r2")
            # From the admission's event id: a stream opened once the turn ended (a loaded
            # machine) replays it. Regression: it opened at the session's last id then, after
            # turn_complete, and waited for it until the test's timeout.
            streamed = on_watcher.events(sessions[0], last_event_id=admission.last_event_id)
            event = await asyncio.wait_for(turn_end(streamed, admission.prompt_id), REPLICA_WAIT)

    assert {a.replica_id for a in admissions} == {r.name for r in cluster.replicas}
    assert admission.replica_id == runner.name
    assert event.final_text == "echo: run by r1, watched on r2"
    assert len(scripted_server.requests_for("main")) == 10


async def test_a_replica_killed_mid_turn_loses_nothing_and_the_session_moves_on(
    cluster: Cluster, scripted_server: ScriptedServer
) -> None:
    """kill -9 of the replica running a turn: the next request on the session succeeds through
    another replica within 10 s, the interrupted turn is reported (never run again), every
    record and event written before the kill is still there, and prompts retried with their
    Idempotency-Key run once."""
    async with cluster.client() as client:
        session_id = (await client.create_session()).session_id
        follower = Follower(client, session_id)
        assert await client.prompt_and_wait(session_id, "first") == "echo: first"
        running = await client.prompt(session_id, f"{HELD}second", idempotency_key="k-2")
        queued = await client.prompt(session_id, "third", idempotency_key="k-3")
        await scripted_server.async_wait_for_requests(2, purpose="main")
        owner = cluster.by_name((await client.session_status(session_id))["replicaId"])

        def second_turn_logged() -> bool:
            return [kind for _, kind in cluster.events(session_id)].count("turn_started") == 2

        assert await eventually_async(second_turn_logged)
        records, events = cluster.records(session_id), cluster.events(session_id)

        owner.kill()
        killed_at = time.monotonic()
        after = await client.prompt(session_id, "fourth", idempotency_key="k-4")
        moved_in = time.monotonic() - killed_at
        retried_running = await client.prompt(session_id, f"{HELD}second", idempotency_key="k-2")
        retried_queued = await client.prompt(session_id, "third", idempotency_key="k-3")
        turns = asyncio.gather(*(client.wait_for_turn(session_id, a) for a in (queued, after)))
        try:  # bounded, so a turn that never runs fails here and says what the model was asked
            ends = await asyncio.wait_for(turns, REPLICA_WAIT)
        except TimeoutError:
            asked = [said(r) for r in scripted_server.requests_for("main")]
            raise AssertionError(f"the turns after the kill never ended; asked: {asked}") from None

        def followed_to_the_end() -> bool:  # its stream lags behind wait_for_turn's own
            seen = [follower.ended(a.prompt_id) for a in (running, after)]
            return follower.error is not None or None not in seen

        assert await eventually_async(followed_to_the_end)
        await follower.stop()

    assert moved_in < FAILOVER_BOUND, f"the session moved after {moved_in:.1f} s"
    assert after.replica_id in {r.name for r in cluster.replicas} - {owner.name}
    assert follower.error is None
    interrupted = follower.ended(running.prompt_id)
    assert interrupted is not None and interrupted.type == "turn_error"
    assert interrupted.data["code"] == "interrupted"
    assert [e.final_text for e in ends] == ["echo: third", "echo: fourth"]
    assert (retried_running.prompt_id, retried_running.replayed) == (running.prompt_id, True)
    assert retried_running.state == "interrupted"
    assert (retried_queued.prompt_id, retried_queued.replayed) == (queued.prompt_id, True)
    asked = [said(r) for r in scripted_server.requests_for("main")]
    assert asked == ["first", f"{HELD}second", "third", "fourth"]
    resumed = scripted_server.requests_for("main")[2].last_user_text()
    assert "The previous cairn process stopped before the last turn finished" in resumed
    assert cluster.records(session_id)[: len(records)] == records
    assert cluster.events(session_id)[: len(events)] == events
    assert follower.ids == list(range(1, len(follower.ids) + 1))  # no gap, nothing twice
    assert follower.ids[-1] == cluster.events(session_id)[-1][0]


async def test_a_rolling_restart_under_load_fails_no_request_and_loses_no_event(
    cluster: Cluster,
) -> None:
    """20 sessions prompting without pause while each replica in turn gets SIGTERM, drains,
    exits and starts again: every prompt the SDK sent (retrying as documented) ends with its
    answer, and every session's stream, followed through the restarts, holds every event of
    its log exactly once."""
    stop = asyncio.Event()
    answered: dict[str, list[str]] = {}
    failures: list[BaseException] = []

    async def keep_prompting(client: DaemonClient, session_id: str) -> None:
        answered[session_id] = []
        number = 0
        while not stop.is_set():
            number += 1
            try:
                text = await client.prompt_and_wait(session_id, f"{session_id[:8]} #{number}")
            except Exception as error:  # every failure is the test's finding
                failures.append(error)
                return
            answered[session_id].append(text)

    async with cluster.client() as client:
        sessions = [(await client.create_session()).session_id for _ in range(20)]
        followers = [Follower(client, session_id) for session_id in sessions]
        load = [asyncio.ensure_future(keep_prompting(client, s)) for s in sessions]

        def turns() -> int:
            return sum(len(texts) for texts in answered.values())

        for replica in cluster.replicas:
            before = turns()
            assert await eventually_async(lambda b=before: turns() >= b + 20 or bool(failures))  # type: ignore[misc]
            assert await asyncio.to_thread(replica.terminate) == 0
            await asyncio.to_thread(replica.start)
            await cluster.all_ready()
        before = turns()
        assert await eventually_async(lambda: turns() >= before + 20 or bool(failures))
        stop.set()
        _, pending = await asyncio.wait(load, timeout=60)
        assert not pending, f"{len(pending)} sessions still wait for a turn after the load stopped"
        logged = {session_id: cluster.events(session_id) for session_id in sessions}
        for follower, session_id in zip(followers, sessions, strict=True):
            last = logged[session_id][-1][0]
            await eventually_async(lambda f=follower, n=last: f.caught_up(n))  # type: ignore[misc]
            await follower.stop()

    assert failures == []
    assert [f.error for f in followers] == [None] * len(followers)
    for session_id, texts in answered.items():
        assert texts == [f"echo: {session_id[:8]} #{n}" for n in range(1, len(texts) + 1)]
    for follower, session_id in zip(followers, sessions, strict=True):
        assert follower.ids == [seq for seq, _ in logged[session_id]]  # each once, in order
        assert [e.type for e in follower.events if e.id is not None] == [
            kind for _, kind in logged[session_id]
        ]


async def test_sigterm_drains_a_replica_its_turn_ends_there_and_its_queue_moves_on(
    cluster: Cluster, scripted_server: ScriptedServer
) -> None:
    """SIGTERM to the replica running a turn: it stops being ready and refuses new work with
    ``replica_draining`` at once, lets the running turn end (within ``--drain-seconds``), hands
    the prompt queued behind it to another replica, and exits 0; nothing runs twice."""
    draining, other = cluster.replicas[0], cluster.replicas[1]
    async with (
        DaemonClient(draining.url, TOKEN, retries=0) as on_draining,
        DaemonClient(other.url, TOKEN) as on_other,
    ):
        session_id = (await on_draining.create_session()).session_id
        follower = Follower(on_other, session_id)
        running = await on_draining.prompt(session_id, f"{HELD}running at SIGTERM")
        queued = await on_draining.prompt(session_id, "queued behind it")
        await scripted_server.async_wait_for_requests(1, purpose="main")
        assert draining.process is not None
        draining.process.send_signal(signal.SIGTERM)

        async def not_ready() -> bool:
            with contextlib.suppress(httpx.HTTPError):
                async with httpx.AsyncClient(trust_env=False, timeout=5) as http:
                    answer = await http.get(f"{draining.url}/ready")
                    return answer.status_code == 503 and answer.json()["reason"] == "shutting down"
            return False

        assert await eventually_awaited(not_ready, REPLICA_WAIT)
        with pytest.raises(UnavailableError) as refused:
            await on_draining.create_session()
        cluster.released.set()
        exit_code = await asyncio.to_thread(draining.process.wait, 60)
        assert await eventually_async(lambda: follower.ended(queued.prompt_id) is not None)
        await follower.stop()

    assert refused.value.code == "replica_draining"
    assert exit_code == 0
    ended = [follower.ended(p.prompt_id) for p in (running, queued)]
    assert [e.type if e else None for e in ended] == ["turn_complete", "turn_complete"]
    assert [e.final_text if e else None for e in ended] == [
        f"echo: {HELD}running at SIGTERM",
        "echo: queued behind it",
    ]
    asked = [said(r) for r in scripted_server.requests_for("main")]
    assert asked == [f"{HELD}running at SIGTERM", "queued behind it"]
    assert follower.ids == list(range(1, len(follower.ids) + 1))
