"""The away recap in the running UI: terminal blur and focus, an injected clock, each gate."""

from __future__ import annotations

import dataclasses
import json
import threading

from textual import events

from cairn.testing import reply, tool_call
from cairn.ui.dialogs import SettingsScreen
from cairn.ui.transcript import RecapView, SteerView

from .conftest import away_for, send, settle, until, user_turns
from .helpers import screen_text

SIZE = (80, 24)  # small: every row and column drawn costs CPU in each redraw
RECAP = "Refactoring the settings loader. Next: run the failing test."
ON = {"general": {"showSessionRecap": True}}


def recaps(app) -> list[RecapView]:
    return [w for w in app.history_widgets() if isinstance(w, RecapView)]


def recorded(app) -> list[dict]:
    return [json.loads(line) for line in app.session.recorder.path.read_text().splitlines()]


async def test_away_recap_fires_after_the_threshold_and_is_shown_inline(
    make_app, scripted_server, clock
):
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await away_for(pilot, clock, 5)

        [view] = recaps(app)
        assert view.text == RECAP
        assert f"※ recap: {RECAP}" in screen_text(app)
        assert app.history_widgets()[-1] is view  # in the conversation, after the last turn
    assert len(scripted_server.requests_for("recap")) == 1


async def test_away_recap_is_recorded_as_a_result_only(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await away_for(pilot, clock, 5)

        commands = [r for r in recorded(app) if r.get("subtype") == "slash_command"]
    assert [c["systemPayload"] for c in commands] == [
        {
            "phase": "result",
            "rawCommand": "/recap",
            "outputHistoryItems": [{"type": "away_recap", "text": RECAP}],
        }
    ]


async def test_recap_is_not_fired_when_the_setting_is_off(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    app = make_app()  # general.showSessionRecap defaults to false
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await away_for(pilot, clock, 60)

        assert recaps(app) == []
    assert scripted_server.requests_for("recap") == []


async def test_a_blur_shorter_than_the_threshold_fires_nothing(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    app = make_app({"general": {"showSessionRecap": True, "sessionRecapAwayThresholdMinutes": 10}})
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await away_for(pilot, clock, 9.5)

    assert scripted_server.requests_for("recap") == []


async def test_fewer_than_three_user_turns_fire_nothing(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 2)
        await away_for(pilot, clock, 30)

    assert scripted_server.requests_for("recap") == []


async def test_steering_messages_do_not_count_toward_the_gate(
    make_app, scripted_server, clock, project
):
    (project / "a.txt").write_text("a")
    scripted_server.enqueue(reply("ok"), purpose="main")
    steered = threading.Event()  # the tool call comes once the steering text is sent
    held_call = dataclasses.replace(tool_call("read_file", {"file_path": "a.txt"}), hold=steered)
    scripted_server.enqueue(held_call, purpose="main")
    scripted_server.default = reply("ok")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 1)
        await send(pilot, "read a")
        await until(pilot, lambda: app.busy)
        await send(pilot, "and b too")  # steering: 2 real turns + 1 steer
        await until(pilot, lambda: any(isinstance(w, SteerView) for w in app.history_widgets()))
        steered.set()
        await settle(pilot)
        await away_for(pilot, clock, 30)

        assert app.tracker.user_turns == 2
    assert scripted_server.requests_for("recap") == []


async def test_two_new_turns_are_needed_after_a_recap(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply("<recap>First recap.</recap>"), purpose="recap")
    scripted_server.enqueue(reply("<recap>Second recap.</recap>"), purpose="recap")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await away_for(pilot, clock, 5)
        await user_turns(pilot, 1)
        await away_for(pilot, clock, 5)
        assert [v.text for v in recaps(app)] == ["First recap."]

        await user_turns(pilot, 1)
        await away_for(pilot, clock, 5)
        assert [v.text for v in recaps(app)] == ["First recap.", "Second recap."]


async def test_a_recap_arriving_after_a_new_turn_started_is_dropped(
    make_app, scripted_server, clock
):
    scripted_server.default = reply("ok")
    recap_may_come = threading.Event()  # the recap answer comes once the new turn has started
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>", hold=recap_may_come), purpose="recap")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        app.post_message(events.AppBlur())
        await pilot.pause()
        clock.advance(5)
        app.post_message(events.AppFocus())
        await pilot.pause()
        assert app.recap_task is not None and not app.recap_task.done()

        await send(pilot, "a new prompt while the recap is generated")
        await until(pilot, lambda: app.busy or app.tracker.user_turns == 4)  # it may end at once
        recap_may_come.set()
        await settle(pilot)

        assert len(scripted_server.requests_for("recap")) == 1
        assert recaps(app) == []
        assert not any(r.get("subtype") == "slash_command" for r in recorded(app))


async def test_focus_returning_mid_turn_fires_when_the_turn_ends(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        answer_may_start = threading.Event()
        scripted_server.enqueue(reply("slow answer", hold=answer_may_start), purpose="main")
        await send(pilot, "fourth")
        await until(pilot, lambda: app.busy)
        app.post_message(events.AppBlur())
        await pilot.pause()
        clock.advance(6)
        app.post_message(events.AppFocus())
        await pilot.pause()
        assert scripted_server.requests_for("recap") == []  # busy: waits for the turn

        answer_may_start.set()
        await settle(pilot)
        await settle(pilot)

        assert [v.text for v in recaps(app)] == [RECAP]


async def test_a_failed_recap_shows_nothing(make_app, scripted_server, clock):
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply("no tags here, just rambling"), purpose="recap")
    app = make_app(ON)
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await away_for(pilot, clock, 5)

        assert recaps(app) == []
        assert "rambling" not in screen_text(app)


async def test_turning_the_setting_on_in_settings_applies_without_restart(
    make_app, scripted_server, clock
):
    scripted_server.default = reply("ok")
    scripted_server.enqueue(reply(f"<recap>{RECAP}</recap>"), purpose="recap")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await user_turns(pilot, 3)
        await send(pilot, "/settings")
        await pilot.pause()
        assert isinstance(app.screen, SettingsScreen)
        await pilot.press("enter")  # the first setting: general.showSessionRecap
        await until(pilot, lambda: app.runtime.settings.general.show_session_recap is True)
        await pilot.press("escape")
        await pilot.pause()
        assert app.runtime.settings.general.show_session_recap is True

        await away_for(pilot, clock, 5)

        assert [v.text for v in recaps(app)] == [RECAP]
