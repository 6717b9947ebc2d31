"""The /settings dialog and the approval dialog's choices, through the running app."""

from __future__ import annotations

import json
import os
from pathlib import Path

from cairn.ui.dialogs import SettingsScreen

from .conftest import send, until
from .helpers import screen_text

SIZE = (80, 30)  # small: every row and column drawn costs CPU in each redraw


def user_settings() -> dict:
    path = Path(os.environ["CAIRN_HOME"]) / "settings.json"
    return json.loads(path.read_text()) if path.exists() else {}


async def open_settings(pilot) -> SettingsScreen:
    await send(pilot, "/settings")
    await pilot.pause()
    screen = pilot.app.screen
    assert isinstance(screen, SettingsScreen)
    return screen


async def test_settings_lists_the_editable_settings_with_their_values(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)

        screen = screen_text(app)
        assert "general.showSessionRecap  false" in screen
        assert "general.sessionRecapAwayThresholdMinutes  5" in screen
        assert "tools.approvalMode  default" in screen


async def test_enter_toggles_a_boolean_saves_it_and_applies_it(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: "Saved general.showSessionRecap" in screen_text(app))

        assert app.runtime.settings.general.show_session_recap is True
        assert "general.showSessionRecap  true" in screen_text(app)
        assert "Saved general.showSessionRecap" in screen_text(app)
    assert user_settings() == {"general": {"showSessionRecap": True}}


async def test_a_number_is_typed_and_saved(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        await pilot.press("down", "enter")
        await pilot.pause()
        await pilot.press(*"2.5", "enter")  # the current value is selected: typing replaces it
        await until(
            pilot, lambda: app.runtime.settings.general.session_recap_away_threshold_minutes == 2.5
        )

        assert app.runtime.settings.general.session_recap_away_threshold_minutes == 2.5
    assert user_settings() == {"general": {"sessionRecapAwayThresholdMinutes": 2.5}}


async def test_a_bad_number_is_refused_and_nothing_is_saved(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        await pilot.press("down", "enter")
        await pilot.pause()
        await pilot.press(*"soon", "enter")
        await pilot.pause()

        assert "must be a number" in screen_text(app)
        assert app.runtime.settings.general.session_recap_away_threshold_minutes == 5
    assert user_settings() == {}


async def test_choosing_an_approval_mode_changes_the_running_session(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        await pilot.press("end", "enter")  # tools.approvalMode is the last setting
        await until(pilot, lambda: app.session.approval_mode == "auto-edit")
        await pilot.press("escape")
        await pilot.pause()

        assert app.session.approval_mode == "auto-edit"
        assert "auto-edit" in str(app.status.render_state())
    assert user_settings() == {"tools": {"approvalMode": "auto-edit"}}


async def test_a_broken_settings_file_is_reported_and_left_alone(make_app):
    path = Path(os.environ["CAIRN_HOME"]) / "settings.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("{ not json")
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        await pilot.press("enter")
        await until(pilot, lambda: "Could not change general.showSessionRecap" in screen_text(app))

        assert "Could not change general.showSessionRecap" in screen_text(app)
        assert app.runtime.settings.general.show_session_recap is False
    assert path.read_text() == "{ not json"


async def test_escape_closes_the_settings(make_app):
    app = make_app()
    async with app.run_test(size=SIZE) as pilot:
        await open_settings(pilot)
        await pilot.press("escape")
        await pilot.pause()

        assert not isinstance(app.screen, SettingsScreen)
