"""Headless output formats (text, json, stream-json) from a sequence of real session events."""

from __future__ import annotations

import io
import json
from collections.abc import Sequence
from typing import Any

from cairn.content import FunctionCall
from cairn.headless.output import OutputFormat, OutputWriter
from cairn.llm.types import Usage
from cairn.tools.base import ToolKind
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    Notice,
    SessionEvent,
    StreamReset,
    ToolCallStart,
    ToolCallUpdate,
    TurnEnded,
    TurnResult,
    TurnStarted,
    UsageUpdate,
)

SESSION_ID = "0f1e2d3c-4b5a-6978-8796-a5b4c3d2e1f0"
MODEL = "scripted-model"
CALL = FunctionCall("call_1", "list_directory", {"path": "."})
FIRST_USAGE = Usage(input_tokens=120, output_tokens=8, total_tokens=128)
SECOND_USAGE = Usage(input_tokens=150, output_tokens=4, total_tokens=154, cached_tokens=100)

# A turn with one tool call: the model lists a folder, then answers.
TOOL_TURN: tuple[SessionEvent, ...] = (
    TurnStarted("p1", fresh=True),
    AssistantThought("I should look."),
    AssistantText("Let me look."),
    AssistantMessage("Let me look.", "I should look.", (CALL,), FIRST_USAGE, MODEL),
    UsageUpdate(FIRST_USAGE, 120, 131_072),
    ToolCallStart("call_1", "list_directory", "List .", ToolKind.READ, {"path": "."}),
    ToolCallUpdate("call_1", "in_progress"),
    ToolCallUpdate("call_1", "completed", output="a.txt\nb.txt", display="2 entries"),
    Notice("info", "Conversation compressed.", "compression"),
    AssistantText("Two "),
    AssistantText("entries."),
    AssistantMessage("Two entries.", "", (), SECOND_USAGE, MODEL),
)


def _result(**fields: Any) -> TurnResult:
    usage = Usage()
    usage.add(FIRST_USAGE)
    usage.add(SECOND_USAGE)
    values: dict[str, Any] = {
        "stop_reason": "end_turn",
        "text": "Two entries.",
        "usage": usage,
        "requests": 2,
        "fresh": True,
    }
    values.update(fields)
    return TurnResult(**values)


class Run:
    """An OutputWriter over string buffers."""

    def __init__(self, fmt: OutputFormat, *, partial: bool = False) -> None:
        self.stdout = io.StringIO()
        self.stderr = io.StringIO()
        self.writer = OutputWriter(
            fmt,
            session_id=SESSION_ID,
            stdout=self.stdout,
            stderr=self.stderr,
            partial_messages=partial,
        )

    def init(self) -> None:
        self.writer.init(
            cwd="/work/project",
            model=MODEL,
            tools=["read_file", "list_directory"],
            mode="default",
            version="1.2.3",
            commands=["help", "clear"],
        )

    async def play(self, events: Sequence[SessionEvent]) -> None:
        for event in events:
            await self.writer(event)

    def finish(self, result: TurnResult, *, error: str | None = None) -> None:
        self.writer.result(
            result,
            subtype="error_during_execution" if error else "success",
            duration_ms=1234,
            api_duration_ms=1000,
            is_error=error is not None,
            error=error,
        )

    def json_lines(self) -> list[dict[str, Any]]:
        """stream-json: one object per line."""
        return [json.loads(line) for line in self.stdout.getvalue().splitlines()]

    def array(self) -> list[dict[str, Any]]:
        """json: the one array written at the end."""
        [line] = self.stdout.getvalue().splitlines()
        messages = json.loads(line)
        assert isinstance(messages, list)
        return messages


# ----- text -----


async def test_text_streams_the_answer_to_stdout_and_ends_the_line() -> None:
    run = Run("text")
    run.init()

    await run.play(TOOL_TURN)
    run.finish(_result())

    assert run.stdout.getvalue() == "Let me look.Two entries.\n"
    assert run.stderr.getvalue() == ""


async def test_text_does_not_add_a_newline_after_one_the_model_wrote() -> None:
    run = Run("text")

    await run.play([AssistantText("done\n")])
    run.finish(_result(text="done\n"))

    assert run.stdout.getvalue() == "done\n"


async def test_text_sends_warnings_and_errors_to_stderr_but_not_info() -> None:
    run = Run("text")

    await run.play(
        [
            Notice("info", "Conversation compressed.", "compression"),
            Notice("warning", "hook timed out", "hook"),
            Notice("error", "Loop detected.", "loop"),
        ]
    )

    assert run.stdout.getvalue() == ""
    assert run.stderr.getvalue() == "hook timed out\nLoop detected.\n"


