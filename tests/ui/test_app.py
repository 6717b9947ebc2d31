"""The terminal UI driven with Textual's pilot against the scripted model server."""

from __future__ import annotations

import asyncio
import dataclasses
import json
import threading

from cairn.testing import Reply, reply, tool_call
from cairn.tools.scheduler import DECLINED_MESSAGE
from cairn.ui.dialogs import PermissionScreen, QuestionScreen
from cairn.ui.transcript import (
    AssistantView,
    NoticeView,
    ShellView,
    SteerView,
    ThoughtView,
    ToolCallView,
    UserView,
)

from .conftest import MODEL, send, settle, until
from .helpers import screen_text

SIZE = (80, 30)  # small: every row and column drawn costs CPU in each redraw
TALL = (100, 36)  # a plan under the welcome and the call


def views(app, kind):
    return [w for w in app.history_widgets() if isinstance(w, kind)]


# ----- answers -----


async def test_prompt_streams_the_answer_as_markdown(make_app, scripted_server):
    scripted_server.enqueue(reply(chunks=["Hello ", "**world**", "\n\n- one"]), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "say hi")
        await settle(pilot)

        [answer] = views(app, AssistantView)
        assert answer.source == "Hello **world**\n\n- one"
        screen = screen_text(app)
        assert "Hello world" in screen  # rendered, not raw Markdown
        assert "• one" in screen or "•  one" in screen
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "say hi"


