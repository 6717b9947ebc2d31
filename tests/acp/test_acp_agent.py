"""The ACP agent over real pipes with the SDK's own client: methods, notifications, errors."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import pytest
from acp.exceptions import RequestError
from acp.schema import (
    ClientCapabilities,
    InitializeResponse,
    NewSessionResponse,
    TextContentBlock,
)
from pydantic import BaseModel

from cairn import __version__
from cairn.testing import Reply, ScriptedServer, reply, tool_call

from ..polling import DEADLINE_SECONDS
from .acp_doubles import FS_CAPABILITIES, agent_options, connect, send_raw

# For a test that reads the agent's whole text: with memory on, an Extract that finds no reply
# queued adds its "Memory was not saved" notice to it whenever it fails before the test ends.
MEMORY_OFF = {"enableManagedAutoMemory": False}

pytestmark = pytest.mark.timeout(60)


def text(value: str) -> list[TextContentBlock]:
    return [TextContentBlock(type="text", text=value)]


async def test_initialize_advertises_load_session_modes_free_prompts_and_agent_info(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        response = await conn.initialize(protocol_version=1)

    caps = response.agent_capabilities
    assert response.protocol_version == 1
    assert caps.load_session is True
    assert caps.prompt_capabilities.embedded_context is True
    assert caps.prompt_capabilities.image is True  # images go to the model (#14)
    assert caps.session_capabilities.list is not None
    assert response.agent_info.name == "cairn"
    assert response.agent_info.version == __version__
    assert response.auth_methods == []


async def test_new_session_returns_approval_modes_then_announces_commands(
    scripted_server: ScriptedServer, project: Path
) -> None:
    options = agent_options(scripted_server, project, approval_mode="auto-edit")
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await _wait_for(lambda: client.of_kind("available_commands_update"))

    assert session.modes.current_mode_id == "auto-edit"
    assert [m.id for m in session.modes.available_modes] == ["plan", "default", "auto-edit", "yolo"]
    [update] = client.of_kind("available_commands_update")
    names = [c.name for c in update.available_commands]
    assert {"recap", "forget", "remember", "help"} <= set(names)
    response_at = _wire_index(client, lambda m: "sessionId" in (m.get("result") or {}))
    update_at = _wire_index(client, lambda m: m.get("method") == "session/update")
    assert response_at < update_at


def _as_the_sdk_sends(model: type[BaseModel], result: dict[str, Any]) -> dict[str, Any]:
    """``result`` read by the SDK's response model and written back as the SDK writes it."""
    return model.model_validate(result).model_dump(
        mode="json", by_alias=True, exclude_none=True, exclude_unset=True
    )


@pytest.mark.parametrize("configured", [True, False])
async def test_the_start_answers_are_what_the_sdks_response_models_would_send(
    scripted_server: ScriptedServer, project: Path, configured: bool
) -> None:
    """initialize and session/new answer in wire JSON without building the SDK's response
    models (start-up, issue 32): the same JSON those models would have sent."""
    options = agent_options(scripted_server, project)
    if not configured:  # an auth method, with the reason, in the initialize answer
        options.endpoint, options.auth_error = None, "No model endpoint is configured."
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1, client_capabilities=ClientCapabilities())
        if configured:
            await conn.new_session(cwd=str(project))
    results = [m["result"] for m in client.wire if "result" in m]

    assert len(results) == (2 if configured else 1)
    assert results[0] == _as_the_sdk_sends(InitializeResponse, results[0])
    assert bool(results[0]["authMethods"]) is not configured
    if configured:
        assert results[1] == _as_the_sdk_sends(NewSessionResponse, results[1])
        assert results[1]["modes"]["availableModes"] and results[1]["configOptions"]