async def test_text_ends_partial_output_before_reporting_a_retry() -> None:
    run = Run("text")

    retry = StreamReset("HTTP 503", 1.0, 2, 7)
    await run.play([AssistantText("Hel"), retry, AssistantText("Hello")])
    run.finish(_result(text="Hello"))

    assert run.stdout.getvalue() == "Hel\nHello\n"
    assert run.stderr.getvalue() == "[retrying in 1 s (attempt 2 of 7): HTTP 503]\n"


async def test_text_ends_the_partial_line_only_once_when_a_retry_then_fails() -> None:
    """Regression: the newline written for a retry was forgotten, and the final result wrote a
    second one (a blank line in the output)."""
    run = Run("text")

    await run.play([AssistantText("Hel"), StreamReset("HTTP 503", 1.0, 2, 7)])
    run.finish(_result(stop_reason="error", text=""), error="API error: HTTP 500")

    assert run.stdout.getvalue() == "Hel\n"
    assert run.stderr.getvalue() == (
        "[retrying in 1 s (attempt 2 of 7): HTTP 503]\nAPI error: HTTP 500\n"
    )


async def test_text_prints_a_locally_handled_command_answer() -> None:
    run = Run("text")

    await run.play([Notice("info", "/help — List the slash commands", "command:help")])
    run.finish(_result(text="/help — List the slash commands", handled_locally=True, requests=0))

    assert run.stdout.getvalue() == "/help — List the slash commands\n"


async def test_text_writes_the_error_to_stderr() -> None:
    run = Run("text")

    run.finish(_result(stop_reason="error", text=""), error="API error: HTTP 401")

    assert run.stdout.getvalue() == ""
    assert run.stderr.getvalue() == "API error: HTTP 401\n"


# ----- json -----


async def test_json_writes_one_array_only_when_the_turn_is_over() -> None:
    run = Run("json")
    run.init()
    await run.play(TOOL_TURN)

    assert run.stdout.getvalue() == ""

    run.finish(_result())
    array = run.array()
    assert [(m["type"], m.get("subtype")) for m in array] == [
        ("system", "init"),
        ("assistant", None),
        ("user", None),
        ("system", "notice"),
        ("assistant", None),
        ("result", "success"),
    ]
    assert {m["session_id"] for m in array} == {SESSION_ID}
    assert len({m["uuid"] for m in array}) == len(array)
    assert all(isinstance(m["timestamp"], float) for m in array)


async def test_json_init_describes_the_session() -> None:
    run = Run("json")
    run.init()
    run.finish(_result())

    init = run.array()[0]
    assert init["cwd"] == "/work/project"
    assert init["model"] == MODEL
    assert init["tools"] == ["read_file", "list_directory"]
    assert init["permission_mode"] == "default"
    assert init["slash_commands"] == ["help", "clear"]
    assert init["version"] == "1.2.3"


async def test_json_assistant_messages_carry_thinking_text_tool_use_and_usage() -> None:
    run = Run("json")
    await run.play(TOOL_TURN)
    run.finish(_result())

    first = run.array()[0]
    message = first["message"]
    assert first["parent_tool_use_id"] is None
    assert message["role"] == "assistant"
    assert message["type"] == "message"
    assert message["model"] == MODEL
    assert message["id"].startswith("msg_")
    assert message["content"] == [
        {"type": "thinking", "thinking": "I should look."},
        {"type": "text", "text": "Let me look."},
        {"type": "tool_use", "id": "call_1", "name": "list_directory", "input": {"path": "."}},
    ]
    assert message["usage"] == {
        "input_tokens": 120,
        "output_tokens": 8,
        "total_tokens": 128,
        "cache_read_input_tokens": 0,
        "cache_creation_input_tokens": 0,
    }


async def test_json_tool_results_are_user_messages_flagged_on_failure() -> None:
    run = Run("json")
    await run.play(
        [
            ToolCallUpdate("call_1", "in_progress"),
            ToolCallUpdate("call_1", "completed", output="ok"),
            ToolCallUpdate("call_2", "failed", output="File not found"),
            ToolCallUpdate("call_3", "cancelled", output=None),
        ]
    )
    run.finish(_result())

    results = [m["message"]["content"] for m in run.array() if m["type"] == "user"]
    assert results == [
        [{"type": "tool_result", "tool_use_id": "call_1", "content": "ok", "is_error": False}],
        [
            {
                "type": "tool_result",
                "tool_use_id": "call_2",
                "content": "File not found",
                "is_error": True,
            }
        ],
        [{"type": "tool_result", "tool_use_id": "call_3", "content": "", "is_error": True}],
    ]


