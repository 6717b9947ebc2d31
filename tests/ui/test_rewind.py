"""``/rewind`` in the terminal UI: the turn picker, the three choices, undo, the transcript."""

from __future__ import annotations

from pathlib import Path

from cairn.testing import ScriptedServer, reply, tool_call
from cairn.ui.rewind import RewindModeScreen, RewindScreen
from cairn.ui.transcript import NoticeView, UserView

from .conftest import AppFactory, send, settle
from .helpers import screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw


def _notices(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [str(w.render()) for w in app.history_widgets() if isinstance(w, NoticeView)]


def _prompts(app) -> list[str]:  # type: ignore[no-untyped-def]
    return [
        str(w.render()).removeprefix("› ") for w in app.history_widgets() if isinstance(w, UserView)
    ]


def _script_two_turns(server: ScriptedServer) -> None:
    server.enqueue(
        tool_call("write_file", {"file_path": "first.txt", "content": "1\n"}), reply("One."),
        tool_call("write_file", {"file_path": "second.txt", "content": "2\n"}), reply("Two."),
        purpose="main",
    )  # fmt: skip


async def test_the_picker_rewinds_the_code_of_a_turn_and_undoes_it(
    make_app: AppFactory, scripted_server: ScriptedServer, project: Path
) -> None:
    _script_two_turns(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        for prompt in ("make the first file", "make the second file"):
            await send(pilot, prompt)
            await settle(pilot)

        await send(pilot, "/rewind")
        await settle(pilot)
        assert isinstance(app.screen, RewindScreen)
        shown = screen_text(app)
        assert "Rewind to before which turn?" in shown
        assert "2. make the second file" in shown and "second.txt" in shown
        await pilot.press("enter")  # the newest turn is highlighted first
        await settle(pilot)
        assert isinstance(app.screen, RewindModeScreen)
        assert "Restore the code only" in screen_text(app)
        await pilot.press("3")
        await settle(pilot)

        assert not (project / "second.txt").exists() and (project / "first.txt").exists()
        assert "Rewound to turn 2" in _notices(app)[-1]
        assert _prompts(app) == ["make the first file", "make the second file"]

        await send(pilot, "/rewind")
        await settle(pilot)
        assert "Undo the last rewind" in screen_text(app)
        await pilot.press("enter")
        await settle(pilot)
        assert (project / "second.txt").exists()
        assert "Undid the last rewind" in _notices(app)[-1]


async def test_a_conversation_rewind_redraws_the_conversation_and_offers_the_prompt_again(
    make_app: AppFactory, scripted_server: ScriptedServer, project: Path
) -> None:
    _script_two_turns(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        for prompt in ("make the first file", "make the second file"):
            await send(pilot, prompt)
            await settle(pilot)

        await send(pilot, "/rewind 2 conversation")
        await settle(pilot)

        assert _prompts(app) == ["make the first file"]
        assert app.prompt_input.text == "make the second file"
        assert (project / "second.txt").exists()  # the files stay
        assert "the conversation is back to before turn 2" in _notices(app)[-1]


async def test_escape_closes_the_picker_and_nothing_changes(
    make_app: AppFactory, scripted_server: ScriptedServer, project: Path
) -> None:
    _script_two_turns(scripted_server)
    app = make_app(approval_mode="yolo")
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "make the first file")
        await settle(pilot)
        await send(pilot, "/rewind")
        await settle(pilot)
        await pilot.press("escape")
        await settle(pilot)

        assert not isinstance(app.screen, RewindScreen)
        assert (project / "first.txt").exists()


async def test_rewind_before_any_turn_says_so(make_app: AppFactory) -> None:
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/rewind")
        await settle(pilot)

        assert _notices(app)[-1] == "ℹ No turns to rewind to yet."