async def test_new_session_with_a_relative_cwd_is_invalid_params(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as caught:
            await conn.new_session(cwd="relative/path")

    assert caught.value.code == -32602


async def test_prompt_streams_the_answer_and_ends_the_turn(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply(chunks=["Hello ", "there."]), purpose="main")
    options = agent_options(scripted_server, project, memory=MEMORY_OFF)
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=text("hi"))

    assert response.stop_reason == "end_turn"
    assert response.usage is not None and response.usage.input_tokens > 0
    assert client.agent_text() == "Hello there."
    assert scripted_server.requests_for("main")[0].last_user_text() == "hi"


async def test_a_cut_answer_ends_the_prompt_with_max_tokens(
    scripted_server: ScriptedServer, project: Path
) -> None:
    """Issue 33: an answer cut at its output bound was answered end_turn."""
    scripted_server.enqueue(Reply(text="Par", finish_reason="length"), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=text("capital?"))

    assert response.stop_reason == "max_tokens"
    assert response.field_meta == {"cairn": {"finishReason": "length"}}
    assert "cut at its output bound" in client.agent_text()


async def test_a_text_loop_ends_the_prompt_with_a_stop_reason_and_a_message_not_an_error(
    scripted_server: ScriptedServer, project: Path
) -> None:
    """Issue 33: a text loop answered the prompt with JSON-RPC error -32603."""
    sentence = "I will now check the file again to be really sure. "
    scripted_server.enqueue(reply(chunks=[sentence] * 40), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=text("check"))

    assert response.stop_reason == "end_turn"
    assert response.field_meta is not None
    meta = response.field_meta["cairn"]
    assert meta["loopType"] == "chanting_identical_sentences"
    assert meta["message"].startswith("Loop protection stopped the answer")
    assert "Loop detected" in client.agent_text()


async def test_unknown_method_is_method_not_found_and_the_agent_keeps_serving(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        with pytest.raises(RequestError) as caught:
            await send_raw(conn, "session/teleport", {})
        response = await conn.initialize(protocol_version=1)

    assert caught.value.code == -32601
    assert response.protocol_version == 1


async def test_prompt_for_an_unknown_session_is_invalid_params(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as caught:
            await conn.prompt(session_id="no-such-session", prompt=text("hi"))

    assert caught.value.code == -32602
    assert "Session not found" in str(caught.value)


async def test_tool_calls_stream_as_tool_call_and_tool_call_update(
    scripted_server: ScriptedServer, project: Path
) -> None:
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(
        tool_call("read_file", {"file_path": "notes.txt"}, id="call-read"),
        reply("Read it."),
        purpose="main",
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("read notes"))

    [start] = client.of_kind("tool_call")
    assert start.tool_call_id == "call-read"
    assert start.kind == "read"
    assert start.status == "pending"
    assert start.locations[0].path == str(project / "notes.txt")
    assert start.raw_input == {"file_path": "notes.txt"}
    statuses = [u.status for u in client.of_kind("tool_call_update")]
    assert statuses == ["in_progress", "completed"]


async def test_an_edit_reports_its_diff(scripted_server: ScriptedServer, project: Path) -> None:
    target = project / "app.py"
    target.write_text("x = 1\n")
    scripted_server.enqueue(
        tool_call("edit", {"file_path": "app.py", "old_string": "x = 1", "new_string": "x = 2"}),
        reply("Edited."),
        purpose="main",
    )
    options = agent_options(scripted_server, project, approval_mode="yolo")
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("edit it"))

    done = client.of_kind("tool_call_update")[-1]
    assert done.status == "completed"
    [diff] = [c for c in done.content if c.type == "diff"]
    assert diff.path == str(target)
    assert diff.old_text == "x = 1\n" and diff.new_text == "x = 2\n"
    assert target.read_text() == "x = 2\n"


async def test_todo_write_becomes_a_plan(scripted_server: ScriptedServer, project: Path) -> None:
    todos = [
        {"id": "1", "content": "Write the parser", "status": "in_progress"},
        {"id": "2", "content": "Test it", "status": "pending"},
    ]
    scripted_server.enqueue(
        tool_call("todo_write", {"todos": todos}), reply("Planned."), purpose="main"
    )
    scripted_server.default = reply("Still working on it.")  # open todos keep the turn going
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("plan"))

    plan = client.of_kind("plan")[0]
    assert [(e.content, e.status) for e in plan.entries] == [
        ("Write the parser", "in_progress"),
        ("Test it", "pending"),
    ]