async def test_json_result_reports_turns_text_stop_reason_and_usage() -> None:
    run = Run("json")
    run.finish(_result())

    result = run.array()[-1]
    assert result["is_error"] is False
    assert result["duration_ms"] == 1234
    assert result["duration_api_ms"] == 1000
    assert result["num_turns"] == 2
    assert result["result"] == "Two entries."
    assert result["stop_reason"] == "end_turn"
    assert result["usage"] == {
        "input_tokens": 270,
        "output_tokens": 12,
        "total_tokens": 282,
        "cache_read_input_tokens": 100,
        "cache_creation_input_tokens": 0,
    }
    assert result["permission_denials"] == []
    assert "error" not in result


async def test_json_result_of_a_failed_turn_carries_the_error_and_status() -> None:
    run = Run("json")
    run.finish(
        _result(stop_reason="error", text="", error="HTTP 401", error_status=401),
        error="API error: HTTP 401",
    )

    result = run.array()[-1]
    assert result["subtype"] == "error_during_execution"
    assert result["is_error"] is True
    assert result["error"] == {"message": "API error: HTTP 401", "status": 401}


async def test_json_never_writes_streamed_text_or_to_stderr() -> None:
    run = Run("json")
    retry = StreamReset("HTTP 503", 1.0, 2, 7)
    await run.play([AssistantText("Hel"), retry, AssistantText("Hello")])

    assert run.stdout.getvalue() == ""
    assert run.stderr.getvalue() == ""


# ----- stream-json -----


async def test_stream_json_writes_each_message_as_one_line_when_it_happens() -> None:
    run = Run("stream-json")
    run.init()
    assert [m["subtype"] for m in run.json_lines()] == ["init"]

    await run.play(TOOL_TURN[:4])
    assert [m["type"] for m in run.json_lines()] == ["system", "assistant"]

    await run.play(TOOL_TURN[4:])
    run.finish(_result())
    lines = run.json_lines()
    assert [m["type"] for m in lines] == [
        "system",
        "assistant",
        "user",
        "system",
        "assistant",
        "result",
    ]
    assert lines[3] == {
        "type": "system",
        "subtype": "notice",
        "level": "info",
        "source": "compression",
        "text": "Conversation compressed.",
        "uuid": lines[3]["uuid"],
        "session_id": SESSION_ID,
        "timestamp": lines[3]["timestamp"],
    }
    assert lines[-1]["result"] == "Two entries."


async def test_stream_json_ignores_events_without_a_message() -> None:
    run = Run("stream-json")

    await run.play(
        [
            TurnStarted("p1", fresh=True),
            AssistantText("partial"),
            AssistantThought("hmm"),
            UsageUpdate(FIRST_USAGE, 120, 131_072),
            ToolCallStart("call_1", "list_directory", "List .", ToolKind.READ, {}),
            ToolCallUpdate("call_1", "in_progress"),
            TurnEnded(_result()),
        ]
    )

    assert run.stdout.getvalue() == ""
    assert run.stderr.getvalue() == ""


