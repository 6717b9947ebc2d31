"""The one mapper from session events and replayed recordings to ``session/update`` payloads."""

from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from cairn.recording.replay import ReplayItem
from cairn.session.commands import COMMANDS
from cairn.session.updates import (
    MAX_TOOL_TEXT_CHARS,
    UpdateMapper,
    commands_update,
    describe_call,
    mode_state,
    permission_options,
    permission_tool_call,
)
from cairn.tools.registry import default_registry
from cairn.vocabulary import (
    AssistantMessage,
    AssistantText,
    AssistantThought,
    FileDiff,
    Location,
    MemoryChanged,
    MemoryRecalled,
    MemoryRef,
    ModeChanged,
    Notice,
    PermissionRequest,
    PlanUpdate,
    RecapShown,
    StreamReset,
    TodoItem,
    ToolCallStart,
    ToolCallUpdate,
    ToolKind,
    TurnEnded,
    TurnResult,
    TurnStarted,
    Usage,
    UsageUpdate,
)


def mapper() -> UpdateMapper:
    ids = itertools.count(1)
    return UpdateMapper(default_registry(), new_id=lambda: f"m{next(ids)}")


def one(event: object, on: UpdateMapper | None = None) -> dict[str, object]:
    [payload] = (on or mapper()).event(event)  # type: ignore[arg-type]
    return payload


def test_text_and_thoughts_are_chunks_of_one_message_per_model_response() -> None:
    updates = mapper()
    streamed = [
        *updates.event(AssistantThought("hmm")),
        *updates.event(AssistantText("Hel")),
        *updates.event(AssistantText("lo")),
        *updates.event(AssistantMessage("Hello", "hmm", (), Usage(), "m")),
        *updates.event(AssistantText("Next request")),
    ]

    assert streamed == [
        {
            "sessionUpdate": "agent_thought_chunk",
            "content": {"type": "text", "text": "hmm"},
            "messageId": "m1",
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "Hel"},
            "messageId": "m2",
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "lo"},
            "messageId": "m2",
        },
        {
            "sessionUpdate": "agent_message_chunk",
            "content": {"type": "text", "text": "\n\nNext request"},
            "messageId": "m3",
        },
    ]


@pytest.mark.parametrize(
    "event",
    [
        AssistantText(""),
        TurnStarted("p", True),
        TurnEnded(TurnResult("end_turn")),
        AssistantMessage("x", "", (), Usage(), "m"),
        UsageUpdate(Usage(), 10, 0),
    ],
)
def test_events_a_client_needs_no_update_for_give_none(event: object) -> None:
    assert mapper().event(event) == []  # type: ignore[arg-type]


def test_a_retried_request_streams_a_new_message() -> None:
    updates = mapper()
    first = one(AssistantText("partial"), updates)
    updates.event(StreamReset("HTTP 500", 1.0))
    again = one(AssistantText("whole"), updates)

    assert first["messageId"] != again["messageId"]


def test_a_tool_call_start_carries_kind_title_locations_and_input() -> None:
    event = ToolCallStart(
        "c1",
        "edit",
        "Edit app.py",
        ToolKind.EDIT,
        {"file_path": "app.py"},
        (Location(Path("/p/app.py"), 3), Location(Path("/p/b.py"))),
    )

    assert one(event) == {
        "sessionUpdate": "tool_call",
        "toolCallId": "c1",
        "title": "Edit app.py",
        "kind": "edit",
        "status": "pending",
        "locations": [{"path": "/p/app.py", "line": 3}, {"path": "/p/b.py"}],
        "rawInput": {"file_path": "app.py"},
    }


def test_tool_kinds_outside_acp_are_other() -> None:
    event = ToolCallStart("c1", "x", "X", "memory_write", {})  # type: ignore[arg-type]

    assert one(event)["kind"] == "other"


def test_a_finished_edit_reports_its_diff_and_a_new_file_has_no_old_text() -> None:
    edit = one(
        ToolCallUpdate("c1", "completed", output="Edited", diff=FileDiff(Path("/p/a"), "o", "n"))
    )
    new = one(ToolCallUpdate("c2", "completed", diff=FileDiff(Path("/p/b"), None, "x\n")))

    assert edit["status"] == "completed"
    assert edit["content"] == [{"type": "diff", "path": "/p/a", "oldText": "o", "newText": "n"}]
    assert new["content"] == [{"type": "diff", "path": "/p/b", "newText": "x\n"}]


