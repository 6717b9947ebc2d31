"""Subagents through the real ``cairn -p``, ``cairn --acp`` and ``cairn serve`` processes:
the agent tool's requests carry the subagent purpose, the answer is the tool result, two run at
once, cancelling the parent turn cancels both, and every front end sees the work under the
parent call."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path
from typing import Any

import pytest
from acp.schema import ToolCallProgress

from cairn.sdk import DaemonClient, DaemonSessionClient
from cairn.testing import RecordedRequest, Reply, ScriptedServer, ToolCallSpec, reply, tool_call
from cairn.testing import tool_calls as calls

from .conftest import RunCairn
from .test_acp_process import running_agent
from .test_daemon import serve as serve_fixture
from .test_daemon import until

serve = serve_fixture  # the fixture, under the name the tests ask for

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def agent_call(prompt: str, id: str) -> ToolCallSpec:
    args = {"description": "look into it", "prompt": prompt, "subagent_type": "general-purpose"}
    return ToolCallSpec("agent", args, id)


def tool_results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


def subagent_task(request: RecordedRequest) -> str:
    """The task the parent wrote: the user message after the environment summary."""
    users = [m["content"] for m in request.messages if m["role"] == "user"]
    return next(text for text in users if not text.startswith("<system-reminder>"))


def test_cairn_p_runs_a_subagent_and_writes_its_messages_under_the_agent_call(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    (project / "notes.txt").write_text("one\ntwo\n")
    scripted_server.enqueue(
        calls(agent_call("Count the lines of notes.txt", "call_a")),
        reply("There are 2 lines."),
        purpose="main",
    )
    scripted_server.enqueue(
        tool_call("read_file", {"file_path": "notes.txt"}, id="sub_1"),
        reply("notes.txt has 2 lines."),
        purpose="subagent",
    )

    done = run_cairn("-p", "how long is notes.txt?", "-o", "json")

    assert done.returncode == 0, done.stderr
    first, second = scripted_server.requests_for("subagent")
    assert subagent_task(first) == "Count the lines of notes.txt"
    assert "one\ntwo" in tool_results(second)["sub_1"]
    _, main_second = scripted_server.requests_for("main")
    assert tool_results(main_second)["call_a"] == "notes.txt has 2 lines."
    messages = json.loads(done.stdout)
    nested = [m for m in messages if m.get("parent_tool_use_id") == "call_a"]
    uses = [c for m in nested if m["type"] == "assistant" for c in m["message"]["content"]]
    assert {"type": "tool_use", "id": "sub_1", "name": "read_file"}.items() <= next(
        c for c in uses if c["type"] == "tool_use"
    ).items()
    results = [c for m in nested if m["type"] == "user" for c in m["message"]["content"]]
    assert [r["tool_use_id"] for r in results] == ["sub_1"]
    assert messages[-1]["result"] == "There are 2 lines."


def _two_step_subagent(request: RecordedRequest) -> Reply | None:
    """Each subagent reads a file, then answers; its first answer is slow, so a second
    subagent running at the same time has sent its first request by then."""
    if request.purpose != "subagent":
        return None
    task = subagent_task(request)
    if not tool_results(request):
        return Reply(
            tool_calls=[ToolCallSpec("list_directory", {"path": "."}, f"ls-{task}")], delay=1.0
        )
    return reply(f"done with {task}")


def _subagent_meta(updates: list[Any]) -> list[dict[str, Any]]:
    found = []
    for update in updates:
        if isinstance(update, ToolCallProgress) and update.field_meta:
            meta = update.field_meta.get("cairn", {})
            if meta.get("kind") == "subagent":
                found.append(meta)
    return found


async def test_acp_runs_two_subagents_at_once_and_shows_their_work_under_each_call(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    scripted_server.handler = _two_step_subagent
    scripted_server.enqueue(
        calls(agent_call("alpha", "call_1"), agent_call("beta", "call_2")),
        reply("Both finished."),
        purpose="main",
    )
    async with running_agent(cairn_env, project) as agent:
        session_id = await agent.start_session()
        response = await agent.prompt(session_id, "do both")

    assert response.stop_reason == "end_turn"
    subagent = scripted_server.requests_for("subagent")
    assert len(subagent) == 4
    # Both first requests went out before either subagent got its first answer.
    assert sorted(subagent_task(r) for r in subagent[:2]) == ["alpha", "beta"]
    assert all(not tool_results(r) for r in subagent[:2])
    _, main_second = scripted_server.requests_for("main")
    assert tool_results(main_second) == {"call_1": "done with alpha", "call_2": "done with beta"}
    meta = _subagent_meta(agent.client.updates)
    assert {m["parentToolCallId"] for m in meta} == {"call_1", "call_2"}
    ended = [
        u
        for u in agent.client.updates
        if isinstance(u, ToolCallProgress) and u.tool_call_id == "call_1" and u.status
    ]
    assert ended[-1].status == "completed"
    shown = [block.content.text for block in ended[-1].content or []]
    assert shown[0].startswith("general-purpose subagent: 1 tool call")
    assert shown[-1] == "done with alpha"


async def test_cancelling_the_acp_turn_cancels_both_running_subagents(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    def hang(request: RecordedRequest) -> Reply | None:
        if request.purpose != "subagent":
            return None
        return reply("too late", delay=60)

    scripted_server.handler = hang
    scripted_server.enqueue(
        calls(agent_call("alpha", "call_1"), agent_call("beta", "call_2")), purpose="main"
    )
    async with running_agent(cairn_env, project) as agent:
        session_id = await agent.start_session()
        running = asyncio.ensure_future(agent.prompt(session_id, "do both"))
        await scripted_server.async_wait_for_requests(2, purpose="subagent", timeout=30)
        await agent.conn.cancel(session_id=session_id)
        response = await asyncio.wait_for(running, timeout=30)
        scripted_server.handler = None
        scripted_server.enqueue(reply("still here"), purpose="main")
        after = await agent.prompt(session_id, "are you there?")

    assert response.stop_reason == "cancelled"
    assert after.stop_reason == "end_turn"
    assert len(scripted_server.requests_for("subagent")) == 2  # neither went on
    statuses = {
        u.tool_call_id: u.status
        for u in agent.client.updates
        if isinstance(u, ToolCallProgress) and u.status
    }
    assert "completed" not in (statuses["call_1"], statuses["call_2"])


async def test_the_daemon_streams_subagent_work_with_the_parent_call_id(
    serve: object, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(
        calls(agent_call("list the project", "call_d")), reply("Listed."), purpose="main"
    )
    scripted_server.enqueue(
        tool_call("list_directory", {"path": "."}, id="sub_ls"),
        reply("It has a .git folder."),
        purpose="subagent",
    )
    token = "subagent-token"  # yolo widens permissions: a token-less daemon refuses it
    served = serve("--token", token)  # type: ignore[operator]
    async with DaemonClient(served.url, token) as client:
        session = await DaemonSessionClient.create(client, approval_mode="yolo")
        await session.prompt("what is here?")
        events = await until(session, "turn_complete")
        await client.close_session(session.session_id)

    updates = [e.data for e in events if e.type == "session_update"]
    nested = [u["_meta"]["cairn"] for u in updates if "_meta" in u and "cairn" in u["_meta"]]
    subagent = [m for m in nested if m.get("kind") == "subagent"]
    assert subagent and {m["parentToolCallId"] for m in subagent} == {"call_d"}
    inner = [p for m in subagent for p in m["updates"]]
    assert any(p.get("toolCallId") == "sub_ls" for p in inner)
    assert events[-1].final_text == "Listed."
    assert served.stop() == 0
