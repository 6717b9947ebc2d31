"""RecordedRequest and its headers, read the way tests read them."""

from __future__ import annotations

from typing import Any

from hypothesis import example, given
from hypothesis import strategies as st

from cairn.testing import RecordedRequest
from cairn.testing.request import Headers, message_text


def recorded(body: Any, headers: list[tuple[str, str]] | None = None) -> RecordedRequest:
    return RecordedRequest(
        method="POST",
        path="/v1/chat/completions",
        headers=Headers(headers or []),
        body=body,
        raw=b"",
        received_at=0.0,
        index=0,
    )


def test_headers_are_looked_up_in_any_case() -> None:
    headers = Headers([("X-Cairn-Purpose", "main")])

    assert headers["x-cairn-purpose"] == headers["X-CAIRN-PURPOSE"] == "main"
    assert "x-Cairn-purpose" in headers
    assert list(headers) == ["X-Cairn-Purpose"]


def test_repeated_headers_are_joined() -> None:
    assert Headers([("Accept", "a"), ("accept", "b")])["ACCEPT"] == "a, b"


def test_message_text_joins_text_parts() -> None:
    message = {"content": [{"type": "text", "text": "a"}, {"type": "image_url"}, {"text": "b"}]}

    assert message_text(message) == "ab"
    assert message_text({"content": None}) == ""


def test_user_texts_and_contains_cover_list_contents() -> None:
    request = recorded(
        {
            "messages": [
                {"role": "system", "content": [{"type": "text", "text": "rules"}]},
                {"role": "user", "content": "one"},
                {"role": "assistant", "content": None, "tool_calls": []},
                {"role": "tool", "tool_call_id": "c", "content": "tool output"},
                {"role": "user", "content": [{"type": "text", "text": "two"}]},
            ]
        }
    )

    assert request.system == "rules"
    assert request.user_texts() == ["one", "two"]
    assert request.last_user_text() == "two"
    assert request.contains("tool output")


def test_a_request_without_a_body_has_empty_fields() -> None:
    request = recorded(None)

    assert request.messages == []
    assert request.tools == []
    assert request.system is None
    assert request.model is None
    assert request.stream is False
    assert request.last_user_text() == ""
    assert request.purpose is None


def test_max_tokens_falls_back_to_max_completion_tokens() -> None:
    assert recorded({"max_completion_tokens": 64}).max_tokens == 64


_KEYS = st.sampled_from(["role", "content", "text", "function", "name", "type"])
_ANY = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=3),
    lambda inner: st.lists(inner, max_size=2) | st.dictionaries(_KEYS, inner, max_size=3),
    max_leaves=8,
)
_MESSAGE = st.dictionaries(
    st.sampled_from(["role", "content"]), st.sampled_from(["user", "system"]) | _ANY
)
_TOOL = st.dictionaries(st.sampled_from(["type", "function"]), _ANY)
_JSON = _ANY | st.fixed_dictionaries(
    {},
    optional={
        "messages": st.lists(_MESSAGE, max_size=3) | _ANY,
        "tools": st.lists(_TOOL, max_size=2) | _ANY,
        "model": _ANY,
        "stream": _ANY,
        "max_tokens": _ANY,
        "temperature": _ANY,
    },
)


@given(_JSON)
@example({"tools": [{"function": "not an object"}]})
@example({"messages": [{"role": "user", "content": [{"text": 5}, "loose"]}]})
def test_any_json_body_can_be_inspected_without_errors(body: Any) -> None:
    request = recorded(body)

    assert isinstance(request.user_texts(), list)
    assert isinstance(request.contains("x"), bool)
    assert isinstance(request.tool_names, list)
    assert request.system is None or isinstance(request.system, str)
    assert request.model is None or isinstance(request.model, str)
