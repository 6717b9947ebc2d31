"""DaemonSessionClient: one session, with an event cursor that only moves forward."""

from __future__ import annotations

import contextlib

from cairn.sdk import DaemonClient, DaemonEvent, DaemonSessionClient
from cairn.testing import ScriptedServer, reply

from .conftest import Daemon

RECAP = "<recap>Writing docs. Next: review them.</recap>"


async def drain_until(session: DaemonSessionClient, kind: str) -> list[DaemonEvent]:
    seen: list[DaemonEvent] = []
    async with contextlib.aclosing(session.events()) as events:
        async for event in events:
            seen.append(event)
            if event.type == kind:
                break
    return seen


async def test_a_created_session_runs_prompts_and_recaps(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("Drafted."), purpose="main")
    scripted_server.enqueue(reply(RECAP), purpose="recap")
    async with DaemonClient(daemon.url) as client:
        session = await DaemonSessionClient.create(client)

        text = await session.prompt_and_wait("draft the docs")
        recap = await session.recap()
        status = await session.status()
        await session.close()

    assert text == "Drafted."
    assert recap == "Writing docs. Next: review them."
    assert status["sessionId"] == session.session_id
    assert session.session_id not in daemon.server.registry._live


async def test_events_resume_after_the_last_event_seen(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("one"), purpose="main")
    scripted_server.enqueue(reply("two"), purpose="main")
    async with DaemonClient(daemon.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt("first")
        first = await drain_until(session, "turn_complete")
        cursor = session.last_event_id
        await session.prompt("second")
        second = await drain_until(session, "turn_complete")

    assert first[-1].final_text == "one" and second[-1].final_text == "two"
    ids = [e.id for e in second if e.id is not None]
    assert ids and min(ids) == cursor + 1  # nothing from the first turn again
    assert session.last_event_id == ids[-1]


async def test_prompt_and_wait_moves_the_cursor_past_its_turn(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        session = await DaemonSessionClient.create(client)
        await session.prompt_and_wait("hi")
        cursor = session.last_event_id

        status = await session.status()

    assert cursor == status["lastEventId"] > 0


async def test_a_loaded_session_starts_with_its_replayed_conversation(
    daemon: Daemon, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(reply("Sure."), purpose="main")
    async with DaemonClient(daemon.url) as client:
        original = await DaemonSessionClient.create(client)
        await original.prompt_and_wait("remember this")
        await original.close()

        loaded = await DaemonSessionClient.load(client, original.session_id)
        events = await drain_until(loaded, "replay_complete")

    texts = [(e.update_kind, e.text) for e in events if e.update_kind]
    assert texts == [
        ("user_message_chunk", "remember this"),
        ("agent_message_chunk", "Sure."),
        ("usage_update", ""),  # the context share the status line showed live ends the replay
        ("available_commands_update", ""),
    ]


async def test_a_session_handle_can_be_made_from_an_id(daemon: Daemon) -> None:
    async with DaemonClient(daemon.url) as client:
        info = await client.create_session()
        session = client.session(info.session_id)

        assert await session.prompt_and_wait("hi") == "ok"
