"""DaemonClient against a real in-process daemon on the scripted model."""

from __future__ import annotations

import asyncio
import contextlib
import socket
from pathlib import Path

import httpx
import pytest

from cairn.sdk import (
    DaemonClient,
    DaemonConnectionError,
    DaemonEvent,
    DaemonSessionClient,
    FeatureNotSupported,
    NotFoundError,
    PayloadTooLargeError,
    PromptQueueFullError,
    SessionLimitError,
    TurnError,
    UnauthorizedError,
)
from cairn.testing import Reply, ScriptedServer, error_reply, reply, tool_call

from ..polling import eventually_async
from .conftest import Daemon, StartDaemon

TOKEN = "sdk-token"
RECAP = "<recap>Fixing the login bug. Next: run the tests.</recap>"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


async def first_of(stream: object, kind: str) -> DaemonEvent:
    async with contextlib.aclosing(stream) as events:  # type: ignore[type-var]
        async for event in events:
            if event.type == kind:
                return event
    raise AssertionError(f"no {kind} event")


# ----- discovery -----


async def test_health_and_capabilities(daemon: Daemon, workspace: Path) -> None:
    async with DaemonClient(daemon.url) as client:
        assert await client.health() == {"status": "ok"}
        capabilities = await client.capabilities()

    assert capabilities.v == 1
    assert capabilities.supports("session_recap")
    assert capabilities.workspace_cwd == str(workspace.resolve())


async def test_capabilities_are_fetched_once(daemon: Daemon) -> None:
    paths: list[str] = []

    async def record(request: httpx.Request) -> None:
        paths.append(request.url.path)

    http = httpx.AsyncClient(trust_env=False, event_hooks={"request": [record]})
    async with DaemonClient(daemon.url, http_client=http) as client:
        await client.capabilities()
        await client.require("session_recap")
        await client.capabilities(refresh=True)
    await http.aclose()

    assert paths == ["/capabilities", "/capabilities"]


async def test_a_daemon_without_recap_fails_before_any_recap_request() -> None:
    paths: list[str] = []

    def old_daemon(request: httpx.Request) -> httpx.Response:
        paths.append(request.url.path)
        if request.url.path == "/capabilities":
            features = ["health", "session_create", "session_prompt"]
            return httpx.Response(200, json={"v": 1, "mode": "x", "features": features})
        return httpx.Response(404, json={"error": "no route"})

    http = httpx.AsyncClient(transport=httpx.MockTransport(old_daemon))
    async with DaemonClient("http://daemon.test", http_client=http) as client:
        with pytest.raises(FeatureNotSupported) as raised:
            await client.recap_session("s1")
    await http.aclose()

    assert raised.value.feature == "session_recap"
    assert paths == ["/capabilities"]


# ----- sessions -----


