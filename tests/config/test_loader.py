import json
from pathlib import Path

import pytest

from cairn.config.loader import (
    NoAuthError,
    SettingsError,
    load_settings,
    project_settings_path,
    resolve_endpoint,
)
from cairn.config.settings import Settings


@pytest.fixture
def home(tmp_path, monkeypatch):
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("CAIRN_HOME", str(home))
    return home


@pytest.fixture
def project(tmp_path):
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    return project


def write(path: Path, data) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(data if isinstance(data, str) else json.dumps(data, indent=2))
    return path


def test_project_settings_override_user_settings(home, project):
    write(home / "settings.json", {"model": {"name": "user-model"}, "fastModel": "fast"})
    write(project / ".cairn" / "settings.json", {"model": {"name": "project-model"}})
    settings = load_settings(project).settings
    assert settings.model.name == "project-model"
    assert settings.fast_model == "fast"


def test_permission_lists_are_unioned_across_files(home, project):
    write(home / "settings.json", {"permissions": {"allow": ["Bash(git *)"]}})
    write(project / ".cairn" / "settings.json", {"permissions": {"allow": ["Read", "Bash(git *)"]}})
    assert load_settings(project).settings.permissions.allow == ["Bash(git *)", "Read"]


def test_an_unknown_key_is_a_warning_naming_the_file_and_key(home, project):
    path = write(home / "settings.json", {"memory": {"enableMagic": True}})
    loaded = load_settings(project)
    assert loaded.warnings == [f"{path}: unknown setting `memory.enableMagic` is ignored"]


def test_a_wrong_type_names_the_file_line_key_and_expected_type(home, project):
    path = write(
        home / "settings.json",
        '{\n  "memory": {\n    "enableManagedAutoMemory": "yes"\n  }\n}\n',
    )
    with pytest.raises(SettingsError) as err:
        load_settings(project)
    message = str(err.value)
    assert f"{path} line 3" in message
    assert "`memory.enableManagedAutoMemory` must be true or false" in message


def test_invalid_json_reports_the_line(home, project):
    write(home / "settings.json", '{\n  "model": {\n    "name": "x",\n  }\n}')
    with pytest.raises(SettingsError, match=r"line 4"):
        load_settings(project)


def test_environment_references_in_strings_are_expanded(home, project, monkeypatch):
    monkeypatch.setenv("MY_ENDPOINT", "http://127.0.0.1:9/v1")
    write(home / "settings.json", {"security": {"auth": {"baseUrl": "${MY_ENDPOINT}"}}})
    assert load_settings(project).settings.security.auth.base_url == "http://127.0.0.1:9/v1"


def test_project_settings_are_found_from_a_subfolder(project):
    sub = project / "src" / "pkg"
    sub.mkdir(parents=True)
    assert project_settings_path(sub) == project.resolve() / ".cairn" / "settings.json"


def test_endpoint_prefers_flag_then_environment_then_settings():
    settings = Settings.model_validate(
        {
            "model": {"name": "settings-model"},
            "security": {"auth": {"baseUrl": "http://s/v1", "apiKey": "k"}},
        }
    )
    env = {"OPENAI_MODEL": "env-model"}
    assert resolve_endpoint(settings, environ=env).model == "env-model"
    assert resolve_endpoint(settings, model="flag-model", environ=env).model == "flag-model"
    assert resolve_endpoint(settings, environ={}).base_url == "http://s/v1"


def test_missing_endpoint_names_every_missing_variable():
    with pytest.raises(NoAuthError) as err:
        resolve_endpoint(Settings(), environ={})
    message = str(err.value)
    for name in ("OPENAI_BASE_URL", "OPENAI_API_KEY", "OPENAI_MODEL"):
        assert name in message


def test_settings_env_is_the_lowest_priority_fallback():
    settings = Settings.model_validate(
        {
            "env": {
                "OPENAI_BASE_URL": "http://fallback/v1",
                "OPENAI_API_KEY": "a",
                "OPENAI_MODEL": "m",
            }
        }
    )
    assert resolve_endpoint(settings, environ={}).base_url == "http://fallback/v1"
    assert (
        resolve_endpoint(settings, environ={"OPENAI_BASE_URL": "http://real/v1"}).base_url
        == "http://real/v1"
    )
