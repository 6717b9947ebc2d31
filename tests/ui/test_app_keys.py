"""Keys in the terminal UI: bursts of input, Ctrl+C, Esc and the working indicator."""

from __future__ import annotations

import asyncio
import time

import pytest

from cairn.testing import reply
from cairn.ui.transcript import NoticeView

from .conftest import send, settle, slow, until
from .helpers import burst, screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw
STILL_RUNNING = 60  # seconds a scripted answer takes: the turn runs until the test ends it


def notices(app) -> list[str]:
    return [str(w.render()) for w in app.history_widgets() if isinstance(w, NoticeView)]


# ----- bursts: every key applies in order, Enter sees the text as it is then -----


async def test_a_burst_of_a_command_and_enter_runs_that_command(make_app, scripted_server):
    """Regression: a fast `/help` + Enter became `/helpelp` (Enter took a completion for `/h`)."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, "/", "h")  # the menu now offers the commands starting with /h
        await burst(pilot, *"elp", "enter")  # the rest arrives before the menu catches up
        await settle(pilot)

        text = "\n".join(notices(app))
        assert "/recap" in text  # the help text
        assert "Unknown command" not in text
        assert app.prompt_input.text == ""
    assert scripted_server.requests == []


async def test_a_burst_with_ctrl_j_keeps_both_lines(make_app, scripted_server):
    """Regression: `line one`, Ctrl+J, `line two` sent fast became `line oneline two`."""
    scripted_server.enqueue(reply("ok"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, *"line one", "ctrl+j", *"line two", "enter")
        await settle(pilot)

        assert app.prompt_input.text == ""
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "line one\nline two"


async def test_a_burst_with_tab_completes_what_was_typed_by_then(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, *"/rem", "tab")

        assert app.prompt_input.text == "/remember "


async def test_a_burst_with_cursor_keys_edits_where_the_cursor_is_then(make_app, scripted_server):
    scripted_server.enqueue(reply("ok"), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, *"world", "home", *"hello ", "end", "!", "enter")
        await settle(pilot)
    [request] = scripted_server.requests_for("main")
    assert request.last_user_text() == "hello world!"


async def test_a_burst_with_a_file_mention_and_enter_completes_then_waits(make_app, project):
    (project / "notes.txt").write_text("")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, *"read @no", "enter")

        assert app.prompt_input.text == "read @notes.txt"


async def test_a_burst_of_two_prompts_sends_both_in_order(make_app, scripted_server):
    scripted_server.default = reply("ok")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, *"first", "enter")
        await settle(pilot)
        await burst(pilot, *"second", "enter")
        await settle(pilot)
    assert [r.last_user_text() for r in scripted_server.requests_for("main")] == [
        "first",
        "second",
    ]


# ----- Ctrl+C and Esc -----


async def test_ctrl_c_clearing_a_draft_does_not_arm_quit(make_app):
    """Regression: clearing a draft armed quit, so the next Ctrl+C within 2 s lost a new draft."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"draft", "ctrl+c")
        assert app.prompt_input.text == ""
        assert "Press Ctrl+C again to quit" not in screen_text(app)

        await pilot.press(*"new draft", "ctrl+c")
        await pilot.pause()

        assert app.is_running
        assert app.prompt_input.text == ""


async def test_ctrl_c_never_quits_while_the_prompt_box_holds_text(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press("ctrl+c")  # armed: the next Ctrl+C quits an idle, empty prompt
        await pilot.press(*"a thought", "ctrl+c")
        await pilot.pause()

        assert app.is_running
        assert app.prompt_input.text == ""


async def test_ctrl_c_on_an_empty_prompt_after_clearing_arms_then_quits(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"draft", "ctrl+c", "ctrl+c")
        assert app.is_running
        assert "Press Ctrl+C again to quit" in screen_text(app)

        await pilot.press("ctrl+c")
        await pilot.pause()
    assert not app.is_running
    assert app.return_code == 0


@pytest.mark.parametrize("key", ["escape", "ctrl+c"])
async def test_escape_and_ctrl_c_interrupt_the_running_turn(make_app, scripted_server, key):
    scripted_server.enqueue(slow(reply("too late"), STILL_RUNNING), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long task")
        await until(pilot, lambda: app.busy)
        assert app.busy

        await pilot.press(key)
        await asyncio.wait_for(app.wait_until_idle(), 3)
        await pilot.pause()

        assert not app.busy
        assert "Cancelled." in screen_text(app)
        assert "too late" not in screen_text(app)
        assert app.is_running


async def test_escape_with_completions_open_only_closes_them(make_app, scripted_server):
    scripted_server.enqueue(slow(reply("finished"), STILL_RUNNING), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long task")
        await until(pilot, lambda: app.busy)
        await pilot.press(*"/re")
        assert app.menu.display

        await pilot.press("escape")
        await pilot.pause()

        assert not app.menu.display
        assert app.busy
        assert "Cancelled." not in screen_text(app)
        app.session.cancel()
        await settle(pilot)


async def test_escape_when_idle_keeps_the_draft(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await pilot.press(*"draft", "escape")

        assert app.prompt_input.text == "draft"
        assert app.is_running


# ----- the working indicator -----


async def test_working_shows_a_spinner_and_the_elapsed_time(make_app, scripted_server, clock):
    scripted_server.enqueue(slow(reply("done"), STILL_RUNNING), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long task")
        await until(pilot, lambda: "working" in str(app.status.render_state()))
        assert "working… 0s" in str(app.status.render_state())

        clock.advance(65.3 / 60)
        first = str(app.status.render_state())
        app.status.tick()
        second = str(app.status.render_state())

        assert "working… 1m 05s" in second
        assert first[0] != second[0]  # the spinner moved
        assert "esc to interrupt" in second
        app.session.cancel()
        await settle(pilot)

        assert "working" not in str(app.status.render_state())


async def test_the_spinner_turns_on_its_own_while_a_turn_runs(make_app, scripted_server):
    scripted_server.enqueue(slow(reply("done"), STILL_RUNNING), purpose="main")
    app = make_app(clock=time.monotonic)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long task")
        await until(pilot, lambda: app.busy)
        frames = {str(app.status.render_state())[0]}

        def turned_twice() -> bool:
            frames.add(str(app.status.render_state())[0])
            return len(frames) > 2

        await until(pilot, turned_twice)
        app.session.cancel()
        await settle(pilot)

    assert len(frames) > 2


async def test_two_commands_in_one_burst_run_one_after_the_other(make_app, scripted_server):
    """Issue #30: the second of two commands typed in one burst was refused ("Cannot run ...
    while a turn is running"), and the refusal showed above the first command."""
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await burst(pilot, *"/help", "enter", *"/approval-mode plan", "enter")
        await settle(pilot)

        shown = [str(w.render()) for w in app.history_widgets()[1:]]
        assert not any("Cannot run" in line for line in shown)
        first = next(i for i, line in enumerate(shown) if line.endswith("/help"))
        second = next(i for i, line in enumerate(shown) if line.endswith("/approval-mode plan"))
        assert first < second
        assert any("/recap" in line for line in shown[first + 1 : second])  # the help text
        assert app.session.approval_mode == "plan"
    assert scripted_server.requests == []
