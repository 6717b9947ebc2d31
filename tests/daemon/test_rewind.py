"""``GET/POST /session/{id}/rewind`` on a real daemon over a real workspace."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import StartDaemon
from .helpers import TOKEN, RunningDaemon


def _events(daemon: RunningDaemon, session_id: str, kind: str) -> list[dict[str, Any]]:
    found = []
    for frame in daemon.registry.get(session_id).bus.subscribe(0).take():
        data = next(line for line in frame.decode().split("\n") if line.startswith("data: "))
        envelope = json.loads(data[6:])
        if envelope["type"] == kind:
            found.append(envelope["data"])
    return found


async def _turn(daemon: RunningDaemon, session_id: str, text: str, done: int) -> None:
    await daemon.prompt(session_id, text)
    async with asyncio.timeout(20):
        while len(_events(daemon, session_id, "turn_complete")) < done:
            await asyncio.sleep(0.02)


async def _session_with_two_turns(
    daemon: RunningDaemon, server: ScriptedServer, workspace: Path
) -> str:
    session_id = await daemon.create_session(approvalMode="yolo")
    server.enqueue(
        tool_call("write_file", {"file_path": "notes.md", "content": "one\n"}), reply("Wrote.")
    )
    await _turn(daemon, session_id, "write the notes", 1)
    server.enqueue(
        tool_call("write_file", {"file_path": "notes.md", "content": "two\n"}), reply("Rewrote.")
    )
    await _turn(daemon, session_id, "rewrite the notes", 2)
    assert (workspace / "notes.md").read_text() == "two\n"
    return session_id


async def test_rewinding_needs_a_token(daemon: RunningDaemon) -> None:
    session_id = await daemon.create_session()

    response = await daemon.http.post(f"/session/{session_id}/rewind", json={"turn": 1})

    assert response.status_code == 401
    assert response.json()["code"] == "token_required"


async def test_listing_rewinding_and_undoing_over_http(
    start_daemon: StartDaemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    daemon = await start_daemon(token=TOKEN)
    session_id = await _session_with_two_turns(daemon, scripted_server, workspace)

    listing = (await daemon.http.get(f"/session/{session_id}/rewind")).json()
    assert [t["turn"] for t in listing["turns"]] == [2, 1]
    assert listing["turns"][0]["files"] == [{"path": "notes.md", "status": "modified"}]
    assert listing["turns"][1]["files"] == [{"path": "notes.md", "status": "added"}]

    rewound = await daemon.http.post(f"/session/{session_id}/rewind", json={"turn": 2})
    assert rewound.status_code == 200, rewound.text
    body = rewound.json()
    assert body["code"]["restored"] == ["notes.md"] and body["conversationRewound"]
    assert body["prompt"] == "rewrite the notes"
    assert (workspace / "notes.md").read_text() == "one\n"
    assert [e["turn"] for e in _events(daemon, session_id, "rewound")] == [2]

    undone = await daemon.http.post(f"/session/{session_id}/rewind", json={"undo": True})
    assert undone.status_code == 200, undone.text
    assert (workspace / "notes.md").read_text() == "two\n"


async def test_bad_rewind_requests_are_4xx_with_the_reason(
    start_daemon: StartDaemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    daemon = await start_daemon(token=TOKEN)
    session_id = await _session_with_two_turns(daemon, scripted_server, workspace)
    url = f"/session/{session_id}/rewind"

    for body, status, code in [
        ({"turn": "2"}, 400, "invalid_rewind"),
        ({"turn": True}, 400, "invalid_rewind"),
        ({"turn": 1, "undo": True}, 400, "invalid_rewind"),
        ({"turn": 1, "mode": "everything"}, 400, "invalid_rewind"),
        ({"turn": 9}, 409, "rewind_failed"),
        ({"undo": True}, 409, "rewind_failed"),
    ]:
        response = await daemon.http.post(url, json=body)
        assert response.status_code == status, (body, response.text)
        assert response.json()["code"] == code

    assert (workspace / "notes.md").read_text() == "two\n"  # nothing was changed


async def test_a_rewind_waits_for_no_prompt(
    start_daemon: StartDaemon, scripted_server: ScriptedServer
) -> None:
    daemon = await start_daemon(token=TOKEN)
    session_id = await daemon.create_session()
    scripted_server.enqueue(reply("slow", delay=3))
    await daemon.prompt(session_id, "take your time")
    await scripted_server.async_wait_for_requests(1)

    response = await daemon.http.post(f"/session/{session_id}/rewind", json={"turn": 1})

    assert response.status_code == 409 and response.json()["code"] == "busy"


async def test_a_rewind_prompt_needs_a_token_too(
    daemon: RunningDaemon, scripted_server: ScriptedServer, workspace: Path
) -> None:
    """Regression: the rewind route was strict, but a `/rewind N` prompt to a daemon without a
    token still rewrote the workspace."""
    daemon.runtime.settings.tools.approval_mode = "yolo"  # the settings' own mode is no widening
    session_id = await _session_with_two_turns(daemon, scripted_server, workspace)

    await _turn(daemon, session_id, "/rewind 2", 3)
    await _turn(daemon, session_id, "/rewind undo", 4)
    await _turn(daemon, session_id, "/rewind", 5)

    answers = [event["text"] for event in _events(daemon, session_id, "turn_complete")]
    assert (workspace / "notes.md").read_text() == "two\n"
    assert "token" in answers[2] and "token" in answers[3]
    assert "rewrite the notes" in answers[4]  # listing the turns changes nothing: no token needed
    assert _events(daemon, session_id, "rewound") == []
