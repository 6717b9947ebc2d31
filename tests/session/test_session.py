"""The session runtime's turn loop: the todo reminder and mid-turn steering."""

from __future__ import annotations

from cairn.content import FunctionResponse, Text, Thought
from cairn.llm.types import ModelRequest
from cairn.session.session import PromptRequest, Session
from cairn.session.turn import TODO_REMINDER_CAP
from cairn.testing import reply, tool_call
from cairn.vocabulary.events import AssistantThought, SessionEvent, ToolCallStart

from .helpers import MakeWorld

TODOS = {
    "todos": [
        {"id": "1", "content": "write the parser", "status": "completed"},
        {"id": "2", "content": "add tests for the parser", "status": "pending"},
    ]
}
REMINDER = "todo item(s) still open"


def last_user_parts(request: ModelRequest) -> list[object]:
    return list(request.contents[-1].parts)


def texts_of(request: ModelRequest) -> list[str]:
    return [p.text for p in last_user_parts(request) if isinstance(p, Text)]


async def test_ending_a_turn_with_open_todos_sends_one_reminder_in_the_same_turn(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    done = {"todos": [{**item, "status": "completed"} for item in TODOS["todos"]]}
    world.provider.enqueue(
        tool_call("todo_write", TODOS),
        reply("Parser written."),
        tool_call("todo_write", done),
        reply("Tests added too."),
    )
    session = world.session(approval_mode="yolo")

    result = await world.prompt(session, "write a parser")

    requests = world.main_requests()
    assert len(requests) == 4  # the reminder, then the model closes its list and stops
    reminder = texts_of(requests[2])
    assert len(reminder) == 1 and REMINDER in reminder[0]
    assert "add tests for the parser" in reminder[0]
    assert "write the parser" not in reminder[0]  # completed items are not listed
    assert result.stop_reason == "end_turn" and result.text == "Tests added too."


async def test_the_todo_reminder_is_sent_at_most_three_times_per_turn(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(tool_call("todo_write", TODOS))
    world.provider.default = reply("Still not done.")
    session = world.session(approval_mode="yolo")

    await world.prompt(session, "write a parser")

    reminders = [r for r in world.main_requests() if any(REMINDER in t for t in texts_of(r))]
    assert len(reminders) == TODO_REMINDER_CAP
    assert len(world.main_requests()) == 2 + TODO_REMINDER_CAP


async def test_text_sent_while_a_tool_runs_follows_its_result_in_the_next_request(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    (world.project / "notes.txt").write_text("the notes\n")
    world.provider.enqueue(tool_call("read_file", {"file_path": "notes.txt"}), reply("Done."))
    session = world.session()

    async def steer_when_the_tool_starts(event: SessionEvent) -> None:
        if isinstance(event, ToolCallStart):
            assert session.steer("also check the README")

    result = await session.prompt(PromptRequest("read the notes"), steer_when_the_tool_starts)

    second = world.main_requests()[1]
    parts = last_user_parts(second)
    assert isinstance(parts[0], FunctionResponse)
    assert isinstance(parts[1], Text) and parts[1].text.endswith("also check the README")
    assert "not a new request" in parts[1].text
    assert result.stop_reason == "end_turn"
    assert session.turn_count == 1  # steering is not a new turn


async def test_steering_that_arrives_with_the_final_answer_continues_the_turn(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(reply("Here is the summary."), reply("Shorter: done."))
    session = world.session()
    steered: list[bool] = []

    async def steer_during_the_answer(event: SessionEvent) -> None:
        if not steered and type(event).__name__ == "AssistantText":
            steered.append(session.steer("make it shorter"))

    result = await session.prompt(PromptRequest("summarise"), steer_during_the_answer)

    requests = world.main_requests()
    assert len(requests) == 2
    assert texts_of(requests[1])[0].endswith("make it shorter")
    assert result.text == "Shorter: done."


async def test_blank_steering_text_is_ignored(make_world: MakeWorld) -> None:
    session: Session = make_world().session()
    assert session.steer("   ") is False


async def test_steering_is_recorded_and_restored_on_resume(make_world: MakeWorld) -> None:
    world = make_world()
    (world.project / "notes.txt").write_text("the notes\n")
    world.provider.enqueue(tool_call("read_file", {"file_path": "notes.txt"}), reply("Done."))
    session = world.session()

    async def steer(event: SessionEvent) -> None:
        if isinstance(event, ToolCallStart):
            session.steer("also check the README")

    await session.prompt(PromptRequest("read the notes"), steer)
    await session.close()

    resumed = world.load(session.id)
    flattened = [p.text for entry in resumed.history for p in entry.parts if isinstance(p, Text)]
    assert any(text.endswith("also check the README") for text in flattened)


async def test_inline_reasoning_is_shown_as_thought_and_kept_out_of_the_answer(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    world.provider.enqueue(reply(chunks=["<think>check the ", "tests first</think>", "All green."]))
    session = world.session()

    result = await world.prompt(session, "are the tests green?")

    assert result.text == "All green."
    thoughts = "".join(e.text for e in world.events if isinstance(e, AssistantThought))
    assert thoughts == "check the tests first"
    answer = session.history[-1]
    assert answer.text == "All green."
    assert [p.text for p in answer.parts if isinstance(p, Thought)] == ["check the tests first"]


async def test_settings_written_during_a_session_do_not_change_its_permissions(
    make_world: MakeWorld,
) -> None:
    """Regression (#18): settings changed during a session take effect for permissions only
    after the user confirms. A settings change allowed in yolo mode (the user's choice) leaves
    this session's rules and hooks as they were, and says so."""
    import json

    from cairn.vocabulary.events import Notice

    world = make_world()
    session = world.session(approval_mode="yolo")
    escalation = json.dumps({"permissions": {"allow": ["Bash"]}})
    world.provider.enqueue(
        tool_call("write_file", {"file_path": ".cairn/settings.json", "content": escalation}),
        reply("Written."),
    )
    await world.prompt(session, "write the settings")
    assert json.loads((world.project / ".cairn" / "settings.json").read_text())["permissions"]
    notices = [e.text for e in world.events if isinstance(e, Notice) and e.source == "permissions"]
    assert notices and "keeps the permission rules and hooks it started with" in notices[0]

    session.approval_mode = "default"
    world.provider.enqueue(
        tool_call("run_shell_command", {"command": "touch pwned"}), reply("Done.")
    )
    await world.prompt(session, "now run it")

    assert not (world.project / "pwned").exists()


async def test_a_settings_change_the_user_approved_applies_to_the_session_at_once(
    make_world: MakeWorld,
) -> None:
    """The other half: confirmed in its "Settings change" dialog, the new rules and hooks
    apply from the next call on."""
    import json

    from cairn.testing import ScriptedFrontend
    from cairn.vocabulary.events import Notice

    world = make_world()
    user = ScriptedFrontend(permissions=["allow_once"], default_permission=None)
    session = world.session(frontend=user)
    hook = {"hooks": [{"type": "command", "command": "cat > /dev/null; touch hooked"}]}
    settings = {"permissions": {"allow": ["Bash(touch *)"]}, "hooks": {"PreToolUse": [hook]}}
    world.provider.enqueue(
        tool_call(
            "write_file", {"file_path": ".cairn/settings.json", "content": json.dumps(settings)}
        ),
        tool_call("run_shell_command", {"command": "touch ran"}),
        reply("Done."),
    )

    await world.prompt(session, "allow touch and add the hook")

    (request,) = user.permission_requests  # only the settings change asked
    assert request.title.startswith("Settings change")
    assert (world.project / "ran").exists() and (world.project / "hooked").exists()
    notices = [e.text for e in world.events if isinstance(e, Notice) and e.source == "permissions"]
    assert notices == [
        "Cairn's project configuration (.cairn/settings.json) was changed with your approval; "
        "this session's permission rules and hooks now follow the settings files."
    ]
