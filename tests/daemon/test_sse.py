"""The event stream over real HTTP: headers, heartbeats, replay, disconnects, slow readers."""

from __future__ import annotations

import asyncio
import json
import socket

from .conftest import StartDaemon
from .helpers import Frame, RunningDaemon, collect_until, read_frames


async def test_the_stream_is_an_uncached_event_stream(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    async with daemon.http.stream("GET", f"/session/{session_id}/events") as response:
        assert response.status_code == 200
        assert response.headers["content-type"].startswith("text/event-stream")
        assert response.headers["cache-control"] == "no-cache"


async def test_an_idle_stream_sends_heartbeats(start_daemon: StartDaemon) -> None:
    daemon = await start_daemon(heartbeat_seconds=0.05)
    session_id = await daemon.create_session()

    async with (
        asyncio.timeout(5),
        daemon.http.stream("GET", f"/session/{session_id}/events") as response,
    ):
        async for frame in read_frames(response):
            assert frame == ": heartbeat"
            break


async def test_closing_the_session_ends_the_stream_with_session_closed(
    daemon: RunningDaemon,
) -> None:
    session_id = await daemon.create_session()
    frames: list[Frame] = []

    async def read() -> None:
        async with daemon.http.stream("GET", f"/session/{session_id}/events") as response:
            async for frame in read_frames(response):
                if isinstance(frame, Frame):
                    frames.append(frame)

    reader = asyncio.ensure_future(read())
    while daemon.registry.get(session_id).bus.subscriber_count == 0:
        await asyncio.sleep(0.01)
    await daemon.http.delete(f"/session/{session_id}")

    await asyncio.wait_for(reader, 5)  # the stream ended by itself
    assert [(f.type, f.data) for f in frames] == [
        ("session_closed", {"sessionId": session_id, "reason": "client_close"})
    ]


async def test_a_disconnected_reader_is_unsubscribed(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()
    bus = daemon.registry.get(session_id).bus

    async with daemon.http.stream("GET", f"/session/{session_id}/events"):
        while bus.subscriber_count == 0:
            await asyncio.sleep(0.01)

    async with asyncio.timeout(5):
        while bus.subscriber_count:
            await asyncio.sleep(0.01)


async def test_reconnecting_with_last_event_id_replays_what_was_missed(
    daemon: RunningDaemon,
) -> None:
    session_id = await daemon.create_session()
    await daemon.prompt(session_id, "hi")
    frames = await collect_until(daemon.http, session_id, "turn_complete")
    bus = daemon.registry.get(session_id).bus
    for i in range(3):
        bus.publish("notice", {"level": "info", "text": f"n{i}", "source": "test"})

    replayed = await collect_until(
        daemon.http, session_id, "replay_complete", last_event_id=frames[-1].id
    )

    assert [f.data.get("text") for f in replayed[:-1]] == ["n0", "n1", "n2"]
    assert replayed[-1].data == {"replayedCount": 3}


async def test_a_malformed_cursor_means_live_only(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()
    await daemon.prompt(session_id, "hi")
    await collect_until(daemon.http, session_id, "turn_complete")
    bus = daemon.registry.get(session_id).bus
    async with asyncio.timeout(5):
        while bus.subscriber_count:  # the previous reader has gone
            await asyncio.sleep(0.01)
        async with daemon.http.stream(
            "GET", f"/session/{session_id}/events", headers={"Last-Event-ID": "abc"}
        ) as response:
            while bus.subscriber_count == 0:
                await asyncio.sleep(0.01)
            bus.publish("notice", {"text": "live"})
            async for frame in read_frames(response):
                assert isinstance(frame, Frame)
                assert (frame.type, frame.data) == ("notice", {"text": "live"})
                break


async def test_a_bad_max_queued_is_a_400(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    response = await daemon.http.get(f"/session/{session_id}/events", params={"maxQueued": "3"})

    assert response.status_code == 400
    assert response.json()["code"] == "invalid_max_queued"


async def test_a_reader_that_stops_reading_is_warned_then_evicted(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()
    bus = daemon.registry.get(session_id).bus
    port = daemon.server.port
    sock = socket.socket()
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    sock.setblocking(False)
    loop = asyncio.get_running_loop()
    await loop.sock_connect(sock, ("127.0.0.1", port))
    request = (
        f"GET /session/{session_id}/events?maxQueued=16 HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n\r\n"
    )
    await loop.sock_sendall(sock, request.encode())
    while bus.subscriber_count == 0:
        await asyncio.sleep(0.01)

    for i in range(400):  # ~40 KB each: far more than the socket buffers hold
        bus.publish("notice", {"text": "x" * 40_000, "n": i})
        await asyncio.sleep(0)

    received = b""
    async with asyncio.timeout(60):  # a hang guard: 16 MB through a loaded machine
        while b"client_evicted" not in received:
            chunk = await loop.sock_recv(sock, 1 << 20)
            if not chunk:
                break
            received += chunk
    sock.close()
    text = received.decode(errors="replace")
    warnings = [line for line in text.split("\n") if line.startswith("event: slow_client_warning")]
    assert len(warnings) == 1
    evicted = next(json.loads(line[6:]) for line in text.split("\n") if '"client_evicted"' in line)
    assert evicted["data"]["reason"] == "queue_overflow"
    assert bus.subscriber_count == 0