def test_a_finished_call_shows_its_summary_and_a_failed_one_its_error() -> None:
    done = one(ToolCallUpdate("c1", "completed", output="full output", display="3 matches"))
    failed = one(ToolCallUpdate("c1", "failed", output="File not found", display="x"))
    quiet = one(ToolCallUpdate("c1", "in_progress"))

    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "3 matches"}}
    ]
    assert failed["content"] == [
        {"type": "content", "content": {"type": "text", "text": "File not found"}}
    ]
    assert quiet == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "in_progress",
    }


def test_a_cancelled_call_is_reported_failed() -> None:
    assert one(ToolCallUpdate("c1", "cancelled", output="declined"))["status"] == "failed"


def test_long_tool_output_is_clipped_for_people() -> None:
    event = ToolCallUpdate("c1", "completed", output="x" * (MAX_TOOL_TEXT_CHARS + 10))

    text = one(event)["content"][0]["content"]["text"]  # type: ignore[index]

    assert text.startswith("x" * MAX_TOOL_TEXT_CHARS)
    assert text.endswith("(10 more characters not shown)")


def test_todos_become_plan_entries_without_the_cancelled_ones() -> None:
    todos = (
        TodoItem("1", "parse", "completed"),
        TodoItem("2", "test", "in_progress"),
        TodoItem("3", "dropped idea", "cancelled"),
    )

    assert one(PlanUpdate(todos)) == {
        "sessionUpdate": "plan",
        "entries": [
            {"content": "parse", "priority": "medium", "status": "completed"},
            {"content": "test", "priority": "medium", "status": "in_progress"},
        ],
    }


def test_a_notice_is_a_message_of_its_own_marked_in_meta() -> None:
    updates = mapper()
    before = one(AssistantText("answer"), updates)
    notice = one(Notice("error", "UserPromptSubmit blocked: no", "hook"), updates)
    after = one(AssistantText("more"), updates)

    assert notice == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "✗ UserPromptSubmit blocked: no\n\n"},
        "messageId": "m2",
        "_meta": {"cairn": {"kind": "notice", "level": "error", "source": "hook"}},
    }
    assert len({before["messageId"], notice["messageId"], after["messageId"]}) == 3


def test_a_recap_is_a_message_of_its_own_marked_in_meta() -> None:
    updates = mapper()
    one(AssistantText("answer"), updates)

    recap = one(RecapShown("Fixing login. Next: tests.", away=True), updates)

    assert recap == {
        "sessionUpdate": "agent_message_chunk",
        "content": {"type": "text", "text": "※ recap: Fixing login. Next: tests.\n\n"},
        "messageId": "m2",
        "_meta": {
            "cairn": {"kind": "recap", "text": "Fixing login. Next: tests.", "replayed": False}
        },
    }


UV = MemoryRef("Prefers uv", "user", "feedback/uv.md", "/home/u/.cairn/memories/feedback/uv.md")
DEPLOY = MemoryRef("Deploy checklist", "project", "project/deploy.md", "/m/project/deploy.md")


def test_recalled_memories_are_a_message_of_their_own_naming_each_memory() -> None:
    updates = mapper()
    one(AssistantText("answer"), updates)

    recalled = one(MemoryRecalled((UV, DEPLOY), "fast"), updates)

    assert recalled == {
        "sessionUpdate": "agent_message_chunk",
        "content": {
            "type": "text", "text": "Recalled 2 memories: Prefers uv; Deploy checklist\n\n"
        },
        "messageId": "m2",
        "_meta": {"cairn": {
            "kind": "memory", "action": "recalled", "phase": "fast",
            "memories": [
                {"name": "Prefers uv", "scope": "user", "relativePath": "feedback/uv.md",
                 "path": "/home/u/.cairn/memories/feedback/uv.md"},
                {"name": "Deploy checklist", "scope": "project",
                 "relativePath": "project/deploy.md", "path": "/m/project/deploy.md"},
            ],
        }},
    }  # fmt: skip


def test_a_possibly_stale_recalled_memory_says_so_in_the_text_and_the_meta() -> None:
    note = "possibly stale: learned on 2026-03-02 from Makefile, which has changed since"
    stale = MemoryRef("Test command", "project", "project/t.md", "/m/project/t.md", note)

    recalled = one(MemoryRecalled((stale, UV), "fast"))

    text = recalled["content"]["text"]  # type: ignore[index]
    assert text == "Recalled 2 memories: Test command (possibly stale); Prefers uv\n\n"
    [first, second] = recalled["_meta"]["cairn"]["memories"]  # type: ignore[index]
    assert first["note"] == note and "note" not in second


