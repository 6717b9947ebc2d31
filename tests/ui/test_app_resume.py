"""Resuming recorded sessions: --resume at start and the /resume picker, recaps included."""

from __future__ import annotations

import json

from cairn.testing import reply, tool_call
from cairn.ui.dialogs import ResumeScreen
from cairn.ui.transcript import AssistantView, NoticeView, RecapView, ToolCallView, UserView

from .conftest import record_session, send, settle, until
from .helpers import screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw
OLD = "11111111-2222-4333-8444-555555555555"
OTHER = "99999999-2222-4333-8444-555555555555"
RECAP = "Adding retries to the fetcher. Next: test the backoff."


def widgets(app, kind):
    return [w for w in app.history_widgets() if isinstance(w, kind)]


async def test_resume_replays_prompts_answers_tools_and_recaps(
    make_app, make_runtime, scripted_server, project
):
    (project / "a.txt").write_text("alpha")
    scripted_server.enqueue(tool_call("read_file", {"file_path": "a.txt"}), purpose="main")
    scripted_server.enqueue(reply("It says alpha."), purpose="main")
    await record_session(make_runtime(), ["read a.txt"], session_id=OLD, recap=RECAP)

    app = make_app(resume=OLD)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()

        assert app.session.id == OLD
        assert [str(w.render()) for w in widgets(app, UserView)] == ["› read a.txt"]
        [tool] = widgets(app, ToolCallView)
        assert tool.status == "completed"
        assert tool.tool_title == "Read a.txt"  # titled as the live view titles it
        assert [w.source for w in widgets(app, AssistantView)] == ["It says alpha."]
        assert [w.text for w in widgets(app, RecapView)] == [RECAP]
        assert f"※ recap: {RECAP}" in screen_text(app)


async def test_a_resumed_session_keeps_recording_into_the_same_file(
    make_app, make_runtime, scripted_server
):
    scripted_server.default = reply("ok")
    await record_session(make_runtime(), ["first"], session_id=OLD)

    app = make_app(resume=OLD)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "second")
        await settle(pilot)
        path = app.session.recorder.path
    typed = [
        r["message"]["parts"][0]["text"]
        for r in map(json.loads, path.read_text().splitlines())
        if r["type"] == "user"
    ]
    assert typed == ["first", "second"]
    assert scripted_server.requests_for("main")[-1].contains("first")  # the model history too


async def test_resume_counts_replayed_turns_for_the_away_recap_gates(
    make_app, make_runtime, scripted_server
):
    scripted_server.default = reply("ok")
    await record_session(make_runtime(), ["a", "b", "c"], session_id=OLD, recap=RECAP)

    app = make_app(resume=OLD)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()

        assert app.tracker.user_turns == 3
        assert not app.tracker.gates_pass()  # no new turn since the replayed recap


async def test_resume_picker_lists_sessions_with_their_last_recap(
    make_app, make_runtime, scripted_server
):
    scripted_server.default = reply("ok")
    await record_session(make_runtime(), ["fix the fetcher"], session_id=OLD, recap=RECAP)
    await record_session(make_runtime(), ["write docs"], session_id=OTHER)

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/resume")
        await pilot.pause()

        assert isinstance(app.screen, ResumeScreen)
        screen = screen_text(app)
        assert "fix the fetcher" in screen and "write docs" in screen
        assert f"※ recap: {RECAP}" in screen


async def test_choosing_a_session_in_the_picker_switches_to_it(
    make_app, make_runtime, scripted_server
):
    scripted_server.default = reply("ok")
    await record_session(make_runtime(), ["fix the fetcher"], session_id=OLD, recap=RECAP)

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/resume")
        await pilot.pause()
        await pilot.press("enter")
        await pilot.pause()
        await pilot.pause()

        assert app.session.id == OLD
        assert [w.text for w in widgets(app, RecapView)] == [RECAP]
        assert "› fix the fetcher" in screen_text(app)


async def test_resume_with_an_id_switches_directly(make_app, make_runtime, scripted_server):
    scripted_server.default = reply("ok")
    await record_session(make_runtime(), ["fix the fetcher"], session_id=OLD)

    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, f"/resume {OLD}")
        await pilot.pause()

        assert app.session.id == OLD


async def test_resume_with_an_unknown_id_reports_it(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, f"/resume {OTHER}")
        await pilot.pause()

        [notice] = widgets(app, NoticeView)
        assert f'No session found with ID "{OTHER}".' in str(notice.render())
        assert app.session.id != OTHER


async def test_starting_with_an_unknown_resume_id_exits_with_42(make_app):
    app = make_app(resume=OTHER)
    async with app.run_test(size=SIZE) as pilot:
        await pilot.pause()
    assert app.return_code == 42


QUESTION = {
    "questions": [
        {"question": "Which database?", "options": [{"label": "Postgres"}, {"label": "SQLite"}]}
    ]
}


async def test_resume_asks_a_question_left_open_again_and_continues_with_the_answer(
    make_app, make_runtime, scripted_server
):
    """Regression: only ACP asked a pending ask_user_question again after a load."""
    import asyncio

    from cairn.session.session import PromptRequest
    from cairn.testing import NEVER, ScriptedFrontend
    from cairn.ui.dialogs import QuestionScreen

    async def ignore(event):
        return None

    runtime = make_runtime()
    scripted_server.enqueue(tool_call("ask_user_question", QUESTION, id="ask-1"), purpose="main")
    user = ScriptedFrontend(answers=[NEVER])
    session = runtime.new_session(frontend=user, session_id=OLD)
    turn = asyncio.ensure_future(session.prompt(PromptRequest("set up the database"), ignore))
    await user.wait_until_asked()
    session.cancel()
    await turn
    await runtime.aclose()
    scripted_server.enqueue(reply("Postgres it is."), purpose="main")

    app = make_app(resume=OLD)
    async with app.run_test(size=SIZE) as pilot:
        await until(pilot, lambda: isinstance(app.screen, QuestionScreen))
        assert isinstance(app.screen, QuestionScreen)
        await pilot.press("enter")
        await settle(pilot)

        assert [w.source for w in widgets(app, AssistantView)] == ["Postgres it is."]
    continued = scripted_server.requests_for("main")[-1]
    assert continued.contains("Which database?: Postgres")
