"""Request bodies: validation errors name the field; prompts become PromptRequests."""

from __future__ import annotations

from typing import Any

import pytest

from cairn.content import Text
from cairn.daemon.bodies import (
    MAX_PROMPT_BLOCKS,
    CreateSessionBody,
    PromptBody,
    check_approval_mode,
    parse_body,
    to_prompt_request,
)
from cairn.daemon.errors import ApiError


def prompt(raw: Any) -> Any:
    return to_prompt_request(parse_body(PromptBody, raw))


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


def test_a_wrong_type_is_a_400_naming_the_field() -> None:
    with pytest.raises(ApiError, match="sessionId"):
        parse_body(CreateSessionBody, {"sessionId": 5})


def test_a_body_that_is_not_an_object_is_a_400() -> None:
    with pytest.raises(ApiError):
        parse_body(CreateSessionBody, ["a"])


def test_a_string_prompt_is_the_prompt_text() -> None:
    request = prompt({"prompt": "fix the bug"})

    assert request.text == "fix the bug" and request.parts is None and request.fresh


def test_text_blocks_are_joined_into_the_prompt_text() -> None:
    request = prompt({"prompt": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]})

    assert request.text == "a b"
    assert request.parts == [Text("a"), Text("b")]


def test_an_embedded_resource_is_added_as_context() -> None:
    request = prompt(
        {
            "prompt": [
                {"type": "text", "text": "explain"},
                {"type": "resource", "resource": {"uri": "file:///w/a.py", "text": "x = 1"}},
            ]
        }
    )

    assert request.text == "explain"
    assert request.parts is not None
    assert request.parts[1] == Text('<resource uri="file:///w/a.py">\nx = 1\n</resource>')


def test_a_resource_link_is_mentioned_by_path() -> None:
    request = prompt(
        {
            "prompt": [
                {"type": "text", "text": "read"},
                {"type": "resource_link", "uri": "file:///w/a.py"},
            ]
        }
    )

    assert request.parts == [Text("read"), Text("@/w/a.py")]


@pytest.mark.parametrize(
    ("raw", "code"),
    [
        ({}, "invalid_prompt"),
        ({"prompt": ""}, "invalid_prompt"),
        ({"prompt": []}, "invalid_prompt"),
        ({"prompt": [{"type": "text"}]}, "invalid_prompt"),
        ({"prompt": [{"text": "no type"}]}, "invalid_prompt"),
        ({"prompt": [{"type": "image", "data": "..."}]}, "unsupported_content"),
        ({"prompt": [{"type": "resource", "resource": {"uri": "x"}}]}, "invalid_prompt"),
        ({"prompt": [{"type": "text", "text": "x"}] * (MAX_PROMPT_BLOCKS + 1)}, "invalid_prompt"),
        ({"prompt": "x", "deadline": 5}, "invalid_body"),
        ({"prompt": 5}, "invalid_body"),
    ],
)
def test_a_bad_prompt_is_a_400_with_a_code(raw: Any, code: str) -> None:
    with pytest.raises(ApiError) as raised:
        prompt(raw)

    assert raised.value.status == 400
    assert raised.value.code == code


def test_retry_and_continue_need_no_prompt_text() -> None:
    assert prompt({"retry": True}).retry
    assert prompt({"continueLastTurn": True}).continue_turn


def test_an_unknown_approval_mode_is_a_400() -> None:
    with pytest.raises(ApiError) as raised:
        check_approval_mode("reckless")

    assert raised.value.code == "invalid_approval_mode"
    assert check_approval_mode("yolo") == "yolo"
    assert check_approval_mode(None) is None
