"""Slash commands in the terminal UI: the shared ones run through Session.prompt."""

from __future__ import annotations

import dataclasses
import json
import threading
from pathlib import Path

from cairn.session.commands import NO_RECAP_MESSAGE
from cairn.testing import reply, tool_call
from cairn.ui.dialogs import PermissionScreen, QuestionScreen
from cairn.ui.model_picker import ModelScreen
from cairn.ui.transcript import MemoryView, NoticeView, RecapView

from ..memory.memory_helpers import unstamped
from .conftest import send, settle, until, user_turns
from .helpers import screen_text

SIZE = (80, 30)  # small: every row and column drawn costs CPU in each redraw
WIDE = (100, 40)  # the memory commands' hints on one line each


def status(app) -> str:
    return str(app.status.render_state())


def notices(app) -> list[str]:
    return [str(w.render()) for w in app.history_widgets() if isinstance(w, NoticeView)]


async def test_help_lists_shared_and_ui_commands_and_keys(make_app, scripted_server):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/help")
        await settle(pilot)

        text = "\n".join(notices(app))
        for name in ("/recap", "/memory", "/remember", "/forget", "/dream", "/compress"):
            assert name in text
        assert "/resume" in text and "/settings" in text and "/quit" in text
        assert "Esc interrupts the turn" in text
        assert "Ctrl+C clears the prompt or cancels the turn, twice quits" in text
    assert scripted_server.requests == []


async def test_clear_empties_the_view_and_the_conversation(make_app, scripted_server):
    scripted_server.default = reply("ok")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "remember the word zebra")
        await settle(pilot)
        await send(pilot, "/clear")
        await settle(pilot)

        screen = screen_text(app)
        assert "zebra" not in screen
        assert "Started a fresh conversation." in screen
        await send(pilot, "what was the word?")
        await settle(pilot)
    last = scripted_server.requests_for("main")[-1]
    assert not last.contains("zebra")


async def test_model_switches_the_model_for_the_next_request(make_app, scripted_server):
    scripted_server.default = reply("ok")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/model other-model")
        await settle(pilot)
        assert "other-model" in str(app.status.render_state())

        await send(pilot, "hi")
        await settle(pilot)
    assert scripted_server.requests_for("main")[-1].model == "other-model"


async def test_model_without_a_name_opens_a_picker_of_the_configured_models(
    make_app, scripted_server
):
    """Issue #30: /model answered with a text list; it is a picker now (the current model
    marked, one whose key is not set marked too), and the pick switches as /model <id> does."""
    scripted_server.default = reply("ok")
    available = [
        {"id": "big-model", "name": "Big model", "description": "For hard tasks"},
        {"id": "keyless", "name": "Keyless", "baseUrl": "http://127.0.0.1:9/v1",
         "envKey": "NO_SUCH_KEY_FOR_THE_PICKER"},
    ]  # fmt: skip
    app = make_app({"model": {"available": available}})
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/model")
        await until(pilot, lambda: isinstance(app.screen, ModelScreen))
        shown = screen_text(app)
        assert "Choose the model" in shown
        assert "Big model (big-model) — For hard tasks" in shown
        assert "Keyless (keyless) (not available)" in shown
        assert "NO_SUCH_KEY_FOR_THE_PICKER" in shown  # why
        assert "(current)" in shown

        await pilot.press("1")
        await settle(pilot)
        assert not isinstance(app.screen, ModelScreen)
        assert "big-model" in str(app.status.render_state())
        assert "Model set to Big model." in screen_text(app)
        await send(pilot, "hi")
        await settle(pilot)
    assert scripted_server.requests_for("main")[-1].model == "big-model"