async def test_permission_is_asked_with_allow_once_allow_always_and_reject(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "new.txt", "content": "hello"}),
        reply("Done."),
        purpose="main",
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("write"))

    [(_sid, tool_call_update, options)] = client.permission_requests
    assert [(o.option_id, o.kind) for o in options] == [
        ("allow_once", "allow_once"),
        ("allow_always", "allow_always"),
        ("reject_once", "reject_once"),
    ]
    assert tool_call_update.kind == "edit"
    assert [c.type for c in tool_call_update.content] == ["diff"]
    assert (project / "new.txt").read_text() == "hello"


async def test_a_rejected_permission_leaves_the_file_alone_and_ends_the_turn(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "new.txt", "content": "hello"}), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append("reject_once")
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=text("write"))

    assert response.stop_reason == "end_turn"
    assert not (project / "new.txt").exists()
    assert client.of_kind("tool_call_update")[-1].status == "failed"
    assert len(scripted_server.requests_for("main")) == 1


async def test_files_are_read_through_the_editor_so_unsaved_buffers_win(
    scripted_server: ScriptedServer, project: Path
) -> None:
    path = project / "main.py"
    path.write_text("print('on disk')\n")
    scripted_server.enqueue(
        tool_call("read_file", {"file_path": "main.py"}), reply("Seen."), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.buffers[str(path)] = "print('unsaved buffer')\n"
        await conn.initialize(protocol_version=1, client_capabilities=_caps(FS_CAPABILITIES))
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("read main.py"))

    assert client.reads == [str(path)]
    second = scripted_server.requests_for("main")[1]
    assert second.contains("unsaved buffer")
    assert not second.contains("on disk")


async def test_files_are_written_through_the_editor_when_it_offers_writes(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "out.txt", "content": "from the agent"}),
        reply("Done."),
        purpose="main",
    )
    options = agent_options(scripted_server, project, approval_mode="yolo")
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1, client_capabilities=_caps(FS_CAPABILITIES))
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("write"))

    assert client.writes == {str(project / "out.txt"): "from the agent"}
    assert not (project / "out.txt").exists()


async def test_set_mode_changes_the_approval_mode(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "new.txt", "content": "x"}),
        reply("Done."),
        purpose="main",
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.set_session_mode(session_id=session.session_id, mode_id="yolo")
        await conn.prompt(session_id=session.session_id, prompt=text("write"))

    assert client.permission_requests == []
    assert (project / "new.txt").read_text() == "x"


async def test_set_mode_rejects_an_unknown_mode(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        with pytest.raises(RequestError) as caught:
            await conn.set_session_mode(session_id=session.session_id, mode_id="reckless")

    assert caught.value.code == -32602


async def test_a_mode_change_from_a_slash_command_is_reported(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(
            session_id=session.session_id, prompt=text("/approval-mode plan")
        )

    assert response.stop_reason == "end_turn"
    assert [u.current_mode_id for u in client.of_kind("current_mode_update")] == ["plan"]
    assert "Approval mode set to plan." in client.agent_text()
    assert scripted_server.requests_for("main") == []


async def test_cancel_ends_the_running_prompt_as_cancelled(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply("too late", delay=30), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        running = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=text("slow"))
        )
        await scripted_server.async_wait_for_requests(1, purpose="main")
        await conn.cancel(session_id=session.session_id)
        response = await asyncio.wait_for(running, DEADLINE_SECONDS)

    assert response.stop_reason == "cancelled"


async def test_cancel_answers_a_pending_permission_request_as_cancelled(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "new.txt", "content": "x"}), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append("wait")
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        running = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=text("write"))
        )
        await asyncio.wait_for(client.asked.wait(), DEADLINE_SECONDS)
        await conn.cancel(session_id=session.session_id)
        response = await asyncio.wait_for(running, DEADLINE_SECONDS)

    assert response.stop_reason == "cancelled"
    assert not (project / "new.txt").exists()