def test_a_memory_change_names_each_memory_its_file_and_how_to_open_it() -> None:
    changed = one(MemoryChanged("extract", saved=(UV,), removed=(DEPLOY,)))

    text = changed["content"]["text"]  # type: ignore[index]
    assert text == (
        "Saved to memory (Extract): Prefers uv — /home/u/.cairn/memories/feedback/uv.md "
        "(`cairn memory show user:feedback/uv.md`)\n"
        "Removed from memory (Extract): Deploy checklist — in the trash; "
        "`cairn memory restore` brings it back\n\n"
    )
    meta = changed["_meta"]["cairn"]  # type: ignore[index]
    assert (meta["action"], meta["operation"]) == ("changed", "extract")
    assert (meta["saved"], meta["updated"], meta["removed"]) == (
        ["feedback/uv.md"], [], ["project/deploy.md"],
    )  # fmt: skip


def test_memory_events_without_memories_give_no_update() -> None:
    assert mapper().event(MemoryRecalled(())) == []
    assert mapper().event(MemoryChanged("dream")) == []


def test_mode_changes_and_context_usage_are_reported() -> None:
    assert one(ModeChanged("plan")) == {
        "sessionUpdate": "current_mode_update",
        "currentModeId": "plan",
    }
    assert one(UsageUpdate(Usage(input_tokens=5), 1200, 128000)) == {
        "sessionUpdate": "usage_update",
        "used": 1200,
        "size": 128000,
    }


def test_available_commands_list_every_slash_command_with_its_hint() -> None:
    update = commands_update(COMMANDS)

    commands = {c["name"]: c for c in update["availableCommands"]}
    assert update["sessionUpdate"] == "available_commands_update"
    assert set(commands) == {c.name for c in COMMANDS}
    assert commands["forget"]["input"] == {"hint": "text"}
    assert "input" not in commands["recap"]


def test_mode_state_names_and_describes_every_mode() -> None:
    state = mode_state("auto-edit", ("plan", "default", "auto-edit", "yolo"))

    assert state["currentModeId"] == "auto-edit"
    assert [m["id"] for m in state["availableModes"]] == ["plan", "default", "auto-edit", "yolo"]
    assert all(m["name"] and m["description"] for m in state["availableModes"])


def test_a_permission_request_shows_the_call_its_diff_and_the_three_choices() -> None:
    request = PermissionRequest(
        "c1",
        "run_shell_command",
        "Run ls",
        ToolKind.EXECUTE,
        "exec",
        {"command": "ls"},
        FileDiff(Path("/p/a"), "o", "n"),
    )

    assert permission_tool_call(request) == {
        "toolCallId": "c1",
        "title": "Run ls",
        "kind": "execute",
        "status": "pending",
        "rawInput": {"command": "ls"},
        "content": [{"type": "diff", "path": "/p/a", "oldText": "o", "newText": "n"}],
    }
    assert permission_options(request) == [
        {"optionId": "allow_once", "name": "Allow once", "kind": "allow_once"},
        {
            "optionId": "allow_always",
            "name": "Allow always (this session)",
            "kind": "allow_always",
        },
        {"optionId": "reject_once", "name": "Reject", "kind": "reject_once"},
    ]


def test_a_replayed_tool_call_gets_its_registry_title_and_kind() -> None:
    items = [
        ReplayItem("user_text", "read the file"),
        ReplayItem("thought", "let me look"),
        ReplayItem(
            "tool_call",
            tool_call_id="c1",
            tool_name="read_file",
            args={"file_path": "a.py"},
            result="ok",
        ),
        ReplayItem("tool_call", tool_call_id="c2", tool_name="edit", error="no match"),
        ReplayItem("tool_call", tool_call_id="c3", tool_name="gone_tool", result="x"),
        ReplayItem("assistant_text", "Done."),
    ]

    updates = mapper().replay(items)

    assert [u["sessionUpdate"] for u in updates] == [
        "user_message_chunk",
        "agent_thought_chunk",
        "tool_call",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
        "tool_call",
        "tool_call_update",
        "agent_message_chunk",
    ]
    title, kind = describe_call(default_registry(), "read_file", {"file_path": "a.py"})
    assert (updates[2]["title"], updates[2]["kind"]) == (title, kind) == (title, "read")
    assert updates[3] == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "completed",
        "content": [{"type": "content", "content": {"type": "text", "text": "ok"}}],
        "rawOutput": {"output": "ok"},
    }
    assert updates[5]["status"] == "failed"
    assert (updates[6]["title"], updates[6]["kind"]) == ("gone_tool", "other")
    assert len({u.get("messageId") for u in updates if "messageId" in u}) == 3