async def test_partial_messages_stream_each_delta_as_claude_codes_stream_events() -> None:
    """Issue 33: `-o stream-json` had no partial-text events; a 256-token answer arrived in one
    burst at the end."""
    run = Run("stream-json", partial=True)
    run.init()

    await run.play(TOOL_TURN[:2])  # the turn starts, then the first reasoning delta
    first = run.json_lines()[1]
    assert first["type"] == "stream_event" and first["parent_tool_use_id"] is None
    assert first["session_id"] == SESSION_ID and first["uuid"]
    assert first["event"]["type"] == "message_start"
    assert first["event"]["message"]["model"] == MODEL

    await run.play(TOOL_TURN[2:])
    lines = run.json_lines()
    events = [m["event"] for m in lines if m["type"] == "stream_event"]
    kinds = [(e["type"], e.get("index")) for e in events]
    assert kinds == [
        ("message_start", None),
        ("content_block_start", 0), ("content_block_delta", 0),  # thinking
        ("content_block_stop", 0),
        ("content_block_start", 1), ("content_block_delta", 1),  # text
        ("content_block_stop", 1),
        ("content_block_start", 2), ("content_block_delta", 2),  # the tool call
        ("content_block_stop", 2),
        ("message_delta", None), ("message_stop", None),
        ("message_start", None),
        ("content_block_start", 0), ("content_block_delta", 0), ("content_block_delta", 0),
        ("content_block_stop", 0),
        ("message_delta", None), ("message_stop", None),
    ]  # fmt: skip
    assert events[2]["delta"] == {"type": "thinking_delta", "thinking": "I should look."}
    assert events[5]["delta"] == {"type": "text_delta", "text": "Let me look."}
    assert events[7]["content_block"] == {
        "type": "tool_use", "id": "call_1", "name": "list_directory", "input": {},
    }  # fmt: skip
    assert json.loads(events[8]["delta"]["partial_json"]) == {"path": "."}
    assert events[10]["delta"]["stop_reason"] == "tool_use"
    assert events[10]["usage"]["output_tokens"] == FIRST_USAGE.output_tokens
    assert events[-2]["delta"]["stop_reason"] == "end_turn"
    # each whole message still follows its stream events, under the same message id
    assistants = [m for m in lines if m["type"] == "assistant"]
    assert assistants[0]["message"]["id"] == events[0]["message"]["id"]
    assert [m["type"] for m in lines].index("assistant") == 13  # after init and 12 events


async def test_partial_messages_start_over_after_a_retry() -> None:
    run = Run("stream-json", partial=True)

    await run.play(
        [
            AssistantText("Par"),
            StreamReset("HTTP 503", 0.5, 2, 7),
            AssistantText("Paris."),
            AssistantMessage("Paris.", "", (), FIRST_USAGE, MODEL),
        ]
    )

    lines = run.json_lines()
    kinds = [m["event"]["type"] if m["type"] == "stream_event" else m["subtype"] for m in lines
             if m["type"] in ("stream_event", "system")]  # fmt: skip
    assert kinds == [
        "message_start", "content_block_start", "content_block_delta", "api_retry",
        "message_start", "content_block_start", "content_block_delta", "content_block_stop",
        "message_delta", "message_stop",
    ]  # fmt: skip


async def test_partial_messages_say_when_an_answer_was_cut() -> None:
    run = Run("stream-json", partial=True)

    await run.play(
        [AssistantText("Par"), AssistantMessage("Par", "", (), FIRST_USAGE, MODEL, "length")]
    )

    events = [m["event"] for m in run.json_lines() if m["type"] == "stream_event"]
    [delta] = [e for e in events if e["type"] == "message_delta"]
    assert delta["delta"]["stop_reason"] == "max_tokens"


async def test_without_partial_messages_stream_json_has_no_stream_events() -> None:
    run = Run("stream-json")

    await run.play(TOOL_TURN)

    assert all(m["type"] != "stream_event" for m in run.json_lines())


async def test_stream_json_reports_a_retry_as_an_api_retry_message() -> None:
    run = Run("stream-json")

    await run.play([StreamReset("HTTP 503", 4.0, 3, 7)])

    [message] = [json.loads(line) for line in run.stdout.getvalue().splitlines()]
    assert {k: message[k] for k in ("type", "subtype", "attempt", "max_retries")} == {
        "type": "system",
        "subtype": "api_retry",
        "attempt": 2,
        "max_retries": 6,
    }
    assert (message["retry_delay_ms"], message["error"]) == (4000, "HTTP 503")
    assert run.stderr.getvalue() == ""


async def test_text_tells_a_denial_on_stderr_after_ending_the_streamed_line() -> None:
    run = Run("text")

    await run.play(
        [
            AssistantText("Let me write it"),
            ToolCallStart("call_1", "write_file", "Write a.txt", ToolKind.EDIT, {"file_path": "a"}),
            ToolCallUpdate("call_1", "failed", output="No one to ask.", denied=True),
        ]
    )

    assert run.stdout.getvalue() == "Let me write it\n"
    assert run.stderr.getvalue() == "Denied Write a.txt: No one to ask.\n"
    assert run.writer.denials == [
        {"tool_name": "write_file", "tool_use_id": "call_1", "tool_input": {"file_path": "a"}}
    ]


async def test_a_failed_call_that_was_not_denied_is_no_denial() -> None:
    run = Run("json")

    await run.play(
        [
            ToolCallStart("call_1", "read_file", "Read a", ToolKind.READ, {"file_path": "a"}),
            ToolCallUpdate("call_1", "failed", output="No such file."),
        ]
    )

    assert run.writer.denials == []