async def test_a_newer_prompt_supersedes_the_running_one(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply("first", delay=30), reply("second"), purpose="main")
    options = agent_options(scripted_server, project, memory=MEMORY_OFF)
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        first = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=text("one"))
        )
        await scripted_server.async_wait_for_requests(1, purpose="main")
        second = await asyncio.wait_for(
            conn.prompt(session_id=session.session_id, prompt=text("two")), DEADLINE_SECONDS
        )
        first_response = await asyncio.wait_for(first, DEADLINE_SECONDS)

    assert first_response.stop_reason == "cancelled"
    assert second.stop_reason == "end_turn"
    assert client.agent_text() == "second"
    assert scripted_server.requests_for("main")[1].last_user_text() == "two"


async def test_a_model_error_answers_the_prompt_with_an_internal_error(
    scripted_server: ScriptedServer, project: Path
) -> None:
    from cairn.testing import error_reply

    scripted_server.enqueue(error_reply(400, "bad request body"), reply("Fine."), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        with pytest.raises(RequestError) as caught:
            await conn.prompt(session_id=session.session_id, prompt=text("hi"))
        later = await conn.prompt(session_id=session.session_id, prompt=text("again"))

    assert caught.value.code == -32603
    assert "bad request body" in str(caught.value)
    assert later.stop_reason == "end_turn"


async def test_attached_files_reach_the_model(
    scripted_server: ScriptedServer, project: Path
) -> None:
    from acp.schema import EmbeddedResourceContentBlock, ResourceContentBlock, TextResourceContents

    linked = project / "linked.md"
    linked.write_text("LINKED-CONTENT")
    prompt = [
        TextContentBlock(type="text", text="compare"),
        ResourceContentBlock(type="resource_link", name="linked.md", uri=linked.as_uri()),
        EmbeddedResourceContentBlock(
            type="resource",
            resource=TextResourceContents(uri="file:///tmp/embedded.md", text="EMBEDDED-CONTENT"),
        ),
    ]
    scripted_server.enqueue(reply("Compared."), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=prompt)

    [request] = scripted_server.requests_for("main")
    assert request.contains("LINKED-CONTENT")
    assert request.contains("EMBEDDED-CONTENT")


def _caps(raw: dict[str, object]) -> ClientCapabilities:
    return ClientCapabilities.model_validate(raw)


def _wire_index(client: object, match: object) -> int:
    wire = client.wire  # type: ignore[attr-defined]
    return next(i for i, message in enumerate(wire) if match(message))  # type: ignore[operator]


async def _wait_for(condition: object, timeout: float = DEADLINE_SECONDS) -> None:
    async with asyncio.timeout(timeout):
        while not condition():  # type: ignore[operator]
            await asyncio.sleep(0.01)


# ----- session/load, session/list -----


async def _record_a_session(server: ScriptedServer, project: Path) -> str:
    (project / "notes.txt").write_text("alpha\n")
    server.enqueue(
        tool_call("read_file", {"file_path": "notes.txt"}, id="call-1"),
        reply("The notes say alpha."),
        purpose="main",
    )
    async with connect(agent_options(server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("what do the notes say?"))
    return session.session_id


async def test_load_replays_the_conversation_before_answering(
    scripted_server: ScriptedServer, project: Path
) -> None:
    session_id = await _record_a_session(scripted_server, project)
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(project), session_id=session_id)
        await _wait_for(lambda: client.of_kind("available_commands_update"))

    kinds = client.kinds(session_id)
    assert kinds[:4] == [
        "user_message_chunk",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    assert client.of_kind("user_message_chunk")[0].content.text == "what do the notes say?"
    assert client.of_kind("tool_call")[0].title.startswith("Read")
    assert client.of_kind("tool_call_update")[0].status == "completed"
    assert client.agent_text() == "The notes say alpha."
    response_at = _wire_index(
        client,
        lambda m: (
            m.get("id") is not None
            and "result" in m
            and m["result"] is not None
            and "modes" in m["result"]
        ),
    )
    last_replayed = max(
        i
        for i, m in enumerate(client.wire)
        if m.get("params", {}).get("update", {}).get("sessionUpdate") == "agent_message_chunk"
    )
    assert last_replayed < response_at


async def test_a_loaded_session_continues_with_its_history(
    scripted_server: ScriptedServer, project: Path
) -> None:
    session_id = await _record_a_session(scripted_server, project)
    scripted_server.enqueue(reply("Still alpha."), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(project), session_id=session_id)
        await conn.prompt(session_id=session_id, prompt=text("and now?"))

    last = scripted_server.requests_for("main")[-1]
    assert last.contains("what do the notes say?")
    assert last.contains("The notes say alpha.")


async def test_loading_an_unknown_session_is_invalid_params_session_not_found(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as caught:
            await conn.load_session(
                cwd=str(project), session_id="00000000-0000-0000-0000-000000000000"
            )

    assert caught.value.code == -32602
    assert "Session not found" in str(caught.value)


async def test_list_returns_recorded_sessions_of_the_project(
    scripted_server: ScriptedServer, project: Path
) -> None:
    session_id = await _record_a_session(scripted_server, project)
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        listing = await conn.list_sessions(cwd=str(project))

    [info] = listing.sessions
    assert info.session_id == session_id
    assert info.title == "what do the notes say?"
    assert info.cwd == str(project)
    assert info.updated_at
    assert listing.next_cursor is None


# ----- extensions -----


async def test_recap_extension_returns_the_recap(
    scripted_server: ScriptedServer, project: Path
) -> None:
    session_id = await _record_a_session(scripted_server, project)
    scripted_server.enqueue(
        reply("<recap>Reading the notes; next, act on them.</recap>"), purpose="recap"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(project), session_id=session_id)
        answer = await conn.ext_method("cairn/recap", {"sessionId": session_id})

    assert answer == {"sessionId": session_id, "recap": "Reading the notes; next, act on them."}


async def test_recap_extension_says_why_there_is_no_recap(
    scripted_server: ScriptedServer, project: Path
) -> None:
    session_id = await _record_a_session(scripted_server, project)
    scripted_server.enqueue(reply("## Notes\n- read them"), purpose="recap")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(project), session_id=session_id)
        answer = await conn.ext_method("cairn/recap", {"sessionId": session_id})

    assert answer["recap"] is None
    assert answer["reason"].startswith("The model did not answer with a recap")


async def test_retry_extension_sends_the_last_prompt_again(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply("first answer"), reply("second answer"), purpose="main")
    options = agent_options(scripted_server, project, memory=MEMORY_OFF)
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("tell me"))
        answer = await conn.ext_method("cairn/retry", {"sessionId": session.session_id})

    assert answer["stopReason"] == "end_turn"
    assert client.agent_text() == "first answersecond answer"
    retried = scripted_server.requests_for("main")[1]
    assert retried.user_texts()[-1] == "tell me"
    assert sum(t.count("tell me") for t in retried.user_texts()) == 1
    assert not retried.contains("first answer")


async def test_continue_extension_answers_an_interrupted_prompt(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply("never arrives", delay=30), reply("resumed"), purpose="main")
    options = agent_options(scripted_server, project, memory=MEMORY_OFF)
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        running = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=text("long task"))
        )
        await scripted_server.async_wait_for_requests(1, purpose="main")
        await conn.cancel(session_id=session.session_id)
        await running
        answer = await conn.ext_method("cairn/continue", {"sessionId": session.session_id})

    assert answer["stopReason"] == "end_turn"
    resumed = scripted_server.requests_for("main")[1]
    assert resumed.user_texts().count("long task") == 1
    assert client.agent_text() == "resumed"


