"""Live sessions and the registry, driven directly on a real runtime."""

from __future__ import annotations

import asyncio
import json
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cairn.daemon.config import DaemonConfig
from cairn.daemon.errors import ApiError
from cairn.daemon.sessions import LiveSession, SessionRegistry
from cairn.session.session import PromptRequest
from cairn.testing import Reply, ScriptedServer, reply

from .helpers import make_runtime


@pytest.fixture
async def registry(
    scripted_server: ScriptedServer, workspace: Path, home: Path
) -> AsyncIterator[SessionRegistry]:
    scripted_server.default = reply("ok")
    runtime = make_runtime(scripted_server, workspace)
    registry = SessionRegistry(runtime, DaemonConfig(workspace=workspace, max_sessions=3))
    yield registry
    await registry.close_all("test_end")
    await runtime.aclose()


def published(registry: SessionRegistry, session_id: str) -> list[tuple[str, dict[str, Any]]]:
    bus = registry.get(session_id).bus
    frames = bus.subscribe(0).take()
    out = []
    for frame in frames:
        data = next(line for line in frame.decode().split("\n") if line.startswith("data: "))
        envelope = json.loads(data[6:])
        out.append((envelope["type"], envelope["data"]))
    return out


async def wait_for(registry: SessionRegistry, session_id: str, kind: str, n: int = 1) -> None:
    async with asyncio.timeout(10):
        while sum(1 for k, _ in published(registry, session_id) if k == kind) < n:
            await asyncio.sleep(0.01)


async def test_prompts_are_admitted_in_order_with_distinct_ids(
    registry: SessionRegistry, scripted_server: ScriptedServer
) -> None:
    live, _ = registry.create(session_id=None, approval_mode=None)

    first = live.admit(PromptRequest("one"), None)
    second = live.admit(PromptRequest("two"), "client-a")
    await wait_for(registry, live.id, "turn_complete", 2)

    ends = [d for k, d in published(registry, live.id) if k == "turn_complete"]
    assert [e["promptId"] for e in ends] == [first.prompt_id, second.prompt_id]
    assert first.prompt_id != second.prompt_id


async def test_admission_stops_at_the_pending_limit(
    registry: SessionRegistry, scripted_server: ScriptedServer
) -> None:
    scripted_server.default = Reply(text="slow", delay=2)
    live, _ = registry.create(session_id=None, approval_mode=None)
    for i in range(5):
        live.admit(PromptRequest(f"p{i}"), None)

    with pytest.raises(ApiError) as raised:
        live.admit(PromptRequest("one too many"), None)

    assert raised.value.status == 429
    assert raised.value.details["limit"] == 5


async def test_closing_fails_queued_prompts_and_announces_the_close(
    registry: SessionRegistry, scripted_server: ScriptedServer
) -> None:
    scripted_server.default = Reply(text="slow", delay=5)
    live, _ = registry.create(session_id=None, approval_mode=None)
    live.admit(PromptRequest("running"), None)
    queued = live.admit(PromptRequest("queued"), None)
    await scripted_server.async_wait_for_requests(1, purpose="main")
    events = live.bus.subscribe(None)

    await registry.close(live.id)

    kinds = [json.loads(f.decode().split("data: ")[1])["type"] for f in events.take()]
    assert kinds[-1] == "session_closed"
    assert "turn_error" in kinds and "turn_complete" in kinds  # queued failed, running cancelled
    assert live.session.recorder is None or live.session.recorder.path.exists()
    with pytest.raises(ApiError):
        registry.get(live.id)
    with pytest.raises(ApiError) as closing:
        live.admit(PromptRequest("late"), None)
    assert closing.value.status == 409
    assert queued.prompt_id


async def test_the_session_limit_counts_live_sessions_only(registry: SessionRegistry) -> None:
    for _ in range(3):
        registry.create(session_id=None, approval_mode=None)

    with pytest.raises(ApiError) as raised:
        registry.create(session_id=None, approval_mode=None)

    assert raised.value.status == 503
    assert raised.value.headers == {"Retry-After": "5"}


async def test_attaching_to_a_live_session_does_not_count(registry: SessionRegistry) -> None:
    live, _ = registry.create(session_id=None, approval_mode=None)
    registry.create(session_id=None, approval_mode=None)
    registry.create(session_id=None, approval_mode=None)

    again, attached = registry.create(session_id=live.id, approval_mode=None)

    assert attached and again is live


async def test_a_recorded_id_must_be_loaded_not_created(registry: SessionRegistry) -> None:
    live, _ = registry.create(session_id=None, approval_mode=None)
    live.admit(PromptRequest("hi"), None)
    await wait_for(registry, live.id, "turn_complete")
    await registry.close(live.id)

    with pytest.raises(ApiError) as raised:
        registry.create(session_id=live.id, approval_mode=None)

    assert raised.value.status == 409
    loaded, attached = registry.load(live.id, approval_mode=None)
    assert not attached and loaded.session.loaded is not None


async def test_loading_an_unknown_session_is_a_404(registry: SessionRegistry) -> None:
    with pytest.raises(ApiError) as raised:
        registry.load("00000000-0000-4000-8000-000000000000", approval_mode=None)

    assert raised.value.status == 404


async def test_close_all_closes_every_session(registry: SessionRegistry) -> None:
    sessions = [registry.create(session_id=None, approval_mode=None)[0] for _ in range(2)]

    await registry.close_all("daemon_shutdown")

    assert len(registry) == 0
    for live in sessions:
        assert live.closing
        assert published_after_close(live) == ("session_closed", "daemon_shutdown")


def published_after_close(live: LiveSession) -> tuple[str, str]:
    frames = live.bus.subscribe(0).take()
    envelope = json.loads(frames[-2].decode().split("data: ")[1])  # the last before replay_complete
    return envelope["type"], envelope["data"]["reason"]
