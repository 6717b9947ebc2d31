"""Prompt caching end to end: marks on the wire for endpoints that honour them, hits reported."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from cairn.config.endpoint import Endpoint
from cairn.config.settings import Settings
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest
from cairn.testing import RecordedRequest, ScriptedServer, reply
from cairn.vocabulary.events import SessionEvent, TurnResult, UsageUpdate

MARK = {"type": "ephemeral"}


@pytest.fixture
def cache_server() -> AsyncIterator[ScriptedServer]:
    with ScriptedServer(reply("ok"), prompt_cache="marked") as server:
        yield server


def runtime_for(server: ScriptedServer, workspace: Path, caching: str) -> Runtime:
    settings = Settings.model_validate(
        {"memory": {"enableManagedAutoMemory": False}, "model": {"promptCaching": caching}}
    )
    endpoint = Endpoint(server.base_url, "k", "scripted-model")
    return Runtime.from_endpoint(cwd=workspace, settings=settings, endpoint=endpoint)


async def two_turns(runtime: Runtime) -> tuple[list[TurnResult], list[UsageUpdate]]:
    session = runtime.new_session()
    updates: list[UsageUpdate] = []

    async def sink(event: SessionEvent) -> None:
        if isinstance(event, UsageUpdate):
            updates.append(event)

    results = [
        await session.prompt(PromptRequest("first question"), sink),
        await session.prompt(PromptRequest("second question"), sink),
    ]
    await session.close()
    await runtime.aclose()
    return results, updates


def marked(request: RecordedRequest) -> list[str]:
    """The roles of the messages with a cache mark, and ``tools`` if a declaration has one."""
    roles = [
        m["role"]
        for m in request.messages
        if isinstance(m.get("content"), list)
        and any(isinstance(p, dict) and p.get("cache_control") == MARK for p in m["content"])
    ]
    if any(t.get("cache_control") == MARK for t in request.tools):
        roles.append("tools")
    return roles


async def test_marks_are_sent_and_the_cached_share_is_reported(
    cache_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))

    results, updates = await two_turns(runtime_for(cache_server, tmp_path, "on"))

    first, second = cache_server.requests
    assert marked(first) == ["system", "user", "tools"]
    assert marked(second) == ["system", "user", "tools"]
    assert results[0].usage.cached_tokens == 0
    assert results[1].usage.cached_tokens > 0
    assert updates[-1].usage.cached_tokens == results[1].usage.cached_tokens
    assert results[1].usage.cached_tokens < results[1].usage.input_tokens


async def test_auto_sends_no_marks_to_an_unknown_host_and_gets_no_hits(
    cache_server: ScriptedServer, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))

    results, _ = await two_turns(runtime_for(cache_server, tmp_path, "auto"))

    assert all(marked(r) == [] for r in cache_server.requests)
    assert all("X-DashScope-CacheControl" not in r.headers for r in cache_server.requests)
    assert [r.usage.cached_tokens for r in results] == [0, 0]