async def test_an_unknown_extension_is_method_not_found(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        with pytest.raises(RequestError) as caught:
            await conn.ext_method("cairn/teleport", {})

    assert caught.value.code == -32601


async def test_an_extension_without_a_session_id_is_invalid_params(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        with pytest.raises(RequestError) as caught:
            await conn.ext_method("cairn/recap", {"sessionId": 42})

    assert caught.value.code == -32602


# ----- no endpoint configured -----


async def test_without_an_endpoint_new_session_says_what_to_set(
    scripted_server: ScriptedServer, project: Path
) -> None:
    options = agent_options(scripted_server, project)
    options.endpoint = None
    options.auth_error = "No model endpoint is configured. Set OPENAI_API_KEY."
    async with connect(options) as (conn, _client):
        init = await conn.initialize(protocol_version=1)
        with pytest.raises(RequestError) as caught:
            await conn.new_session(cwd=str(project))

    assert caught.value.code == -32000
    assert "OPENAI_API_KEY" in str(caught.value)
    assert [m.id for m in init.auth_methods] == ["cairn-openai-compatible"]


# ----- a question left unanswered is asked again after session/load -----

QUESTION = {
    "questions": [
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    ]
}


async def test_a_pending_question_is_asked_again_after_load_and_its_answer_continues_the_turn(
    scripted_server: ScriptedServer, project: Path
) -> None:
    from cairn import telemetry

    memory = project / ".cairn" / "memory" / "project"
    memory.mkdir(parents=True)
    (memory / "db.md").write_text(
        "---\nname: database choice\ndescription: which database we use\ntype: project\n---\n"
        "We use Postgres for the database.\n"
    )
    scripted_server.enqueue(tool_call("ask_user_question", QUESTION, id="ask-1"), purpose="main")
    scripted_server.default = reply('{"selected": []}')
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append("wait")
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        pending = asyncio.ensure_future(
            conn.prompt(session_id=session.session_id, prompt=text("set up the database"))
        )
        await asyncio.wait_for(client.asked.wait(), DEADLINE_SECONDS)
    pending.cancel()  # its answer never comes: the editor is gone
    # The editor closed with the question open; the next one loads the session.
    before = len(scripted_server.requests)
    scripted_server.enqueue(reply("Postgres it is."), purpose="main")
    events: list[str] = []
    unsubscribe = telemetry.subscribe(lambda name, _attrs: events.append(name))
    try:
        async with connect(agent_options(scripted_server, project)) as (conn, client):
            client.permission_answers.append("choice-0")
            await conn.initialize(protocol_version=1)
            await conn.load_session(cwd=str(project), session_id=session.session_id)
            await _wait_for(lambda: "Postgres it is." in client.agent_text())
    finally:
        unsubscribe()

    [(_sid, asked, options)] = client.permission_requests
    assert asked.tool_call_id == "ask-1"
    assert [o.name for o in options] == ["Postgres", "SQLite"]
    after = scripted_server.requests[before:]
    assert [r.purpose for r in after] == ["main"]
    [continued] = after
    assert continued.contains("Which database?: Postgres")
    assert continued.user_texts().count("set up the database") == 1
    assert not any(name.startswith("memory.recall") for name in events)


async def test_of_three_quick_prompts_only_the_newest_runs(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(reply("first", delay=30), reply("third"), purpose="main")
    options = agent_options(scripted_server, project, memory=MEMORY_OFF)
    async with connect(options) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        sid = session.session_id
        first = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("one")))
        await scripted_server.async_wait_for_requests(1, purpose="main")
        second = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("two")))
        third = asyncio.ensure_future(conn.prompt(session_id=sid, prompt=text("three")))
        responses = await asyncio.wait_for(asyncio.gather(first, second, third), DEADLINE_SECONDS)

    assert [r.stop_reason for r in responses] == ["cancelled", "cancelled", "end_turn"]
    assert [r.last_user_text() for r in scripted_server.requests_for("main")] == ["one", "three"]
    assert client.agent_text() == "third"