async def test_approval_mode_command_updates_session_and_status(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/approval-mode plan")
        await settle(pilot)

        assert app.session.approval_mode == "plan"
        assert "plan" in str(app.status.render_state())


async def test_memory_off_turns_memory_off_and_the_status_says_so(make_app):
    app = make_app({"memory": {"enableManagedAutoMemory": True}})
    async with app.run_test(size=SIZE) as pilot:
        assert "memory on" in str(app.status.render_state())
        await send(pilot, "/memory off")
        await settle(pilot)

        assert app.runtime.settings.memory.enable_managed_auto_memory is False
        assert "memory off" in str(app.status.render_state())
        assert "Managed memory is now off" in "\n".join(notices(app))


REMEMBERED_TABS = (
    "---\nname: Prefers tabs\ndescription: the user indents code with tabs, never spaces\n"
    "type: feedback\n---\n\nIndent with tabs (MARKER-TABS-4242).\n"
)


async def test_remember_saves_a_memory_shown_as_a_quiet_item_then_a_new_session_recalls_it(
    make_app, scripted_server, tmp_path
):
    """Regression (#16): /remember's write was refused as outside the allowed directories, and
    the terminal UI never showed memory being saved or recalled."""
    target = tmp_path / "cairn-home" / "memories" / "feedback" / "prefers-tabs.md"
    write = tool_call("write_file", {"file_path": str(target), "content": REMEMBERED_TABS})
    scripted_server.enqueue(write, reply("Saved: you prefer tabs."), purpose="main")
    scripted_server.default = reply('{"selected_memories": []}')
    app = make_app(MEMORY_ON)
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "/remember I prefer tabs")
        await settle(pilot)

        assert not isinstance(app.screen, PermissionScreen)  # the user asked: no dialog
        [saved] = [w for w in app.history_widgets() if isinstance(w, MemoryView)]
        assert "Saved to memory (/remember): Prefers tabs" in saved.text
        assert "cairn memory show user:feedback/prefers-tabs.md" in screen_text(app)
    assert unstamped(target.read_text()) == REMEMBERED_TABS
    [request, _] = scripted_server.requests_for("main")
    assert request.contains("I prefer tabs")

    scripted_server.enqueue(reply("Tabs it is."), purpose="main")
    app = make_app(MEMORY_ON, session_id="0a1b2c3d-0000-4000-8000-000000000002")
    async with app.run_test(size=WIDE) as pilot:
        await send(pilot, "should I indent with tabs or spaces?")
        await settle(pilot)

        [recalled] = [w for w in app.history_widgets() if isinstance(w, MemoryView)]
        assert recalled.text.startswith("Recalled 1 memory: Prefers tabs")
        assert "◆ Recalled 1 memory: Prefers tabs" in screen_text(app)  # collapsed: names only
        assert str(target) not in screen_text(app)
    assert scripted_server.requests_for("main")[-1].contains("MARKER-TABS-4242")


async def test_a_recalled_memory_whose_evidence_changed_is_shown_possibly_stale(
    make_app, scripted_server, project
):
    from cairn.memory.paths import memory_roots
    from cairn.memory.trust.provenance import Author, stamp

    root = memory_roots(project).project
    (project / "Makefile").write_text("check:\n\tpytest\n")
    path = root / "project" / "tests.md"
    path.parent.mkdir(parents=True)
    text = (
        "---\nname: Tests run with make check\ndescription: how to run the tests\n"
        "type: project\nevidence: [Makefile]\n---\n\nRun make check.\n"
    )
    path.write_text(stamp(text, previous=None, author=Author("extract", "", None, project, root),
                          path=path).content)  # fmt: skip
    (project / "Makefile").write_text("check:\n\ttox\n")
    scripted_server.default = reply('{"selected_memories": []}')
    scripted_server.enqueue(reply("Use make check."), purpose="main")
    app = make_app(MEMORY_ON)
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "how do I run the tests with make check")
        await settle(pilot)

        [recalled] = [w for w in app.history_widgets() if isinstance(w, MemoryView)]
        assert "◆ Recalled 1 memory: Tests run with make check (possibly stale)" in screen_text(app)
        assert "from Makefile, which has changed since" in recalled.text
    assert scripted_server.requests_for("main")[-1].contains("POSSIBLY STALE")


async def test_recap_command_shows_a_recap_item_and_records_it(make_app, scripted_server):
    scripted_server.default = reply("ok")
    recap = reply("<recap>Porting the parser. Next: tests.</recap>")
    scripted_server.enqueue(recap, purpose="recap")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 1)
        await send(pilot, "/recap")
        await settle(pilot)

        [view] = [w for w in app.history_widgets() if isinstance(w, RecapView)]
        assert view.text == "Porting the parser. Next: tests."
        assert "※ recap: Porting the parser." in screen_text(app)
        records = [json.loads(x) for x in app.session.recorder.path.read_text().splitlines()]
    [command] = [r for r in records if r.get("subtype") == "slash_command"]
    assert command["systemPayload"]["outputHistoryItems"][0]["text"] == view.text


async def test_recap_without_history_says_there_is_not_enough_context(make_app, scripted_server):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/recap")
        await settle(pilot)

        assert NO_RECAP_MESSAGE in "\n".join(notices(app))
        assert not [w for w in app.history_widgets() if isinstance(w, RecapView)]


async def test_recap_while_a_turn_runs_is_refused(make_app, scripted_server):
    """Regression (flaky under load): a 0.6 s scripted delay could end the turn before /recap."""
    answer_may_start = threading.Event()
    scripted_server.enqueue(reply("slow", hold=answer_may_start), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "long job")
        await until(pilot, lambda: app.busy)
        await send(pilot, "/recap")
        await pilot.pause()

        assert "Cannot run /recap while another operation is in progress." in notices(app)[-1]
        answer_may_start.set()
        await settle(pilot)
    assert scripted_server.requests_for("recap") == []


