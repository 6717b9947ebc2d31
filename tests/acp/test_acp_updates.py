"""Session events and replayed history as ``session/update`` payloads."""

from __future__ import annotations

from pathlib import Path

import pytest

from cairn.acp.updates import (
    MAX_TOOL_TEXT_CHARS,
    available_commands,
    event_update,
    mode_state,
    replay_updates,
)
from cairn.llm.types import Usage
from cairn.recording.replay import ReplayItem
from cairn.session.commands import COMMANDS
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
)


def dump(update: object) -> dict[str, object]:
    return update.model_dump(mode="json", by_alias=True, exclude_none=True)  # type: ignore[attr-defined]


def test_text_and_thoughts_become_message_and_thought_chunks() -> None:
    assert dump(event_update(AssistantText("Hi"))) == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "Hi"},
    }
    assert dump(event_update(AssistantThought("hmm")))["sessionUpdate"] == "agent_thought_chunk"


@pytest.mark.parametrize(
    "event",
    [
        AssistantText(""),
        TurnStarted("p", True),
        TurnEnded(TurnResult("end_turn")),
        StreamReset("retry", 0.0),
        AssistantMessage("x", "", (), Usage(), "m"),
        UsageUpdate(Usage(), 10, 0),
    ],
)
def test_events_the_client_does_not_need_send_nothing(event: object) -> None:
    assert event_update(event) is None  # type: ignore[arg-type]


def test_a_tool_call_start_carries_kind_title_locations_and_input() -> None:
    event = ToolCallStart(
        "c1",
        "edit",
        "Edit app.py",
        ToolKind.EDIT,
        {"file_path": "app.py"},
        (Location(Path("/p/app.py"), 3),),
    )

    assert dump(event_update(event)) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "Edit app.py",
        "kind": "edit",
        "status": "pending",
        "locations": [{"path": "/p/app.py", "line": 3}],
        "rawInput": {"file_path": "app.py"},
    }


def test_a_finished_edit_reports_its_diff() -> None:
    diff = FileDiff(Path("/p/app.py"), "old\n", "new\n")
    event = ToolCallUpdate("c1", "completed", output="Edited", display="1 line changed", diff=diff)

    update = dump(event_update(event))

    assert update["status"] == "completed"
    assert update["content"] == [
        {"type": "diff", "path": "/p/app.py", "oldText": "old\n", "newText": "new\n"}
    ]


def test_a_new_file_diff_has_no_old_text() -> None:
    event = ToolCallUpdate("c1", "completed", diff=FileDiff(Path("/p/new.py"), None, "x\n"))

    [content] = dump(event_update(event))["content"]  # type: ignore[misc]

    assert "oldText" not in content


def test_a_finished_call_shows_its_summary_and_a_failed_one_its_error() -> None:
    done = dump(
        event_update(ToolCallUpdate("c1", "completed", output="full output", display="3 matches"))
    )
    failed = dump(
        event_update(ToolCallUpdate("c1", "failed", output="File not found", display="x"))
    )

    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "3 matches"}}
    ]
    assert failed["content"][0]["content"]["text"] == "File not found"  # type: ignore[index]


def test_a_cancelled_call_is_reported_failed() -> None:
    assert (
        dump(event_update(ToolCallUpdate("c1", "cancelled", output="declined")))["status"]
        == "failed"
    )


def test_long_tool_output_is_clipped_for_the_editor() -> None:
    event = ToolCallUpdate("c1", "completed", output="x" * (MAX_TOOL_TEXT_CHARS + 10))

    text = dump(event_update(event))["content"][0]["content"]["text"]  # type: ignore[index]

    assert len(text) < MAX_TOOL_TEXT_CHARS + 100
    assert text.endswith("(10 more characters not shown)")


def test_todos_become_plan_entries_without_the_cancelled_ones() -> None:
    todos = (
        TodoItem("1", "parse", "completed"),
        TodoItem("2", "test", "in_progress"),
        TodoItem("3", "dropped idea", "cancelled"),
    )

    update = dump(event_update(PlanUpdate(todos)))

    assert update == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "parse", "priority": "medium", "status": "completed"},
            {"content": "test", "priority": "medium", "status": "in_progress"},
        ],
    }


def test_notices_are_message_paragraphs_marked_by_level() -> None:
    error = dump(event_update(Notice("error", "UserPromptSubmit blocked: no", "hook")))
    info = dump(event_update(Notice("info", "Compressed.", "compression")))

    assert error["content"] == {"type": "text", "text": "✗ UserPromptSubmit blocked: no\n\n"}
    assert info["content"] == {"type": "text", "text": "Compressed.\n\n"}


def test_mode_changes_and_context_usage_are_reported() -> None:
    assert dump(event_update(ModeChanged("plan"))) == {
        "sessionUpdate": "current_mode_update",
        "currentModeId": "plan",
    }
    assert dump(event_update(UsageUpdate(Usage(), 1200, 128000))) == {
        "sessionUpdate": "usage_update",
        "used": 1200,
        "size": 128000,
    }


def test_available_commands_list_every_slash_command_with_its_hint() -> None:
    update = dump(available_commands(COMMANDS))

    commands = {c["name"]: c for c in update["availableCommands"]}  # type: ignore[union-attr]
    assert set(commands) == {c.name for c in COMMANDS}
    assert commands["forget"]["input"] == {"hint": "text"}
    assert "input" not in commands["recap"]


def test_mode_state_names_every_mode() -> None:
    state = mode_state("auto-edit", ("plan", "default", "auto-edit", "yolo"))

    assert state.current_mode_id == "auto-edit"
    assert all(mode.name and mode.description for mode in state.available_modes)


def describe(name: str, args: object) -> tuple[str, str]:
    return f"{name} {args}", "read"


def test_replay_shows_messages_tool_calls_and_recaps_in_order() -> None:
    items = [
        ReplayItem("user_text", "read the file"),
        ReplayItem("thought", "let me look"),
        ReplayItem(
            "tool_call", tool_call_id="c1", tool_name="read_file", args={"a": 1}, result="ok"
        ),
        ReplayItem("tool_call", tool_call_id="c2", tool_name="edit", error="no match"),
        ReplayItem("assistant_text", "Done."),
        ReplayItem("recap", "We were reading."),
    ]

    updates = [dump(u) for u in replay_updates(items, describe)]

    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
        "agent_message_chunk",
    ]
    assert updates[2]["title"] == "read_file {'a': 1}" and updates[2]["kind"] == "read"
    assert updates[3]["status"] == "completed"
    assert updates[5]["status"] == "failed"
    assert "We were reading." in updates[7]["content"]["text"]  # type: ignore[index]


def test_an_unanswered_replayed_call_has_no_result_update() -> None:
    items = [ReplayItem("tool_call", tool_call_id="c1", tool_name="ask_user_question")]

    updates = [dump(u) for u in replay_updates(items, describe)]

    assert [u["sessionUpdate"] for u in updates] == ["tool_call"]
    assert updates[0]["status"] == "pending"
