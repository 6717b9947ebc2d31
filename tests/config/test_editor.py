"""Editing settings while cairn runs: parse, validate, persist atomically, apply live."""

from __future__ import annotations

import contextlib
import json
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.config.editor import (
    editable_settings,
    find_editable,
    save_setting,
    settings_file_for,
    write_setting,
)
from cairn.config.loader import SettingsError, load_settings
from cairn.config.settings import Settings

RECAP_KEY = "general.showSessionRecap"
THRESHOLD_KEY = "general.sessionRecapAwayThresholdMinutes"


@pytest.fixture
def home(tmp_path, monkeypatch) -> Path:
    home = tmp_path / "cairn-home"
    home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(home))
    return home


@pytest.fixture
def project(tmp_path) -> Path:
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    return project


def test_editable_settings_include_both_recap_settings():
    keys = [s.key for s in editable_settings()]

    assert RECAP_KEY in keys
    assert THRESHOLD_KEY in keys


def test_kinds_and_choices_follow_the_schema():
    assert find_editable(RECAP_KEY).kind == "bool"
    assert find_editable(THRESHOLD_KEY).kind == "number"
    mode = find_editable("tools.approvalMode")
    assert mode.kind == "choice"
    assert mode.choices == ("plan", "default", "auto-edit", "yolo")


def test_unknown_key_is_refused_with_the_editable_list():
    with pytest.raises(SettingsError, match=r"model\.name.*editable: general\.showSessionRecap"):
        find_editable("model.name")


@pytest.mark.parametrize(("raw", "value"), [("true", True), ("On", True), ("no", False)])
def test_booleans_parse_from_common_words(raw, value):
    assert find_editable(RECAP_KEY).parse(raw) is value


def test_bad_boolean_names_the_key():
    with pytest.raises(SettingsError, match="showSessionRecap` must be true or false"):
        find_editable(RECAP_KEY).parse("maybe")


def test_numbers_parse_and_bad_numbers_are_refused():
    setting = find_editable(THRESHOLD_KEY)

    assert setting.parse(" 7.5 ") == 7.5
    with pytest.raises(SettingsError, match="must be a number"):
        setting.parse("soon")


def test_choice_outside_the_options_is_refused():
    with pytest.raises(SettingsError, match="one of plan, default, auto-edit, yolo"):
        find_editable("tools.approvalMode").parse("always")


@given(st.text())
def test_parsing_any_text_raises_only_settings_error(raw):
    for setting in editable_settings():
        with contextlib.suppress(SettingsError):
            setting.parse(raw)


def test_save_writes_the_user_file_and_updates_the_running_settings(home, project):
    settings = Settings()

    path = save_setting(settings, RECAP_KEY, True, cwd=project)

    assert path == home / "settings.json"
    assert json.loads(path.read_text()) == {"general": {"showSessionRecap": True}}
    assert settings.general.show_session_recap is True
    assert load_settings(project).settings.general.show_session_recap is True


def test_save_keeps_the_other_keys_of_the_file(home, project):
    (home / "settings.json").write_text(
        json.dumps({"model": {"name": "m"}, "general": {"sessionRecapAwayThresholdMinutes": 9}})
    )

    save_setting(Settings(), RECAP_KEY, True, cwd=project)

    assert json.loads((home / "settings.json").read_text()) == {
        "model": {"name": "m"},
        "general": {"sessionRecapAwayThresholdMinutes": 9, "showSessionRecap": True},
    }


def test_save_goes_to_the_project_file_when_it_sets_the_key(home, project):
    project_file = project / ".cairn" / "settings.json"
    project_file.parent.mkdir()
    project_file.write_text(json.dumps({"general": {"sessionRecapAwayThresholdMinutes": 20}}))

    path = save_setting(Settings(), THRESHOLD_KEY, 2.0, cwd=project)

    assert path == project_file
    assert load_settings(project).settings.general.session_recap_away_threshold_minutes == 2.0
    assert not (home / "settings.json").exists()


def test_project_file_that_does_not_set_the_key_is_not_touched(home, project):
    project_file = project / ".cairn" / "settings.json"
    project_file.parent.mkdir()
    project_file.write_text("{}")

    assert settings_file_for(RECAP_KEY, project) == home / "settings.json"


def test_invalid_value_changes_neither_file_nor_settings(home, project):
    settings = Settings()

    with pytest.raises(SettingsError, match="showSessionRecap"):
        save_setting(settings, RECAP_KEY, "yes please", cwd=project)

    assert settings.general.show_session_recap is False
    assert not (home / "settings.json").exists()


def test_broken_settings_file_is_left_alone_and_reported(home, project):
    (home / "settings.json").write_text('{"general": ')
    settings = Settings()

    with pytest.raises(SettingsError, match="line 1 column 13: invalid JSON"):
        save_setting(settings, RECAP_KEY, True, cwd=project)

    assert (home / "settings.json").read_text() == '{"general": '
    assert settings.general.show_session_recap is False


def test_a_non_object_on_the_path_is_reported(tmp_path):
    path = tmp_path / "settings.json"
    path.write_text(json.dumps({"general": 3}))

    with pytest.raises(SettingsError, match="`general` must be an object"):
        write_setting(path, RECAP_KEY, True)

    assert json.loads(path.read_text()) == {"general": 3}


def test_write_leaves_no_temporary_files(tmp_path):
    path = tmp_path / "settings.json"

    write_setting(path, THRESHOLD_KEY, 3.0)

    assert [p.name for p in tmp_path.iterdir()] == ["settings.json"]