async def test_the_prompt_is_shown_as_a_user_message(make_app, scripted_server):
    scripted_server.enqueue(reply("ok"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "fix the bug")
        await settle(pilot)

        assert "› fix the bug" in screen_text(app)
        assert len(views(app, UserView)) == 1


async def test_thoughts_are_collapsed_under_one_line(make_app, scripted_server):
    answer = reply("The answer.", reasoning="a secret chain of thought")
    scripted_server.enqueue(answer, purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "think")
        await settle(pilot)

        [thought] = views(app, ThoughtView)
        assert thought.collapsed
        assert thought.text == "a secret chain of thought"
        screen = screen_text(app)
        assert "Thought" in screen
        assert "secret chain" not in screen


async def test_a_model_error_is_shown_and_the_app_keeps_running(make_app, scripted_server):
    scripted_server.enqueue(reply(status=400, error_message="bad request body"), purpose="main")
    scripted_server.enqueue(reply("second try works"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "first")
        await settle(pilot)
        assert "The model request failed" in screen_text(app)

        await send(pilot, "second")
        await settle(pilot)
        assert "second try works" in screen_text(app)


# ----- tools and approvals -----


async def test_a_cut_answer_is_shown_with_a_notice_saying_so(make_app, scripted_server):
    """Issue 33: an answer cut at its output bound looked complete in the terminal."""
    scripted_server.enqueue(Reply(text="Par", finish_reason="length"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "capital?")
        await settle(pilot)

        [answer] = views(app, AssistantView)
        assert answer.source == "Par"
        assert "The answer was cut at its output bound" in screen_text(app)
        assert any(v.has_class("notice-warning") for v in views(app, NoticeView))


async def test_tool_call_shows_its_title_and_result(make_app, scripted_server, project):
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(tool_call("read_file", {"file_path": "notes.txt"}), purpose="main")
    scripted_server.enqueue(reply("Read it."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "read notes")
        await settle(pilot)

        [tool] = views(app, ToolCallView)
        assert tool.status == "completed"
        screen = screen_text(app)
        assert "✓ Read notes.txt" in screen
        assert "Read lines 1-2 of 2" in screen
        assert '"file_path"' not in screen  # the title already names the file


async def edit_call(project):
    return tool_call(
        "edit",
        {"file_path": str(project / "notes.txt"), "old_string": "beta", "new_string": "gamma"},
    )


async def test_an_edit_asks_first_and_allow_once_applies_it_with_a_diff(
    make_app, scripted_server, project
):
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(await edit_call(project), purpose="main")
    scripted_server.enqueue(reply("Changed."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change notes")
        await until(pilot, lambda: "+gamma" in screen_text(app))
        assert isinstance(app.screen, PermissionScreen)
        assert "+gamma" in screen_text(app)
        assert (project / "notes.txt").read_text() == "alpha\nbeta\n"

        await pilot.press("1")
        await settle(pilot)

        assert (project / "notes.txt").read_text() == "alpha\ngamma\n"
        screen = screen_text(app)
        assert "-beta" in screen and "+gamma" in screen
        assert "--- notes.txt" in screen  # workspace-relative path in the diff


async def test_deny_leaves_the_file_and_hands_control_back(make_app, scripted_server, project):
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(await edit_call(project), purpose="main")
    scripted_server.enqueue(reply("Understood."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change notes")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        await pilot.press("n")
        await settle(pilot)

        assert (project / "notes.txt").read_text() == "alpha\nbeta\n"
        [tool] = views(app, ToolCallView)
        assert tool.status == "cancelled"
        # Issue #30: people read "Rejected" (as ACP shows), not what the model is told.
        screen = screen_text(app)
        assert "Rejected" in screen and DECLINED_MESSAGE not in screen
        await send(pilot, "leave it")
        await settle(pilot)
    second = scripted_server.requests_for("main")[1]
    assert second.contains(DECLINED_MESSAGE)


async def test_a_dialog_without_allow_always_rejects_on_its_second_key(
    make_app, scripted_server, project
):
    """Regression: a settings change offers "1. Allow once" and "2. Reject", but "2" (and "a")
    were bound to allow always, so pressing the key shown for Reject applied the change."""
    settings = project / ".cairn" / "settings.json"
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": str(settings), "content": '{"model": {}}'}),
        purpose="main",
    )
    scripted_server.enqueue(reply("Left it."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change the settings")
        await until(pilot, lambda: "2. Reject" in screen_text(app))
        assert isinstance(app.screen, PermissionScreen)
        assert "2. Reject" in screen_text(app)

        await pilot.press("a")  # not offered here: nothing happens
        await pilot.pause()
        assert isinstance(app.screen, PermissionScreen) and not settings.exists()
        await pilot.press("2")
        await settle(pilot)

        assert not settings.exists()
        [tool] = views(app, ToolCallView)
        assert tool.status == "cancelled"


async def test_allow_always_does_not_ask_again_for_the_same_tool(
    make_app, scripted_server, project
):
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(await edit_call(project), purpose="main")
    scripted_server.enqueue(
        tool_call(
            "edit",
            {"file_path": str(project / "notes.txt"), "old_string": "alpha", "new_string": "A"},
        ),
        purpose="main",
    )
    scripted_server.enqueue(reply("Both done."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change notes")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        await pilot.press("a")
        await settle(pilot)

        assert not isinstance(app.screen, PermissionScreen)
        assert (project / "notes.txt").read_text() == "A\ngamma\n"


async def test_a_shell_approval_names_the_programs_allow_always_would_allow(
    make_app, scripted_server, project
):
    """Issue #30: the dialog offered "Allow always for these programs" without naming them."""
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "mkdir made && touch made/x"}), purpose="main"
    )
    scripted_server.enqueue(reply("Made."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "make it")
        await until(pilot, lambda: "Allow always for" in screen_text(app))

        assert "Allow always for mkdir, touch (this session)" in screen_text(app)
        await pilot.press("a")
        await settle(pilot)
    assert (project / "made" / "x").exists()


async def test_a_dialog_in_a_narrow_terminal_has_no_stray_characters_at_its_edges(
    make_app, scripted_server
):
    """Issue #30: at 60 columns the approval dialog left a few columns of the conversation on
    each side, so a "·" of the welcome line stood right after its corner ("╯·"). A narrow
    terminal's dialog takes its whole width."""
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "mkdir x"}), purpose="main")
    scripted_server.enqueue(reply("Left it."), purpose="main")
    app = make_app()
    async with app.run_test(size=(60, 24)) as pilot:
        await send(pilot, "make x")
        await until(pilot, lambda: "Allow once" in screen_text(app))

        lines = screen_text(app).splitlines()
        top = next(i for i, line in enumerate(lines) if "Allow this command?" in line) - 1
        bottom = next(i for i in range(top, len(lines)) if "╰" in lines[i])
        for line in lines[top : bottom + 1]:  # the box from the first column to the last
            assert line[0] in "╭│╰" and line[59] in "╮│╯", line
        await pilot.press("3")
        await settle(pilot)


async def test_yolo_mode_runs_edits_without_asking(make_app, scripted_server, project):
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(await edit_call(project), purpose="main")
    scripted_server.enqueue(reply("Done."), purpose="main")
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change notes")
        await settle(pilot)

        assert (project / "notes.txt").read_text() == "alpha\ngamma\n"
        assert "yolo" in screen_text(app)


async def test_a_finished_edit_shows_its_diff_not_its_arguments(
    make_app, scripted_server, project
):
    """Regression: the edit's old_string/new_string JSON stood above the diff that shows them."""
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(await edit_call(project), purpose="main")
    scripted_server.enqueue(reply("Done."), purpose="main")
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change notes")
        await settle(pilot)

        screen = screen_text(app)
        assert "+gamma" in screen
        assert '"old_string"' not in screen


async def test_ask_user_question_is_a_choice_list_and_the_choice_reaches_the_model(
    make_app, scripted_server
):
    question = {
        "questions": [
            {
                "question": "Which database?",
                "header": "Storage",
                "options": [{"label": "SQLite"}, {"label": "Postgres", "description": "server"}],
            }
        ]
    }
    scripted_server.enqueue(tool_call("ask_user_question", question), purpose="main")
    scripted_server.enqueue(reply("Postgres it is."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "set up storage")
        await until(pilot, lambda: "Which database?" in screen_text(app))
        assert isinstance(app.screen, QuestionScreen)
        screen = screen_text(app)
        assert "Which database?" in screen and "SQLite" in screen and "server" in screen

        await pilot.press("down", "enter")
        await settle(pilot)

        assert "Postgres it is." in screen_text(app)
    second = scripted_server.requests_for("main")[1]
    assert second.contains("Which database?: Postgres")


async def test_a_question_can_be_answered_in_free_text(make_app, scripted_server):
    question = {"questions": [{"question": "Name?", "options": [{"label": "a"}, {"label": "b"}]}]}
    scripted_server.enqueue(tool_call("ask_user_question", question), purpose="main")
    scripted_server.enqueue(reply("Thanks."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "ask me")
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen))
        await pilot.press("down", "down", "enter")  # "Type another answer…"
        await pilot.press(*"zed", "enter")
        await settle(pilot)
    assert scripted_server.requests_for("main")[1].contains("Name?: zed")


# ----- cancelling, steering, quitting -----


async def test_ctrl_c_closes_an_open_approval_dialog(make_app, scripted_server, project):
    (project / "notes.txt").write_text("alpha\nbeta\n")
    scripted_server.enqueue(await edit_call(project), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "change notes")
        await until(pilot, lambda: isinstance(app.screen, PermissionScreen))
        assert isinstance(app.screen, PermissionScreen)

        await pilot.press("ctrl+c")
        await asyncio.wait_for(app.wait_until_idle(), 3)
        await pilot.pause()

        assert not isinstance(app.screen, PermissionScreen)
        assert (project / "notes.txt").read_text() == "alpha\nbeta\n"


async def test_ctrl_c_twice_quits(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")
        await pilot.pause()
        assert app.is_running
        assert "Press Ctrl+C again to quit" in screen_text(app)

        await pilot.press("ctrl+c")
        await pilot.pause()
    assert app.return_code == 0
    assert not app.is_running


async def test_ctrl_c_clears_typed_text_when_idle(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"draft")
        await pilot.press("ctrl+c")

        assert app.prompt_input.text == ""
        assert app.is_running


async def test_text_typed_during_a_turn_steers_it(make_app, scripted_server, project):
    (project / "a.txt").write_text("a")
    steered = threading.Event()  # the first answer comes once the steering text is sent
    first = tool_call("read_file", {"file_path": "a.txt"})
    scripted_server.enqueue(dataclasses.replace(first, hold=steered), purpose="main")
    scripted_server.enqueue(reply("Also checked the tests."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "read a")
        await until(pilot, lambda: app.busy)
        app.prompt_input.text = "also check the tests"  # typed while the turn runs
        await pilot.press("enter")
        await until(pilot, lambda: bool(views(app, SteerView)))
        steered.set()
        await settle(pilot)

        [steer] = views(app, SteerView)
        assert "also check the tests" in str(steer.render())
        assert "(sent while the agent works)" in screen_text(app)
        assert app.tracker.user_turns == 1  # steering is not a user turn
    first, second = scripted_server.requests_for("main")
    assert not first.contains("also check the tests")
    assert second.contains("also check the tests")


async def test_quit_command_exits(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/quit")
        await pilot.pause()
    assert not app.is_running
    assert app.return_code == 0


# ----- shell, mentions, input -----


async def test_bang_runs_a_shell_command_locally(make_app, scripted_server, project):
    (project / "marker.txt").write_text("")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "!ls")
        await pilot.pause()
        await asyncio.gather(*app.shell_tasks)
        await pilot.pause()

        [shell] = views(app, ShellView)
        assert shell.command == "ls"
        screen = screen_text(app)
        assert "marker.txt" in screen
        assert "[exit 0]" in screen
    assert scripted_server.requests == []


async def test_bang_runs_without_cairns_secrets(make_app, scripted_server, monkeypatch):
    """Regression: `!env` in the UI showed OPENAI_API_KEY and CAIRN_SERVER_TOKEN (it ran with
    cairn's own environment, not the session's command environment)."""
    monkeypatch.setenv("OPENAI_API_KEY", "sk-openai-secret-value")
    monkeypatch.setenv("CAIRN_SERVER_TOKEN", "daemon-token-value")
    monkeypatch.setenv("MY_RENAMED_KEY", "test-key")  # the endpoint's key under another name
    monkeypatch.setenv("HARMLESS_SETTING", "still-here")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "!env")
        await pilot.pause()
        await asyncio.gather(*app.shell_tasks)
        await pilot.pause()

        [shell] = views(app, ShellView)
        shell.output.set_expanded(True)
        printed = shell.output.shown_text()
        assert "HARMLESS_SETTING=still-here" in printed
        for secret in ("sk-openai-secret-value", "daemon-token-value", "MY_RENAMED_KEY"):
            assert secret not in printed


async def test_mention_attaches_the_file_and_keeps_the_typed_text(
    make_app, scripted_server, project
):
    (project / "notes.txt").write_text("the secret number is 42\n")
    scripted_server.enqueue(reply("It is 42."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "what is in @notes.txt")
        await settle(pilot)

        assert "Attached notes.txt." in screen_text(app)
    [request] = scripted_server.requests_for("main")
    assert request.contains("the secret number is 42")
    assert request.contains("what is in @notes.txt")
    records = [json.loads(line) for line in app.session.recorder.path.read_text().splitlines()]
    [user] = [r for r in records if r["type"] == "user"]
    assert user["systemPayload"]["displayText"] == "what is in @notes.txt"


async def test_up_recalls_the_previous_prompt(make_app, scripted_server):
    scripted_server.default = reply("ok")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "first prompt")
        await settle(pilot)
        await send(pilot, "second prompt")
        await settle(pilot)

        await pilot.press("up")
        assert app.prompt_input.text == "second prompt"
        await pilot.press("up")
        assert app.prompt_input.text == "first prompt"
        await pilot.press("down", "down")
        assert app.prompt_input.text == ""


async def test_ctrl_j_adds_a_line_and_enter_sends_both(make_app, scripted_server):
    scripted_server.enqueue(reply("ok"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"line one", "ctrl+j", *"line two")
        assert app.prompt_input.text == "line one\nline two"
        await pilot.press("enter")
        await settle(pilot)
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "line one\nline two"


async def test_a_trailing_backslash_continues_on_a_new_line(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"one\\", "enter", *"two")

        assert app.prompt_input.text == "one\ntwo"


async def test_slash_shows_command_completions_and_tab_completes(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"/rec")
        await pilot.pause()
        assert app.menu.display
        assert [c.label for c in app.menu.completions] == ["/recap"]

        await pilot.press("tab")
        assert app.prompt_input.text == "/recap"
        assert not app.menu.display


async def test_at_shows_file_completions(make_app, project):
    (project / "notes.txt").write_text("")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"read @no")
        await pilot.pause()
        assert [c.label for c in app.menu.completions] == ["@notes.txt"]

        await pilot.press("enter")  # Enter takes the completion first
        assert app.prompt_input.text == "read @notes.txt"


# ----- status line -----


async def test_status_line_shows_model_mode_context_and_memory(make_app, scripted_server):
    scripted_server.enqueue(
        reply("ok", usage={"prompt_tokens": 13107, "completion_tokens": 2, "total_tokens": 13109}),
        purpose="main",
    )
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "hi")
        await settle(pilot)

        status = str(app.status.render_state())
        assert MODEL in status
        assert "default" in status
        assert "context 10% (13.1k/131k)" in status
        assert "memory off" in status


async def test_shift_tab_cycles_the_approval_mode(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("shift+tab")

        assert app.session.approval_mode == "auto-edit"
        assert "auto-edit" in str(app.status.render_state())


async def test_unknown_command_is_reported_without_a_model_request(make_app, scripted_server):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/frobnicate")
        await settle(pilot)

        [notice] = views(app, NoticeView)
        assert "Unknown command /frobnicate" in str(notice.render())
    assert scripted_server.requests == []


async def test_todo_list_is_shown_as_a_plan(make_app, scripted_server):
    todos = [
        {"id": "1", "content": "write the parser", "status": "completed"},
        {"id": "2", "content": "test the parser", "status": "in_progress"},
    ]
    scripted_server.enqueue(tool_call("todo_write", {"todos": todos}), purpose="main")
    scripted_server.enqueue(reply("Working on the tests."), purpose="main")
    app = make_app()
    async with app.run_test(size=TALL) as pilot:
        await send(pilot, "plan it")
        await settle(pilot)

        screen = screen_text(app)
        assert "☑ write the parser" in screen
        assert "◐ test the parser" in screen


async def test_typing_while_a_history_item_has_focus_goes_to_the_prompt(
    make_app, scripted_server
):
    scripted_server.enqueue(reply("Answer.", reasoning="thinking hard"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "think")
        await settle(pilot)
        await pilot.press("tab")  # focus moves to the collapsed thought
        assert app.focused is not app.prompt_input

        await pilot.press("h", "i")

        assert app.focused is app.prompt_input
        assert app.prompt_input.text == "hi"


async def test_a_shell_command_asks_and_shows_the_command(make_app, scripted_server, project):
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "touch made-by-model.txt"}), purpose="main"
    )
    scripted_server.enqueue(reply("Created it."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "make a file")
        await until(pilot, lambda: "touch made-by-model.txt" in screen_text(app))
        assert isinstance(app.screen, PermissionScreen)
        assert "touch made-by-model.txt" in screen_text(app)
        assert not (project / "made-by-model.txt").exists()

        await pilot.press("y")
        await settle(pilot)

        [tool] = views(app, ToolCallView)
        assert tool.status == "completed"
        assert (project / "made-by-model.txt").exists()


async def test_a_multiple_choice_question_sends_every_chosen_option(make_app, scripted_server):
    question = {
        "questions": [
            {
                "question": "Which checks?",
                "multiSelect": True,
                "options": [{"label": "lint"}, {"label": "types"}, {"label": "tests"}],
            }
        ]
    }
    scripted_server.enqueue(tool_call("ask_user_question", question), purpose="main")
    scripted_server.enqueue(reply("Running them."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "check it")
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen))
        await pilot.press("enter", "down", "down", "enter")  # lint, tests
        assert "[x] lint" in screen_text(app) and "[ ] types" in screen_text(app)
        await pilot.press("down", "down", "enter")  # past "Type another answer…" to Done
        await settle(pilot)
    assert scripted_server.requests_for("main")[1].contains("Which checks?: lint, tests")


async def test_escape_skips_a_question(make_app, scripted_server):
    question = {"questions": [{"question": "Name?", "options": [{"label": "a"}, {"label": "b"}]}]}
    scripted_server.enqueue(tool_call("ask_user_question", question), purpose="main")
    scripted_server.enqueue(reply("I will assume a."), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "ask me")
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen))
        await pilot.press("escape")
        await settle(pilot)
    assert scripted_server.requests_for("main")[1].contains("No user is available")


async def test_an_unusable_node_extra_ca_certs_is_a_warning_notice_at_start(
    make_app, tmp_path, monkeypatch
):
    """Bug: the terminal UI said it only in the debug log."""
    from cairn.llm import extra_ca_warning

    monkeypatch.setenv("NODE_EXTRA_CA_CERTS", str(tmp_path / "corporate-ca.pem"))
    warning = extra_ca_warning()
    assert warning is not None

    app = make_app(warnings=(warning,))
    async with app.run_test(size=SIZE) as pilot:
        await settle(pilot)

        [notice] = views(app, NoticeView)
        assert notice.has_class("notice-warning")
        assert "which was not added to the trusted certificates" in str(notice.render())
