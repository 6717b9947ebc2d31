"""Questions from ``ask_user_question`` over ACP: an elicitation form, or permission requests."""

from __future__ import annotations

from pathlib import Path

import pytest
from acp.schema import ClientCapabilities, TextContentBlock

from cairn.testing import ScriptedServer, reply, tool_call

from .acp_doubles import FORM_CAPABILITIES, agent_options, connect

pytestmark = pytest.mark.timeout(60)

QUESTION = {
    "questions": [
        {
            "question": "Which database?",
            "header": "DB",
            "options": [
                {"label": "Postgres", "description": "The usual one"},
                {"label": "SQLite"},
            ],
        }
    ]
}


def text(value: str) -> list[TextContentBlock]:
    return [TextContentBlock(type="text", text=value)]


async def test_a_question_is_a_permission_request_whose_options_are_the_choices(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("ask_user_question", QUESTION, id="ask-1"), reply("SQLite it is."), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append("choice-1")
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("set up storage"))

    [(_sid, asked, options)] = client.permission_requests
    assert asked.tool_call_id == "ask-1"
    assert asked.title == "Which database?"
    assert [o.name for o in options] == ["Postgres", "SQLite"]
    answered = scripted_server.requests_for("main")[1]
    assert answered.contains("Which database?: SQLite")


async def test_each_choice_has_its_own_kind_and_keeps_its_description(
    scripted_server: ScriptedServer, project: Path
) -> None:
    """#17: every choice was an "allow_once" (one hotkey for all) and lost its description."""
    scripted_server.enqueue(
        tool_call("ask_user_question", QUESTION, id="ask-1"), reply("Ok."), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append("choice-0")
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("set up storage"))

    [(_sid, asked, options)] = client.permission_requests
    assert [(o.option_id, o.kind) for o in options] == [
        ("choice-0", "allow_once"),
        ("choice-1", "allow_always"),
    ]
    assert options[0].field_meta == {"cairn": {"description": "The usual one"}}
    assert options[1].field_meta is None
    [shown] = asked.content
    assert shown.content.text == "Which database?\n\n- **Postgres**: The usual one\n- **SQLite**"


async def test_a_question_is_an_elicitation_form_when_the_client_supports_forms(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("ask_user_question", QUESTION, id="ask-1"), reply("Postgres."), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.form_answers.append({"q0": "Postgres"})
        await conn.initialize(
            protocol_version=1,
            client_capabilities=ClientCapabilities.model_validate(FORM_CAPABILITIES),
        )
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("set up storage"))

    assert client.permission_requests == []
    [(message, mode)] = client.elicitations
    assert message == "Which database?"
    assert mode.tool_call_id == "ask-1"
    field = mode.requested_schema.properties["q0"]
    assert [choice.const for choice in field.one_of] == ["Postgres", "SQLite"]
    assert field.one_of[0].description == "The usual one"
    assert scripted_server.requests_for("main")[1].contains("Which database?: Postgres")


async def test_a_cancelled_question_tells_the_model_nobody_answered(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("ask_user_question", QUESTION), reply("I'll assume Postgres."), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append(None)
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        response = await conn.prompt(session_id=session.session_id, prompt=text("set up"))

    assert response.stop_reason == "end_turn"
    assert scripted_server.requests_for("main")[1].contains("No user is available")


async def test_an_unknown_permission_option_counts_as_a_rejection(
    scripted_server: ScriptedServer, project: Path
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "x.txt", "content": "x"}), purpose="main"
    )
    async with connect(agent_options(scripted_server, project)) as (conn, client):
        client.permission_answers.append("launch-missiles")
        await conn.initialize(protocol_version=1)
        session = await conn.new_session(cwd=str(project))
        await conn.prompt(session_id=session.session_id, prompt=text("write"))

    assert not (project / "x.txt").exists()