def test_a_replayed_recap_is_its_own_message_like_a_live_one() -> None:
    items = [ReplayItem("assistant_text", "Done."), ReplayItem("recap", "We were reading.")]

    [answer, recap] = mapper().replay(items)

    assert recap["content"] == {"type": "text", "text": "※ recap: We were reading.\n\n"}
    assert recap["_meta"] == {
        "cairn": {"kind": "recap", "text": "We were reading.", "replayed": True}
    }
    assert recap["messageId"] != answer["messageId"]


def test_an_unanswered_replayed_call_stays_pending() -> None:
    items = [ReplayItem("tool_call", tool_call_id="c1", tool_name="ask_user_question")]

    [start] = mapper().replay(items)

    assert start["status"] == "pending"


def test_a_replayed_call_shows_the_summary_people_saw_live() -> None:
    item = ReplayItem(
        "tool_call",
        tool_call_id="c1",
        tool_name="glob",
        args={"pattern": "*.py"},
        result="a.py\nb.py",
        display="Found 2 files",
    )

    [_, done] = mapper().replay([item])

    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "Found 2 files"}}
    ]


# ----- #17: what an editor shows of tool calls, live and replayed alike -----


def test_a_command_shows_its_output_and_raw_output_not_only_its_exit_code() -> None:
    """#17: a shell call's final update carried only "exit 0"."""
    updates = mapper()
    updates.event(ToolCallStart("c1", "run_shell_command", "ls", ToolKind.EXECUTE, {}))
    done = one(
        ToolCallUpdate("c1", "completed", output="a\nb\n\nExit code: 0", display="exit 0"), updates
    )

    assert done["content"] == [
        {"type": "content", "content": {"type": "text", "text": "a\nb\n\nExit code: 0"}}
    ]
    assert done["rawOutput"] == {"output": "a\nb\n\nExit code: 0"}


def test_a_call_in_a_client_terminal_keeps_showing_the_terminal_when_it_ends() -> None:
    updates = mapper()
    updates.event(ToolCallStart("c1", "run_shell_command", "make", ToolKind.EXECUTE, {}))
    running = one(ToolCallUpdate("c1", "in_progress", terminal_id="term-1"), updates)
    done = one(ToolCallUpdate("c1", "completed", output="ok\n\nExit code: 0"), updates)

    terminal = [{"type": "terminal", "terminalId": "term-1"}]
    assert running == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "in_progress",
        "content": terminal,
    }
    assert done["content"] == terminal
    assert done["rawOutput"] == {"output": "ok\n\nExit code: 0"}


@pytest.mark.parametrize(
    ("ending", "text"),
    [
        ("rejected", "Rejected"),
        ("skipped", "Skipped: an earlier call of the same step was rejected"),
        ("cancelled", "Cancelled"),
    ],
)
def test_a_call_that_did_not_run_says_why_for_people(ending: str, text: str) -> None:
    """#17: a rejected call ended "failed" with the text meant for the model."""
    event = ToolCallUpdate("c1", "cancelled", output="The user declined ...", ending=ending)  # type: ignore[arg-type]

    assert one(event) == {
        "sessionUpdate": "tool_call_update",
        "toolCallId": "c1",
        "status": "failed",
        "content": [{"type": "content", "content": {"type": "text", "text": text}}],
        "_meta": {"cairn": {"outcome": ending}},
    }


def test_a_rejection_that_stops_the_turn_is_said_when_the_turn_ends() -> None:
    updates = mapper()
    updates.event(TurnStarted("p", True))
    updates.event(ToolCallStart("c1", "write_file", "Write a.txt", ToolKind.EDIT, {}))
    updates.event(ToolCallUpdate("c1", "cancelled", ending="rejected", denied=True))

    [said] = updates.event(TurnEnded(TurnResult("end_turn")))

    assert said["content"]["text"] == (  # type: ignore[index]
        "Stopped: you rejected Write a.txt. Say how cairn should go on.\n\n"
    )
    assert said["_meta"] == {"cairn": {"kind": "notice", "level": "info", "source": "permissions"}}


