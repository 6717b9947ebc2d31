"""The blocking facade, used from a worker thread while the daemon runs in the test's loop."""

from __future__ import annotations

import asyncio

import pytest

from cairn.sdk import NotFoundError, SyncDaemonClient, SyncDaemonSessionClient
from cairn.testing import ScriptedServer, reply

from .conftest import Daemon

RECAP = "<recap>Testing the sync client. Next: ship it.</recap>"


def sync_session_flow(url: str) -> dict[str, object]:
    with SyncDaemonClient(url) as client:
        health = client.health()
        session = SyncDaemonSessionClient.create(client)
        text = session.prompt_and_wait("hello")
        recap = session.recap()
        context = session.context()
        kinds = []
        admission = session.prompt("again")
        for event in client.events(session.session_id, last_event_id=admission.last_event_id):
            kinds.append(event.type)
            if event.type == "turn_complete":
                break
        session.close()
        try:
            client.session_status(session.session_id)
            missing = False
        except NotFoundError:
            missing = True
    return {
        "health": health,
        "text": text,
        "recap": recap,
        "context": context,
        "kinds": kinds,
        "missing": missing,
    }


async def test_the_sync_client_does_what_the_async_one_does(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("Hi from sync."), purpose="main")
    scripted_server.enqueue(reply(RECAP), purpose="recap")

    result = await asyncio.to_thread(sync_session_flow, daemon.url)

    assert result["health"] == {"status": "ok"}
    assert result["text"] == "Hi from sync."
    assert result["recap"] == "Testing the sync client. Next: ship it."
    context = result["context"]
    assert isinstance(context, dict)
    assert context["usage"]["session"]["main"]["input_tokens"] > 0
    assert result["kinds"][0] == "turn_started" and result["kinds"][-1] == "turn_complete"
    assert result["missing"] is True


def errors_flow(url: str) -> None:
    with SyncDaemonClient(url) as client:
        client.session_status("00000000-0000-4000-8000-000000000000")


async def test_sync_errors_are_the_same_typed_errors(daemon: Daemon) -> None:
    with pytest.raises(NotFoundError) as raised:
        await asyncio.to_thread(errors_flow, daemon.url)

    assert raised.value.code == "session_not_found"
