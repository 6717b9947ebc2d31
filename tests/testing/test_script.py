"""Replies, their JSON form and the reply queues."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.testing import Reply, ToolCallSpec, error_reply, reply, tool_call, tool_calls
from cairn.testing.script import QueuedReply, ReplyQueues, load_script


def test_the_finish_reason_follows_the_tool_calls() -> None:
    assert reply("text").resolved_finish_reason == "stop"
    assert tool_call("glob").resolved_finish_reason == "tool_calls"
    assert reply("cut", finish_reason="length").resolved_finish_reason == "length"


def test_chunks_take_precedence_over_text() -> None:
    assert Reply(text="ignored", chunks=["a", "b"]).content == "ab"


def test_a_reply_without_content_has_none() -> None:
    assert tool_call("glob").content is None


def test_string_arguments_are_sent_verbatim() -> None:
    assert ToolCallSpec("edit", '{"broken').arguments == '{"broken'
    assert ToolCallSpec("edit", {"path": "a"}).arguments == '{"path": "a"}'


def test_tool_calls_can_carry_text() -> None:
    built = tool_calls(ToolCallSpec("a"), ToolCallSpec("b"), text="Doing both.")

    assert built.text == "Doing both."
    assert [c.name for c in built.tool_calls] == ["a", "b"]


def test_error_reply_sets_status_message_and_retry_after() -> None:
    built = error_reply(429, "slow down", retry_after=1.5)

    assert (built.status, built.error_message) == (429, "slow down")
    assert built.headers == {"Retry-After": "1.5"}
    assert error_reply(503, retry_after=0).headers == {"Retry-After": "0"}


def test_an_error_without_a_message_uses_the_status_phrase() -> None:
    assert error_reply(503).resolved_error_message == "Service Unavailable"


def test_default_usage_is_estimated_from_sizes() -> None:
    usage = reply("x" * 400).usage_for(prompt_chars=4000)

    assert usage == {"prompt_tokens": 1000, "completion_tokens": 100, "total_tokens": 1100}


@pytest.mark.parametrize(
    "fields",
    [{"status": 42}, {"delay": -1.0}, {"chunk_delay": -0.5}, {"drop_after_chunks": -1}],
)
def test_impossible_fields_are_refused(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError):
        Reply(**fields)  # type: ignore[arg-type]


def test_from_dict_reads_every_field_and_tool_calls() -> None:
    built = Reply.from_dict(
        {
            "text": "hi",
            "delay": 0.25,
            "tool_calls": [{"name": "glob", "args": {"pattern": "*"}, "id": "c9"}],
        }
    )

    assert built.text == "hi"
    assert built.delay == 0.25
    assert built.tool_calls == [ToolCallSpec("glob", {"pattern": "*"}, "c9")]


def test_from_dict_refuses_unknown_fields() -> None:
    with pytest.raises(ValueError, match="unknown reply field"):
        Reply.from_dict({"txt": "typo"})


def test_from_dict_refuses_a_tool_call_without_a_name() -> None:
    with pytest.raises(ValueError, match="name"):
        Reply.from_dict({"tool_calls": [{"args": {}}]})


def test_load_script_reads_a_list_with_purposes(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "a"}, {"text": "b", "purpose": "recap"}]))

    queued, default = load_script(script)

    assert queued == [QueuedReply(Reply(text="a")), QueuedReply(Reply(text="b"), "recap")]
    assert default is None


def test_load_script_reads_replies_and_a_default(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps({"replies": [], "default": {"text": "always"}}))

    assert load_script(script) == ([], Reply(text="always"))


def test_load_script_names_the_bad_reply(tmp_path: Path) -> None:
    script = tmp_path / "script.json"
    script.write_text(json.dumps([{"text": "fine"}, {"status": "loud"}]))

    with pytest.raises(ValueError, match="reply #1"):
        load_script(script)


def test_queues_prefer_purpose_and_session_then_session_then_purpose_then_any() -> None:
    queues = ReplyQueues()
    for label, purpose, session in [
        ("any", None, None),
        ("purpose", "main", None),
        ("session", None, "s"),
        ("both", "main", "s"),
    ]:
        queues.put(reply(label), purpose, session)

    taken = [queues.take("main", "s") for _ in range(5)]

    assert [r.text if r else None for r in taken] == ["both", "session", "purpose", "any", None]


def test_queues_refuse_what_is_not_a_reply() -> None:
    with pytest.raises(TypeError, match="Reply"):
        ReplyQueues().put("hello")  # type: ignore[arg-type]


@given(st.lists(st.text(max_size=5)))
def test_a_queue_gives_back_its_replies_in_order(texts: list[str]) -> None:
    queues = ReplyQueues()
    for text in texts:
        queues.put(reply(text), "main")

    taken = [queues.take("main", None) for _ in texts]

    assert [r.text if r else None for r in taken] == texts
    assert queues.take("main", None) is None
