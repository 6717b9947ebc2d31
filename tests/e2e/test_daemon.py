"""``cairn serve`` as a real process on a free loopback port, driven through the SDK.

Three tests whose turns all end within them share one daemon and its model (:func:`shared`);
the others start their own: they stop it, list all its sessions, give it an environment of
their own, or leave a slow reply behind."""

from __future__ import annotations

import asyncio
import contextlib
import json
import selectors
import signal
import subprocess
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest

from cairn.sdk import (
    DaemonClient,
    DaemonEvent,
    DaemonSessionClient,
    NotFoundError,
    PayloadTooLargeError,
    PromptQueueFullError,
    UnauthorizedError,
)
from cairn.testing import Reply, ScriptedServer, reply, tool_call
from cairn.testing.fixtures import isolated_env
from cairn.testing.tinyproxy import TinyProxy, find_tinyproxy

from ..entry_point import run_main
from ..polling import DEADLINE_SECONDS, eventually_async
from .conftest import CAIRN, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]

START_TIMEOUT = 20.0  # seconds for `cairn serve` to print its URL
RECAP = "<recap>Fixing the login bug. Next: run the auth tests.</recap>"
TOKEN = "e2e-token"


@dataclass
class Served:
    process: subprocess.Popen[str]
    url: str

    def stop(self, timeout: float = 15) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
        return self.process.wait(timeout)


def first_line(process: subprocess.Popen[str], timeout: float) -> str:
    assert process.stdout is not None
    with selectors.DefaultSelector() as selector:
        selector.register(process.stdout, selectors.EVENT_READ)
        if not selector.select(timeout):
            process.kill()
            raise TimeoutError("cairn serve printed nothing")
    return process.stdout.readline()


@pytest.fixture
def serve(
    cairn_env: dict[str, str], project: Path, scripted_server: ScriptedServer
) -> Iterator[object]:
    scripted_server.default = reply("ok")  # any turn a test does not script
    started: list[Served] = []

    def start(*args: str, env: dict[str, str] | None = None) -> Served:
        served = launch(args, cwd=project, env=env or cairn_env)
        started.append(served)
        return served

    yield start
    reap(started)