def test_calls_a_turn_leaves_open_are_ended_cancelled_when_it_ends() -> None:
    """#17: a call interrupted by a cancel never got a final update (pending for ever)."""
    updates = mapper()
    updates.event(TurnStarted("p", True))
    updates.event(ToolCallStart("c1", "read_file", "Read a", ToolKind.READ, {}))
    updates.event(ToolCallUpdate("c1", "completed", output="x"))
    updates.event(ToolCallStart("c2", "run_shell_command", "sleep 9", ToolKind.EXECUTE, {}))
    updates.event(ToolCallUpdate("c2", "in_progress"))

    ended = updates.event(TurnEnded(TurnResult("cancelled")))

    assert ended == [
        {
            "sessionUpdate": "tool_call_update",
            "toolCallId": "c2",
            "status": "failed",
            "content": [{"type": "content", "content": {"type": "text", "text": "Cancelled"}}],
            "_meta": {"cairn": {"outcome": "cancelled"}},
        }
    ]
    assert updates.event(TurnEnded(TurnResult("end_turn"))) == []


def test_a_retry_is_a_warning_message_naming_attempt_delay_and_reason() -> None:
    """#17: retries were silent; the editor spun for a minute."""
    [shown] = mapper().event(StreamReset("HTTP 500: overloaded", 4.0, 2, 7))

    assert shown["content"]["text"] == (  # type: ignore[index]
        "⚠ The model request failed; retrying in 4 s (attempt 2 of 7): HTTP 500: overloaded\n\n"
    )
    assert shown["_meta"] == {
        "cairn": {
            "kind": "notice",
            "level": "warning",
            "source": "retry",
            "delay": 4.0,
            "reason": "HTTP 500: overloaded",
            "attempt": 2,
            "maxAttempts": 7,
        }
    }


def test_text_after_a_tool_call_or_notice_gets_no_paragraph_break() -> None:
    updates = mapper()
    updates.event(AssistantText("Looking."))
    updates.event(AssistantMessage("Looking.", "", (), Usage(), "m"))
    updates.event(ToolCallStart("c1", "read_file", "Read a", ToolKind.READ, {}))
    after_call = one(AssistantText("Found it."), updates)

    assert after_call["content"]["text"] == "Found it."  # type: ignore[index]


def _replayed_edit() -> ReplayItem:
    return ReplayItem(
        "tool_call",
        tool_call_id="c1",
        tool_name="edit",
        args={"file_path": "a.py", "old_string": "o", "new_string": "n"},
        result="Edited a.py",
        display="Edited a.py",
        status="completed",
        diff=FileDiff(Path("/p/a.py"), "o\n", "n\n"),
        locations=(Location(Path("/p/a.py"), 1),),
    )


def test_a_replayed_edit_shows_the_diff_it_showed_live() -> None:
    """#17: an edit showed a diff live and a sentence on replay."""
    live = mapper()
    live.event(ToolCallStart("c1", "edit", "Edit a.py", ToolKind.EDIT, {}))
    shown_live = one(
        ToolCallUpdate(
            "c1",
            "completed",
            output="Edited a.py",
            diff=FileDiff(Path("/p/a.py"), "o\n", "n\n"),
            locations=(Location(Path("/p/a.py"), 1),),
        ),
        live,
    )

    [_, replayed] = mapper().replay([_replayed_edit()])

    assert replayed == shown_live


def test_a_replayed_rejection_reads_as_the_live_one() -> None:
    item = ReplayItem(
        "tool_call",
        tool_call_id="c1",
        tool_name="write_file",
        error="The user declined this tool call.",
        status="rejected",
    )

    [_, replayed] = mapper().replay([item])

    assert replayed == one(ToolCallUpdate("c1", "cancelled", ending="rejected"))


def test_a_replayed_call_the_turn_left_open_is_ended_as_live() -> None:
    items = [ReplayItem("tool_call", tool_call_id="c1", tool_name="run_shell_command")]

    [_, ended] = mapper().replay(items)

    assert ended["status"] == "failed"
    assert ended["_meta"] == {"cairn": {"outcome": "cancelled"}}


def test_consecutive_replayed_answers_are_separate_paragraphs_as_live() -> None:
    items = [
        ReplayItem("assistant_text", "Done.", uuid="a"),
        ReplayItem("assistant_text", "Again.", uuid="b"),
    ]

    [first, second] = mapper().replay(items)

    assert first["content"]["text"] == "Done."  # type: ignore[index]
    assert second["content"]["text"] == "\n\nAgain."  # type: ignore[index]
