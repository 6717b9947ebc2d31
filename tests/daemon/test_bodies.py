"""Request bodies: validation errors name the field; prompts become PromptRequests."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.content import Image, Text
from cairn.daemon.bodies import (
    ApprovalModeBody,
    CreateSessionBody,
    LoadSessionBody,
    ModelBody,
    PromptBody,
    check_approval_mode,
    parse_body,
    to_prompt_request,
)
from cairn.daemon.errors import ApiError
from cairn.session.attachments import BLOCK_END, BLOCK_START, MAX_PROMPT_BLOCKS
from cairn.session.runtime import Runtime
from cairn.session.session import PromptRequest, Session
from cairn.testing import ScriptedProvider, reply


@pytest.fixture
async def session(workspace: Path, home: Path) -> AsyncIterator[Session]:
    runtime = Runtime(
        cwd=workspace,
        settings=Settings(),
        provider=ScriptedProvider(reply("ok")),
        record_chats=False,
    )
    session = runtime.new_session()
    yield session
    await session.close()
    await runtime.aclose()


async def prompt(session: Session, raw: Any) -> PromptRequest:
    return await to_prompt_request(parse_body(PromptBody, raw), session)


def test_an_empty_body_takes_the_defaults() -> None:
    body = parse_body(CreateSessionBody, None)

    assert body.session_id is None and body.approval_mode is None


def test_camel_case_fields_are_read() -> None:
    body = parse_body(CreateSessionBody, {"sessionId": "x", "approvalMode": "plan"})

    assert (body.session_id, body.approval_mode) == ("x", "plan")


def test_an_unknown_field_is_a_400_naming_it() -> None:
    with pytest.raises(ApiError) as raised:
        parse_body(CreateSessionBody, {"colour": "red"})

    assert raised.value.status == 400
    assert raised.value.code == "invalid_body"
    assert "colour" in raised.value.message


def test_a_field_given_by_its_key_and_its_name_is_a_400_naming_the_name() -> None:
    """As the pydantic models read it: the key wins, and the name is then an unknown field."""
    with pytest.raises(ApiError) as raised:
        parse_body(CreateSessionBody, {"sessionId": "a", "session_id": "b"})

    assert (
        raised.value.message == "Invalid request body: session_id: Extra inputs are not permitted"
    )
    assert parse_body(CreateSessionBody, {"session_id": "b"}).session_id == "b"


# What the pydantic models the bodies were answered, word for word (recorded from d455926).
PYDANTIC_WORDS = [
    (
        CreateSessionBody,
        ["a"],
        "body: Input should be a valid dictionary or instance of CreateSessionBody",
    ),
    (CreateSessionBody, {"mcpServers": {}}, "mcpServers: Input should be a valid list"),
    (CreateSessionBody, {"colour": 1, "sessionId": 5}, "sessionId: Input should be a valid string"),
    (LoadSessionBody, {"sessionId": "x"}, "sessionId: Extra inputs are not permitted"),
    (PromptBody, {"prompt": [1]}, "prompt.str: Input should be a valid string"),
    (PromptBody, {"prompt": "x", "retry": 1}, "retry: Input should be a valid boolean"),
    (PromptBody, {"prompt": "x", "_meta": 5}, "_meta: Input should be a valid dictionary"),
    (ApprovalModeBody, {}, "mode: Field required"),
    (ModelBody, {}, "modelId: Field required"),
    (ModelBody, {"modelId": None}, "modelId: Input should be a valid string"),
]


@pytest.mark.parametrize(("model", "raw", "problem"), PYDANTIC_WORDS)
def test_a_bad_body_is_worded_as_pydantic_worded_it(model: Any, raw: Any, problem: str) -> None:
    with pytest.raises(ApiError) as raised:
        parse_body(model, raw)

    assert raised.value.message == f"Invalid request body: {problem}"


def test_keys_and_names_are_read_and_meta_by_its_underscore_key() -> None:
    body = parse_body(PromptBody, {"prompt": "x", "continue_last_turn": True, "_meta": {"a": 1}})

    assert (body.continue_last_turn, body.meta) == (True, {"a": 1})
    assert parse_body(ModelBody, {"model_id": "m"}).model_id == "m"


def test_a_wrong_type_is_a_400_naming_the_field() -> None:
    with pytest.raises(ApiError, match="sessionId"):
        parse_body(CreateSessionBody, {"sessionId": 5})


def test_a_body_that_is_not_an_object_is_a_400() -> None:
    with pytest.raises(ApiError):
        parse_body(CreateSessionBody, ["a"])


async def test_a_string_prompt_is_the_prompt_text(session: Session) -> None:
    request = await prompt(session, {"prompt": "fix the bug"})

    assert request.text == "fix the bug" and request.parts is None and request.fresh


async def test_text_blocks_are_joined_into_the_prompt_text(session: Session) -> None:
    raw = {"prompt": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}

    request = await prompt(session, raw)

    assert request.text == "a b"
    assert request.parts is None


async def test_an_embedded_resource_is_attached_as_a_referenced_file(session: Session) -> None:
    resource = {"uri": "file:///w/a.py", "text": "x = 1"}
    raw = {
        "prompt": [{"type": "text", "text": "explain"}, {"type": "resource", "resource": resource}]
    }

    request = await prompt(session, raw)

    assert request.text == "explain"
    assert request.parts == [
        Text("explain @/w/a.py"),
        Text(f"\n{BLOCK_START}\nContent from @/w/a.py:\nx = 1\n{BLOCK_END}"),
    ]


async def test_a_resource_link_in_the_workspace_is_read_and_attached(
    session: Session, workspace: Path
) -> None:
    """Regression: a resource_link became an `@/abs/path` mention that nothing resolved."""
    (workspace / "a.py").write_text("print(1)\n")
    link = {"type": "resource_link", "uri": (workspace / "a.py").as_uri(), "name": "a.py"}

    request = await prompt(session, {"prompt": [{"type": "text", "text": "read"}, link]})

    assert request.parts == [
        Text("read @a.py"),
        Text(f"\n{BLOCK_START}\nContent from @a.py:\nprint(1)\n\n{BLOCK_END}"),
    ]


async def test_an_image_block_is_passed_through_as_an_image(session: Session) -> None:
    """Regression: image blocks were refused with 400 unsupported_content."""
    png = "iVBORw0KGgoAAAANSUhEUg=="  # the PNG signature and the start of a header
    raw = {
        "prompt": [
            {"type": "text", "text": "what is this"},
            {"type": "image", "mimeType": "image/png", "data": png},
        ]
    }

    request = await prompt(session, raw)

    assert request.parts == [Text("what is this"), Image("image/png", png, "image")]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ({}, "invalid_prompt"),
        ({"prompt": ""}, "invalid_prompt"),
        ({"prompt": " \n "}, "invalid_prompt"),
        ({"prompt": []}, "invalid_prompt"),
        ({"prompt": [{"type": "text"}]}, "invalid_prompt"),
        ({"prompt": [{"text": "no type"}]}, "invalid_prompt"),
        ({"prompt": [{"type": "image", "data": "..."}]}, "invalid_prompt"),
        ({"prompt": [{"type": "image", "mimeType": "image/png", "data": "!!"}]}, "invalid_prompt"),
        ({"prompt": [{"type": "resource", "resource": {"uri": "x"}}]}, "invalid_prompt"),
        ({"prompt": [{"type": "text", "text": "x"}] * (MAX_PROMPT_BLOCKS + 1)}, "invalid_prompt"),
        ({"prompt": "x", "deadline": 5}, "invalid_body"),
        ({"prompt": 5}, "invalid_body"),
    ],
)
async def test_a_bad_prompt_is_a_400_with_a_code(session: Session, raw: Any, code: str) -> None:
    with pytest.raises(ApiError) as raised:
        await prompt(session, raw)

    assert raised.value.status == 400
    assert raised.value.code == code


async def test_retry_and_continue_need_no_prompt_text(session: Session) -> None:
    assert (await prompt(session, {"retry": True})).retry
    assert (await prompt(session, {"continueLastTurn": True})).continue_turn


def test_an_unknown_approval_mode_is_a_400() -> None:
    with pytest.raises(ApiError) as raised:
        check_approval_mode("reckless")

    assert raised.value.code == "invalid_approval_mode"
    assert check_approval_mode("yolo") == "yolo"
    assert check_approval_mode(None) is None