def launch(args: Sequence[str], *, cwd: Path, env: dict[str, str]) -> Served:
    """``cairn serve --port 0 <args>``, once it printed its URL."""
    process = subprocess.Popen(
        [*CAIRN, "serve", "--port", "0", *args],
        cwd=cwd,
        env=env,
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    line = first_line(process, START_TIMEOUT)
    assert "listening on " in line, (line, process.stderr.read() if process.stderr else "")
    return Served(process, line.split("listening on ")[1].split()[0])


def reap(started: Sequence[Served]) -> None:
    """Kill the daemons a test left running and close their pipes."""
    for served in started:
        if served.process.poll() is None:
            served.process.kill()
            served.process.wait(10)
        for stream in (served.process.stdout, served.process.stderr):
            if stream is not None:
                stream.close()


@dataclass
class Shared:
    """The module's shared daemon, its model (cleared for the test) and its project."""

    served: Served
    model: ScriptedServer
    project: Path


@pytest.fixture(scope="module")
def shared_model() -> Iterator[ScriptedServer]:
    """The scripted model of a module's shared daemons (:func:`cleared` for each test)."""
    with ScriptedServer() as server:
        yield server


def cleared(model: ScriptedServer) -> ScriptedServer:
    """``model`` with nothing recorded or queued, answering "ok" to what a test does not script:
    the test's own from here, once no turn of a test before can still reach it."""
    model.clear()
    model.handler = None
    model.default = reply("ok")
    return model


@pytest.fixture(scope="module")
def shared_daemon(
    shared_model: ScriptedServer, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Shared]:
    """One plain ``cairn serve`` for the module, with a model of its own. Sharing is sound for
    the tests that take :func:`shared`: each makes its own sessions and waits for all its turns
    (nothing of it reaches the model after it), asserts nothing about the daemon's other
    sessions, and a file it writes has a name no other test uses."""
    root = tmp_path_factory.mktemp("daemon")
    project = root / "project"  # as the project fixture makes it
    (project / ".git").mkdir(parents=True)
    write_settings(project, {"memory": {"enableManagedAutoMemory": False}})
    served = launch([], cwd=project, env=isolated_env(shared_model.base_url, root))
    yield Shared(served, shared_model, project)
    reap([served])


@pytest.fixture
def shared(shared_daemon: Shared) -> Shared:
    """The module's daemon, its model :func:`cleared`."""
    assert shared_daemon.served.process.poll() is None, "the shared daemon has exited"
    cleared(shared_daemon.model)
    return shared_daemon


async def until(
    session: DaemonSessionClient, kind: str, seen: list[DaemonEvent] | None = None
) -> list[DaemonEvent]:
    """The session's events up to the first of ``kind``, also appended to ``seen`` as they come."""
    seen = [] if seen is None else seen
    async with contextlib.aclosing(session.events()) as events:
        async for event in events:
            seen.append(event)
            if event.type == kind:
                return seen
    return seen


async def test_a_session_runs_end_to_end_through_the_sdk(
    serve: object, scripted_server: ScriptedServer, project: Path
) -> None:
    served = serve()  # type: ignore[operator]
    scripted_server.enqueue(reply(chunks=["The project ", "builds a CLI."]), purpose="main")
    async with DaemonClient(served.url) as client:
        capabilities = await client.capabilities()
        session = await DaemonSessionClient.create(client)

        admission = await session.prompt("what does this project do?")
        events = await until(session, "turn_complete")
        listed = await client.list_sessions()

    assert capabilities.workspace_cwd == str(project.resolve())
    assert [e.text for e in events if e.update_kind == "agent_message_chunk"] == [
        "The project ",
        "builds a CLI.",
    ]
    assert events[-1].prompt_id == admission.prompt_id
    assert events[-1].final_text == "The project builds a CLI."
    assert [s["sessionId"] for s in listed] == [session.session_id]
    [request] = scripted_server.requests_for("main")
    assert request.session_id == session.session_id
    assert served.stop() == 0


@pytest.mark.skipif(find_tinyproxy() is None, reason="tinyproxy is not installed")
async def test_cairn_serve_with_the_proxy_flag_reaches_the_model_through_it(
    serve: object, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    """The daemon spreads its sessions over several connection pools: each takes the proxy
    (tests/e2e/test_model_proxy.py has the rest of the proxy's behaviour)."""
    env = {k: v for k, v in cairn_env.items() if k.lower() != "no_proxy"}
    with TinyProxy() as proxy:
        served = serve("--proxy", proxy.url, env=env)  # type: ignore[operator]
        async with DaemonClient(served.url) as client:
            for _ in range(3):
                session = await DaemonSessionClient.create(client)
                await session.prompt("hi")
                await until(session, "turn_complete")
        carried = proxy.requests()

    chats = scripted_server.requests_for("main")
    assert len(chats) == 3
    assert all("tinyproxy" in request.headers.get("via", "") for request in chats)
    assert carried.count(f"POST {scripted_server.base_url}/chat/completions") >= 3
    assert served.stop() == 0


async def test_a_dropped_event_stream_reconnects_with_replay(shared: Shared) -> None:
    served, scripted_server = shared.served, shared.model
    scripted_server.enqueue(Reply(chunks=["a", "b", "c"], chunk_delay=0.1), purpose="main")
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt("stream slowly")

        before = await until(session, "turn_started")  # then the stream is dropped
        while (await session.status())["hasActivePrompt"]:  # the turn ends while nobody listens
            await asyncio.sleep(0.05)
        after = await until(session, "replay_complete")

    ids = [e.id for e in [*before, *after] if e.id is not None]
    assert ids == list(range(1, len(ids) + 1))  # nothing lost, nothing twice
    assert after[-1].data["replayedCount"] == len(after) - 1
    assert after[-2].type == "turn_complete"
    assert "".join(e.text for e in after if e.update_kind == "agent_message_chunk") == "abc"


async def test_cancel_stops_a_running_turn(serve: object, scripted_server: ScriptedServer) -> None:
    served = serve()  # type: ignore[operator]
    scripted_server.enqueue(Reply(text="too late", delay=30), purpose="main")
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt("a long job")
        await scripted_server.async_wait_for_requests(1, purpose="main")

        await session.cancel()
        events = await until(session, "turn_complete")

    assert events[-1].data["stopReason"] == "cancelled"


async def test_a_permission_vote_runs_the_tool(shared: Shared) -> None:
    served, scripted_server, project = shared.served, shared.model, shared.project
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "notes.md", "content": "# Notes\n"}), purpose="main"
    )
    scripted_server.enqueue(reply("Created notes.md."), purpose="main")
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt("create notes.md")
        [request] = [
            e for e in await until(session, "permission_request") if e.type == "permission_request"
        ]

        assert await session.respond_permission(request.data["requestId"], "allow_once")
        events = await until(session, "turn_complete")

    assert (project / "notes.md").read_text() == "# Notes\n"
    assert events[-1].final_text == "Created notes.md."
    assert request.data["toolCall"]["kind"] == "edit"


async def test_recap_is_null_for_a_short_session_and_text_for_a_long_one(shared: Shared) -> None:
    served, scripted_server = shared.served, shared.model
    async with DaemonClient(served.url) as client:
        short = await DaemonSessionClient.create(client)
        long = await DaemonSessionClient.create(client)
        for prompt in ("the login fails", "it is the token refresh", "fix it"):
            await long.prompt_and_wait(prompt)
        scripted_server.enqueue(reply(RECAP), purpose="recap")

        assert await short.recap() is None
        recap = await long.recap()

    assert recap == "Fixing the login bug. Next: run the auth tests."
    [request] = scripted_server.requests_for("recap")
    assert request.tools == []
    assert request.max_tokens == 300
    assert request.session_id == long.session_id
    assert request.user_texts()[:3] == ["the login fails", "it is the token refresh", "fix it"]