async def test_an_empty_prompt_is_invalid_params_and_reaches_no_model(
    scripted_server: ScriptedServer, project: Path
) -> None:
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        for prompt in ([], text("   ")):
            with pytest.raises(RequestError) as raised:
                await conn.prompt(session_id=session.session_id, prompt=prompt)
            assert raised.value.code == -32602

    assert scripted_server.requests_for("main") == []


async def test_a_linked_file_is_attached_once_even_when_also_mentioned(
    scripted_server: ScriptedServer, project: Path
) -> None:
    from acp.schema import ResourceContentBlock

    (project / "a.md").write_text("LINKED-ONCE")
    prompt = [
        TextContentBlock(type="text", text="compare @a.md with"),
        ResourceContentBlock(type="resource_link", name="a.md", uri=(project / "a.md").as_uri()),
    ]
    scripted_server.enqueue(reply("Done."), purpose="main")
    async with connect(agent_options(scripted_server, project)) as (conn, _client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=prompt)

    [request] = scripted_server.requests_for("main")
    assert request.last_user_text().count("LINKED-ONCE") == 1


async def test_an_unknown_command_is_answered_in_the_editor_without_the_model(
    scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression: an unknown slash command went to the model as text in ACP."""
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=text("/frobnicate"))

    assert response.stop_reason == "end_turn"
    assert "Unknown command /frobnicate. /help lists the commands." in client.agent_text()
    assert scripted_server.requests_for("main") == []


async def test_a_loaded_session_shows_subagent_steps_commands_and_context_as_live(
    scripted_server: ScriptedServer, project: Path
) -> None:
    """Issue #30: a replay lacked an agent call's subagent steps and the commands answered
    without the model, and said nothing of how full the context is."""
    task = {"description": "look", "prompt": "List the folder", "subagent_type": "general-purpose"}
    scripted_server.enqueue(
        tool_call("agent", task, id="p1"), reply("It holds notes."), purpose="main"
    )
    scripted_server.enqueue(
        tool_call("list_directory", {"path": "."}), reply("Notes."), purpose="subagent"
    )
    # Extract (after the first turn, in the background) saves nothing: unscripted, it failed and
    # its notice could come after the command's answer on a loaded machine.
    scripted_server.enqueue(reply("Nothing worth keeping."), purpose="extract")
    async with connect(agent_options(scripted_server, project)) as (conn, live):
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("what is here?"))
        await conn.prompt(session_id=session.session_id, prompt=text("/approval-mode plan"))
    async with connect(agent_options(scripted_server, project)) as (conn, loaded):
        await conn.initialize(protocol_version=1)
        await conn.load_session(cwd=str(project), session_id=session.session_id)
        await _wait_for(lambda: loaded.of_kind("usage_update"))

    def agent_call_end(client: object) -> list[str]:
        [end] = [
            u
            for u in client.of_kind("tool_call_update")  # type: ignore[attr-defined]
            if u.tool_call_id == "p1" and u.status == "completed"
        ]
        return [block.content.text for block in end.content]

    def said(client: object, kind: str) -> list[str]:
        return [u.content.text for u in client.of_kind(kind)]  # type: ignore[attr-defined]

    assert agent_call_end(loaded) == agent_call_end(live)
    assert agent_call_end(live)[0].startswith("general-purpose subagent: 1 tool call\n")
    assert said(loaded, "user_message_chunk")[-1] == "/approval-mode plan"
    assert said(loaded, "agent_message_chunk")[-1] == said(live, "agent_message_chunk")[-1]
    assert "Approval mode set to plan." in said(live, "agent_message_chunk")[-1]
    used = [u.used for u in live.of_kind("usage_update")]
    assert [u.used for u in loaded.of_kind("usage_update")] == [used[-1]]
    assert used[-1] > 0
    assert scripted_server.errors == []  # every request was scripted, Extract's too
