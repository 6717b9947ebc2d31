"""Session events as daemon envelopes, in ACP session/update shapes."""

from __future__ import annotations

from pathlib import Path

from cairn.daemon.updates import MAX_TOOL_TEXT_CHARS, replay_updates, to_wire
from cairn.llm.types import Usage
from cairn.recording.replay import ReplayItem
from cairn.tools.base import FileDiff, Location, TodoItem, ToolKind
from cairn.vocabulary.events import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    ModeChanged,
    Notice,
    PlanUpdate,
    StreamReset,
    ToolCallStart,
    ToolCallUpdate,
    TurnEnded,
    TurnResult,
    TurnStarted,
    UsageUpdate,
    UserText,
)


def test_assistant_text_is_an_agent_message_chunk() -> None:
    assert to_wire(AssistantText("Hello")) == (
        "session_update",
        {"sessionUpdate": "agent_message_chunk", "content": {"type": "text", "text": "Hello"}},
    )


def test_a_thought_is_an_agent_thought_chunk() -> None:
    _, data = to_wire(AssistantThought("hmm")) or ("", {})

    assert data["sessionUpdate"] == "agent_thought_chunk"
    assert data["content"] == {"type": "text", "text": "hmm"}


def test_user_text_is_a_user_message_chunk() -> None:
    _, data = to_wire(UserText("hi")) or ("", {})

    assert data["sessionUpdate"] == "user_message_chunk"


def test_a_tool_call_start_is_a_pending_tool_call() -> None:
    event = ToolCallStart(
        "c1",
        "read_file",
        "Read a.py",
        ToolKind.READ,
        {"file_path": "a.py"},
        (Location(Path("/w/a.py"), 3),),
    )

    assert to_wire(event) == (
        "session_update",
        {
            "sessionUpdate": "tool_call",
            "toolCallId": "c1",
            "title": "Read a.py",
            "kind": "read",
            "status": "pending",
            "rawInput": {"file_path": "a.py"},
            "content": [],
            "locations": [{"path": "/w/a.py", "line": 3}],
        },
    )


def test_a_completed_tool_call_shows_its_summary() -> None:
    _, data = to_wire(ToolCallUpdate("c1", "completed", output="full", display="3 lines")) or (
        "",
        {},
    )

    assert data["sessionUpdate"] == "tool_call_update"
    assert data["status"] == "completed"
    assert data["content"] == [{"type": "content", "content": {"type": "text", "text": "3 lines"}}]


def test_a_failed_tool_call_shows_the_error_itself() -> None:
    _, data = to_wire(ToolCallUpdate("c1", "failed", output="boom", display="failed")) or ("", {})

    assert data["content"][0]["content"]["text"] == "boom"


def test_a_cancelled_tool_call_is_failed_in_acp_terms() -> None:
    _, data = to_wire(ToolCallUpdate("c1", "cancelled", output="declined")) or ("", {})

    assert data["status"] == "failed"


def test_an_edit_carries_its_diff_instead_of_text() -> None:
    diff = FileDiff(Path("/w/a.py"), "old", "new")

    _, data = to_wire(ToolCallUpdate("c1", "completed", output="ok", diff=diff)) or ("", {})

    assert data["content"] == [
        {"type": "diff", "path": "/w/a.py", "oldText": "old", "newText": "new"}
    ]


def test_long_tool_output_is_clipped_for_display() -> None:
    _, data = to_wire(ToolCallUpdate("c1", "failed", output="x" * (MAX_TOOL_TEXT_CHARS + 10))) or (
        "",
        {},
    )

    text = data["content"][0]["content"]["text"]
    assert text.startswith("x" * MAX_TOOL_TEXT_CHARS)
    assert text.endswith("(10 more characters not shown)")


def test_a_plan_lists_open_and_done_todos_but_not_cancelled_ones() -> None:
    todos = (
        TodoItem("1", "read", "completed"),
        TodoItem("2", "edit", "in_progress"),
        TodoItem("3", "drop", "cancelled"),
    )

    _, data = to_wire(PlanUpdate(todos)) or ("", {})

    assert data == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "read", "priority": "medium", "status": "completed"},
            {"content": "edit", "priority": "medium", "status": "in_progress"},
        ],
    }


def test_a_mode_change_is_a_current_mode_update() -> None:
    assert to_wire(ModeChanged("plan")) == (
        "session_update",
        {"sessionUpdate": "current_mode_update", "currentModeId": "plan"},
    )


def test_usage_is_a_usage_update_with_context_fill() -> None:
    _, data = to_wire(UsageUpdate(Usage(input_tokens=10, output_tokens=2), 1200, 128000)) or (
        "",
        {},
    )

    assert data["sessionUpdate"] == "usage_update"
    assert (data["used"], data["size"]) == (1200, 128000)


def test_notices_stream_resets_and_turn_starts_get_their_own_types() -> None:
    assert to_wire(Notice("warning", "careful", "hook")) == (
        "notice",
        {"level": "warning", "text": "careful", "source": "hook"},
    )
    assert to_wire(StreamReset("429", 1.5)) == ("stream_reset", {"reason": "429", "delay": 1.5})
    assert to_wire(TurnStarted("s####1", True)) == (
        "turn_started",
        {"turnId": "s####1", "fresh": True},
    )


def test_whole_messages_and_turn_ends_are_not_sent() -> None:
    message = AssistantMessage("hi", "", (), Usage(), "m")

    assert to_wire(message) is None
    assert to_wire(TurnEnded(TurnResult("end_turn"))) is None


def test_a_replayed_conversation_has_the_live_shapes() -> None:
    items = [
        ReplayItem("user_text", "fix it"),
        ReplayItem("assistant_text", "On it."),
        ReplayItem(
            "tool_call", tool_call_id="c1", tool_name="read_file", args={"p": 1}, result="body"
        ),
        ReplayItem("recap", "Fixing it. Next: test."),
    ]

    wires = replay_updates(items)

    assert [(k, d.get("sessionUpdate")) for k, d in wires] == [
        ("session_update", "user_message_chunk"),
        ("session_update", "agent_message_chunk"),
        ("session_update", "tool_call"),
        ("session_update", "tool_call_update"),
        ("session_recap", None),
    ]
    assert wires[3][1]["status"] == "completed"
    assert wires[4][1] == {"recap": "Fixing it. Next: test.", "replayed": True}