async def test_cancelling_a_recap_by_disconnecting_stops_the_model_query(
    serve: object, scripted_server: ScriptedServer
) -> None:
    served = serve()  # type: ignore[operator]
    scripted_server.enqueue(
        Reply(chunks=["<recap>", *["slow "] * 300], chunk_delay=0.02), purpose="recap"
    )
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt_and_wait("hi")
        call = asyncio.ensure_future(session.recap())
        [request] = await scripted_server.async_wait_for_requests(1, purpose="recap")

        call.cancel()  # the HTTP connection to the daemon closes
        assert await eventually_async(lambda: bool(scripted_server.dropped))
        health = await client.health()

    assert scripted_server.dropped == [request]
    assert health == {"status": "ok"}


async def test_error_statuses_reach_the_sdk_as_typed_errors(
    serve: object, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    served = serve()  # type: ignore[operator]
    secured = serve(env={**cairn_env, "CAIRN_SERVER_TOKEN": TOKEN})  # type: ignore[operator]
    scripted_server.default = Reply(text="slow", delay=3)
    async with DaemonClient(served.url) as client:
        with pytest.raises(NotFoundError) as not_found:
            await client.prompt("00000000-0000-4000-8000-000000000000", "hi")
        session = await client.create_session()
        with pytest.raises(PayloadTooLargeError) as too_large:
            await client.prompt(session.session_id, "x" * (11 * 1024 * 1024))
        for i in range(5):
            await client.prompt(session.session_id, f"p{i}")
        with pytest.raises(PromptQueueFullError) as queue_full:
            await client.prompt(session.session_id, "p5")
    async with DaemonClient(secured.url) as client:
        with pytest.raises(UnauthorizedError) as unauthorized:
            await client.create_session()
    async with DaemonClient(secured.url, token=TOKEN) as client:
        await client.create_session()
    async with httpx.AsyncClient(trust_env=False) as http:
        forbidden = await http.get(
            served.url + "/health", headers={"Origin": "https://evil.example"}
        )

    assert (not_found.value.status, not_found.value.code) == (404, "session_not_found")
    assert (too_large.value.status, too_large.value.code) == (413, "payload_too_large")
    assert (queue_full.value.status, queue_full.value.code) == (429, "prompt_queue_full")
    assert (unauthorized.value.status, unauthorized.value.body) == (401, {"error": "Unauthorized"})
    assert forbidden.status_code == 403


async def test_sigterm_cancels_turns_flushes_recordings_and_exits(
    serve: object, scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    served = serve()  # type: ignore[operator]
    scripted_server.enqueue(Reply(text="never", delay=30), purpose="main")
    async with DaemonClient(served.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt("interrupted work")
        await scripted_server.async_wait_for_requests(1, purpose="main")
        seen: list[DaemonEvent] = []
        reader = asyncio.ensure_future(until(session, "session_closed", seen))
        assert await eventually_async(lambda: bool(seen))  # connected: the events so far came

        served.process.send_signal(signal.SIGTERM)
        events = await asyncio.wait_for(reader, DEADLINE_SECONDS)

    assert await asyncio.to_thread(served.process.wait, 10) == 0
    kinds = [e.type for e in events]
    assert kinds[-2:] == ["turn_complete", "session_closed"]
    assert events[-2].data["stopReason"] == "cancelled"
    assert events[-1].data["reason"] == "daemon_shutdown"
    [recording] = Path(cairn_env["CAIRN_HOME"]).glob(f"projects/*/chats/{session.session_id}.jsonl")
    records = [json.loads(line) for line in recording.read_text().splitlines()]
    assert any("interrupted work" in json.dumps(r) for r in records if r.get("type") == "user")


def test_a_public_bind_without_a_token_refuses_to_start(
    cairn_env: dict[str, str], project: Path
) -> None:
    done = subprocess.run(
        [*CAIRN, "serve", "--host", "0.0.0.0", "--port", "0"],
        cwd=project,
        env=cairn_env,
        capture_output=True,
        text=True,
        timeout=30,
    )

    assert done.returncode == 42
    assert "without a token" in done.stderr
    assert done.stdout == ""


@pytest.mark.parametrize(
    ("flags", "message"),
    [
        (["--lease-seconds", "3"], "--lease-seconds needs --database"),
        (["--drain-seconds", "5"], "--drain-seconds needs --database"),
        (
            ["--database", "postgresql://127.0.0.1:1/none", "--lease-seconds", "0.5"],
            "--lease-seconds must be between 1 and 300, not 0.5",
        ),
        (
            ["--database", "postgresql://127.0.0.1:1/none", "--drain-seconds", "7200"],
            "--drain-seconds must be between 0 and 3600, not 7200",
        ),
    ],
)
def test_a_lease_or_drain_flag_out_of_place_or_bounds_stops_serve_with_the_reason(
    cairn_env: dict[str, str], project: Path, flags: list[str], message: str
) -> None:
    """Through the entry point in this process (the same check's exit from a real process:
    :func:`test_a_public_bind_without_a_token_refuses_to_start`)."""
    done = run_main(["serve", "--port", "0", *flags], cwd=project, env=cairn_env)

    assert done.returncode == 42, done.stderr
    assert message in done.stderr
    assert done.stdout == ""