async def test_compress_on_a_short_conversation_says_so_in_words(make_app, scripted_server):
    """Regression: `/compress` after one exchange answered `failed_inflated_token_count`."""
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply("<state_snapshot>" + "a long summary " * 40), purpose="compress")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 1)
        await send(pilot, "/compress")
        await settle(pilot)

        last = notices(app)[-1]
        assert "Nothing to compress yet" in last
        assert "_" not in last
    assert len(scripted_server.requests_for("compress")) == 1


def usage(prompt: int, completion: int = 100) -> dict[str, int]:
    return {"prompt_tokens": prompt, "completion_tokens": completion}


async def test_the_context_figure_follows_each_response(make_app, scripted_server, project):
    (project / "a.txt").write_text("alpha")
    read = tool_call("read_file", {"file_path": "a.txt"})
    scripted_server.enqueue(dataclasses.replace(read, usage=usage(13_000)), purpose="main")
    scripted_server.enqueue(reply("It says alpha.", usage=usage(26_000)), purpose="main")
    scripted_server.enqueue(reply("Yes.", usage=usage(39_000)), purpose="main")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "read a.txt")
        await settle(pilot)
        assert "context 20% (26.0k/131k)" in status(app)

        await send(pilot, "sure?")
        await settle(pilot)
        assert "context 30% (39.0k/131k)" in status(app)


async def test_the_context_figure_is_current_after_compress(make_app, scripted_server):
    """Regression: after `/compress` the status line kept showing the old, larger figure."""
    for index in range(4):
        answer = reply(" ".join(f"detail-{index}-{n}" for n in range(60)), usage=usage(50_000))
        scripted_server.enqueue(answer, purpose="main")
    summary = reply("<state_snapshot>the work so far</state_snapshot>", usage=usage(40_000, 500))
    scripted_server.enqueue(summary, purpose="compress")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 4)
        assert "context 38% (50.0k/131k)" in status(app)

        await send(pilot, "/compress")
        await settle(pilot)

        # 11,500 by the summary's usage, and the user's words kept word for word besides it
        assert "Compressed the conversation: 50000 → 115" in notices(app)[-1]
        assert "context 9% (11.5k/131k)" in status(app)


async def test_the_context_figure_is_zero_after_clear(make_app, scripted_server):
    scripted_server.default = reply("ok", usage=usage(50_000))
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 1)
        assert "context 38%" in status(app)

        await send(pilot, "/clear")
        await settle(pilot)

        assert "context 0%" in status(app)


async def test_a_command_is_shown_as_typed(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await send(pilot, "/approval-mode yolo")
        await settle(pilot)

        assert "› /approval-mode yolo" in screen_text(app)


MEMORY_ON = {"memory": {"enableManagedAutoMemory": True}}
TABS = """---
name: Prefers tabs
description: The user indents with tabs, never spaces.
type: feedback
---
Indent with tabs.
"""


def write_memory(app) -> Path:
    root = app.runtime.memory_manager().roots.project
    path = root / "feedback" / "prefers-tabs.md"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(TABS)
    return path


async def test_memory_lists_the_managed_memories(make_app):
    app = make_app(MEMORY_ON)
    async with app.run_test(size=SIZE) as pilot:
        write_memory(app)
        await send(pilot, "/memory")
        await settle(pilot)

        listing = notices(app)[-1]
        assert "Managed memory is on: 1 memory." in listing
        assert "[feedback] Prefers tabs" in listing


async def test_forget_asks_in_a_choice_list_before_removing(make_app, scripted_server):
    selected = '{"selected_ids": ["project:feedback/prefers-tabs.md"]}'
    scripted_server.enqueue(reply(selected), purpose="forget")
    app = make_app(MEMORY_ON)
    async with app.run_test(size=WIDE) as pilot:
        path = write_memory(app)
        await send(pilot, "/forget the tabs preference")
        await until(pilot, lambda: "Forget these memories?" in screen_text(app))
        assert isinstance(app.screen, QuestionScreen)
        assert "Forget these memories?" in screen_text(app)

        await pilot.press("enter")  # "Forget them"
        await settle(pilot)

        assert not path.exists()
        [removed] = [w for w in app.history_widgets() if isinstance(w, MemoryView)]
        assert removed.text.startswith("Removed from memory (/forget): Prefers tabs")
        # Issue #30: the restore hint was printed twice (the removal's line, then the answer).
        assert screen_text(app).count("cairn memory restore") == 1
        assert "cairn memory restore" in removed.text