async def test_create_list_and_close_a_session(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session(approval_mode="plan")
        listed = await client.list_sessions()
        await client.close_session(info.session_id)
        await client.close_session(info.session_id)  # already gone: not an error
        status_error = None
        try:
            await client.session_status(info.session_id)
        except NotFoundError as exc:
            status_error = exc

    assert info.attached is False and info.approval_mode == "plan"
    assert [s["sessionId"] for s in listed if s["live"]] == [info.session_id]
    assert status_error is not None
    assert (status_error.status, status_error.code) == (404, "session_not_found")


async def test_loading_a_recorded_session(daemon: Daemon, scripted_server: ScriptedServer) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        await client.prompt_and_wait(info.session_id, "hello there")
        await client.close_session(info.session_id)

        loaded = await client.load_session(info.session_id)
        first = await first_of(client.events(info.session_id, last_event_id=0), "session_update")

    assert loaded.session_id == info.session_id and not loaded.attached
    assert first.update_kind == "user_message_chunk" and first.text == "hello there"


# ----- turns -----


async def test_prompt_and_wait_returns_the_final_text(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply(chunks=["It ", "works."]), purpose="main")
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()

        text = await client.prompt_and_wait(info.session_id, "try it")

    assert text == "It works."


async def test_content_blocks_are_sent_as_the_prompt(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        await client.prompt_and_wait(
            info.session_id,
            [
                {"type": "text", "text": "explain"},
                {"type": "resource", "resource": {"uri": "file:///a.py", "text": "x = 1"}},
            ],
        )

    [request] = scripted_server.requests_for("main")
    assert request.contains("x = 1") and request.contains("explain")


async def test_a_failed_turn_raises_turn_error(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(error_reply(400, "the model refused"), purpose="main")
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()

        with pytest.raises(TurnError) as raised:
            await client.prompt_and_wait(info.session_id, "hi")

    assert raised.value.code == "model_error"
    assert "the model refused" in str(raised.value)


async def test_events_stream_typed_envelopes(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("Hi!"), purpose="main")
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        admission = await client.prompt(info.session_id, "hello")
        seen: list[DaemonEvent] = []
        async with contextlib.aclosing(
            client.events(info.session_id, last_event_id=admission.last_event_id)
        ) as events:
            async for event in events:
                seen.append(event)
                if event.type == "turn_complete":
                    break

    chunks = [e.text for e in seen if e.update_kind == "agent_message_chunk"]
    assert chunks == ["Hi!"]
    assert seen[-1].prompt_id == admission.prompt_id
    assert seen[-1].final_text == "Hi!"
    assert [e.id for e in seen if e.id is not None] == sorted(e.id for e in seen if e.id)


async def test_an_evicted_stream_reconnects_and_misses_nothing(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        bus = daemon.server.registry.get(info.session_id).bus
        received: list[DaemonEvent] = []
        async with contextlib.aclosing(client.events(info.session_id, max_queued=16)) as events:
            async for event in events:
                if not received:  # the stream is open: flood it while nobody reads
                    for i in range(100):
                        bus.publish("notice", {"n": i})
                received.append(event)
                if event.data.get("n") == 99:
                    break

    assert "client_evicted" in [e.type for e in received]
    assert [e.data["n"] for e in received if e.type == "notice"] == list(range(100))


async def test_events_of_an_unreachable_daemon_raise_connection_error() -> None:
    async with DaemonClient(f"http://127.0.0.1:{free_port()}") as client:
        with pytest.raises(DaemonConnectionError):
            await first_of(client.events("s1", last_event_id=0, reconnect=False), "x")


async def test_cancel_ends_the_running_turn(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(Reply(text="never", delay=10), purpose="main")
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        admission = await client.prompt(info.session_id, "slow")
        await scripted_server.async_wait_for_requests(1, purpose="main")

        await client.cancel(info.session_id)
        event = await client.wait_for_turn(info.session_id, admission)

    assert event.data["stopReason"] == "cancelled"


async def test_a_permission_vote_is_accepted_once(
    daemon: Daemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    target = workspace / "out.txt"
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": str(target), "content": "x"}), purpose="main"
    )
    scripted_server.enqueue(reply("Done."), purpose="main")
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        admission = await client.prompt(info.session_id, "write")
        request = await first_of(
            client.events(info.session_id, last_event_id=0), "permission_request"
        )

        accepted = await client.respond_permission(
            info.session_id, request.data["requestId"], "allow_once"
        )
        again = await client.respond_permission(
            info.session_id, request.data["requestId"], "reject_once"
        )
        done = await client.wait_for_turn(info.session_id, admission)

    assert (accepted, again) == (True, False)
    assert done.final_text == "Done."
    assert target.read_text() == "x"


# ----- context -----


async def test_a_sessions_context_and_usage_by_purpose(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt_and_wait("what does this project do?")

        answer = await session.context()

    assert answer["sessionId"] == session.session_id
    parts = {part["name"]: part["tokens"] for part in answer["context"]["parts"]}
    assert parts["tools"] > 0 and parts["conversation"] > 0
    assert answer["context"]["estimatedTokens"] == sum(parts.values())
    assert answer["usage"]["session"]["main"]["input_tokens"] > 0


# ----- recap -----


async def test_recap_is_none_for_a_short_session(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()

        assert await client.recap_session(info.session_id) is None


async def test_recap_is_not_bound_by_the_default_timeout(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        await client.prompt_and_wait(info.session_id, "fix the login bug")
    scripted_server.enqueue(Reply(text=RECAP, delay=0.8), purpose="recap")

    # Only the recap runs under the short default (a loaded daemon may answer the rest slower).
    async with DaemonClient(daemon.url, timeout=0.3) as client:
        recap = await client.recap_session(info.session_id)

    assert recap == "Fixing the login bug. Next: run the tests."


async def test_cancelling_a_recap_call_cancels_the_model_query(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        await client.prompt_and_wait(info.session_id, "hi")
        scripted_server.enqueue(
            Reply(chunks=["<recap>", *["slow "] * 200], chunk_delay=0.02), purpose="recap"
        )
        call = asyncio.ensure_future(client.recap_session(info.session_id))
        [request] = await scripted_server.async_wait_for_requests(1, purpose="recap")

        call.cancel()
        assert await eventually_async(lambda: bool(scripted_server.dropped))

    assert scripted_server.dropped == [request]


# ----- typed errors -----


async def test_a_missing_token_is_unauthorized(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(token=TOKEN)
    async with DaemonClient(daemon.url) as client:
        with pytest.raises(UnauthorizedError) as raised:
            await client.create_session()
    async with DaemonClient(daemon.url, token=TOKEN) as client:
        await client.create_session()

    assert raised.value.status == 401
    assert raised.value.body == {"error": "Unauthorized"}


async def test_a_strict_route_without_a_daemon_token_is_token_required(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        with pytest.raises(UnauthorizedError) as raised:
            await client.set_approval_mode(info.session_id, "yolo")

    assert raised.value.code == "token_required"


async def test_with_a_token_the_approval_mode_can_be_set(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(token=TOKEN)
    async with DaemonClient(daemon.url, token=TOKEN) as client:
        info = await client.create_session()

        result = await client.set_approval_mode(info.session_id, "auto-edit")

    assert result == {"sessionId": info.session_id, "mode": "auto-edit", "previous": "default"}


async def test_a_full_prompt_queue_is_prompt_queue_full(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.default = Reply(text="slow", delay=2)
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        for i in range(5):
            await client.prompt(info.session_id, f"p{i}")
        with pytest.raises(PromptQueueFullError) as raised:
            await client.prompt(info.session_id, "p5")

    assert (raised.value.status, raised.value.code) == (429, "prompt_queue_full")


async def test_the_session_limit_is_session_limit_error(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(max_sessions=1)
    async with DaemonClient(daemon.url) as client:
        await client.create_session()
        with pytest.raises(SessionLimitError) as raised:
            await client.create_session()

    assert raised.value.code == "session_limit_exceeded"


async def test_a_body_over_the_limit_is_payload_too_large(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(max_body_bytes=512)
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        with pytest.raises(PayloadTooLargeError) as raised:
            await client.prompt(info.session_id, "x" * 1000)

    assert raised.value.status == 413


async def test_an_unreachable_daemon_is_a_connection_error() -> None:
    """Once its retries are spent (one here: the default five wait about 8 s in all)."""
    async with DaemonClient(f"http://127.0.0.1:{free_port()}", retries=1) as client:
        with pytest.raises(DaemonConnectionError):
            await client.health()


async def test_the_client_id_is_sent_with_every_request(daemon: Daemon) -> None:
    seen: list[str | None] = []

    async def record(request: httpx.Request) -> None:
        seen.append(request.headers.get("X-Cairn-Client-Id"))

    http = httpx.AsyncClient(trust_env=False, event_hooks={"request": [record]})
    async with DaemonClient(daemon.url, client_id="editor-1", http_client=http) as client:
        await client.health()
        await client.create_session()
    await http.aclose()

    assert seen == ["editor-1", "editor-1"]
