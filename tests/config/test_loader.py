import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from cairn.config.loader import (
    MAX_SETTINGS_BYTES,
    NoAuthError,
    SettingsError,
    load_settings,
    project_settings_path,
    resolve_endpoint,
)
from cairn.config.settings import Settings
from cairn.config.trust import trust_folder


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
    trust_folder(project)  # a project's allow rules widen permissions: used once trusted
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


# Regression (#18): settings files with 10,000-deep nesting, invalid UTF-8, a 5,000-digit number
# or NaN crashed with exit 1; a settings.json that is a directory or a FIFO was silently ignored.

MALFORMED = {
    "deep nesting": ('{"a": ' + "[" * 10_000 + "]" * 10_000 + "}", "nested more than 64 levels"),
    "invalid UTF-8": (b'{"model": {"name": "caf\xe9"}}', "line 1: not UTF-8 text (byte 0xe9)"),
    "a 5,000-digit number": ('{"x": ' + "9" * 5000 + "}", "5000 digits is too long"),
    "NaN": ('{\n"model": {"generationConfig": {"timeout": NaN}}}', "line 2: NaN is not a JSON"),
    "Infinity": ('{"x": -Infinity}', "-Infinity is not a JSON number"),
    "an overflowing float": ('{"x": 1e999}', "1e999 is too large for a number"),
    "a long float": ('{"x": 0.' + "1" * 500 + "}", "too long for a setting"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_settings_are_a_settings_error_naming_the_file(home, project, case):
    content, message = MALFORMED[case]
    path = project / ".cairn" / "settings.json"
    path.parent.mkdir(parents=True)
    path.write_bytes(content if isinstance(content, bytes) else content.encode())

    with pytest.raises(SettingsError) as caught:
        load_settings(project)

    assert str(path) in str(caught.value)
    assert message in str(caught.value)


def test_a_settings_file_that_is_a_folder_is_reported(home, project):
    (project / ".cairn" / "settings.json").mkdir(parents=True)

    with pytest.raises(SettingsError, match="settings must be a regular file, not a folder"):
        load_settings(project)


def test_a_settings_file_that_is_a_fifo_is_reported_without_blocking(home, project):
    (project / ".cairn").mkdir()
    os.mkfifo(project / ".cairn" / "settings.json")

    with pytest.raises(SettingsError, match="not a FIFO"):
        load_settings(project)


def test_a_dangling_settings_symlink_is_reported(home, project):
    (project / ".cairn").mkdir()
    (project / ".cairn" / "settings.json").symlink_to(project / "gone.json")

    with pytest.raises(SettingsError, match="cannot read settings"):
        load_settings(project)


def test_a_byte_order_mark_is_accepted(home, project):
    write(project / ".cairn" / "settings.json", "\ufeff" + json.dumps({"fastModel": "f"}))

    assert load_settings(project).settings.fast_model == "f"


def test_a_huge_settings_file_is_refused_before_it_is_read(home, project):
    path = project / ".cairn" / "settings.json"
    path.parent.mkdir()
    with path.open("wb") as handle:
        handle.truncate(MAX_SETTINGS_BYTES + 1)

    with pytest.raises(SettingsError, match="larger than 4 MB"):
        load_settings(project)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(), inner, max_size=4),
    max_leaves=20,
)
_setting_keys = st.sampled_from(
    ["model", "tools", "permissions", "hooks", "memory", "env", "general", "mcpServers", "x"]
)


@settings(max_examples=200, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(
    content=st.one_of(
        st.binary(max_size=300),
        st.text(max_size=300).map(str.encode),
        st.dictionaries(_setting_keys, _json, max_size=5).map(
            lambda d: json.dumps(d, allow_nan=True).encode()
        ),
        st.integers(1, 20_000).map(lambda n: ("[" * n + "]" * n).encode()),
        st.integers(1, 20_000).map(lambda n: ('{"a":' * n + "1" + "}" * n).encode()),
    )
)
def test_any_settings_file_loads_or_is_a_settings_error(tmp_path_factory, content):
    """Property (#18): whatever bytes a settings file holds, loading gives settings or a
    SettingsError (exit 52 with a message), never another exception."""
    root = tmp_path_factory.mktemp("p")
    (root / ".git").mkdir()
    (root / ".cairn").mkdir()
    (root / ".cairn" / "settings.json").write_bytes(content)

    try:
        load_settings(root, user_path=root / "no-user-settings.json")
    except SettingsError as exc:
        assert str(exc)


def test_errors_in_several_sections_and_nested_entries_are_all_reported(home, project):
    """Each top-level key is validated on its own: every error is still reported, in the
    schema's order, each with its line and full dotted key (nested entries included)."""
    path = write(
        project / ".cairn" / "settings.json",
        """{
  "memory": {"enableManagedAutoMemory": "no"},
  "fastModel": 3,
  "tools": {
    "approvalMode": "sometimes",
    "sandbox": {"network": "lan"}
  },
  "hooks": {
    "PreToolUse": [{"hooks": [{"command": "check", "timeout": "soon"}]}]
  },
  "mcpServers": {
    "docs": {"type": "websocket", "command": "docs-server"}
  }
}
""",
    )

    with pytest.raises(SettingsError) as err:
        load_settings(project)

    assert str(err.value).splitlines() == [
        f"{path} line 3: `fastModel` must be a string (got 3)",
        f'{path} line 2: `memory.enableManagedAutoMemory` must be true or false (got "no")',
        f"{path} line 5: `tools.approvalMode` must be 'plan', 'default', 'auto-edit' or 'yolo' "
        '(got "sometimes")',
        f"{path} line 6: `tools.sandbox.network` must be 'none', 'loopback' or 'full' "
        '(got "lan")',
        f'{path} line 9: `hooks.PreToolUse[0].hooks[0].timeout` must be a number (got "soon")',
        f"{path} line 12: `mcpServers.docs.type` must be 'stdio', 'sse' or 'http' "
        '(got "websocket")',
    ]


def test_a_section_that_is_not_an_object_is_named_with_its_line(home, project):
    path = write(home / "settings.json", '{\n  "model": {"name": "m"},\n  "memory": 5\n}\n')

    with pytest.raises(SettingsError) as err:
        load_settings(project)

    assert str(err.value) == f"{path} line 3: `memory` must be an object (got 5)"


def test_a_key_is_read_only_in_camel_case_and_a_python_name_says_what_to_write(home, project):
    """Regression (#24, critical): settings took a key by its Python name (``approval_mode``)
    as well as by its camelCase one, and the trust check read only the camelCase one. A file's
    key is now read only as Qwen Code reads it, in camelCase: the Python name is ignored with a
    warning naming the key to write; an unknown key may be any string (even one of Python's own
    parameter names)."""
    path = write(
        home / "settings.json",
        {
            "fastModel": "camel",
            "fast_model": "snake",
            "disable_all_hooks": True,
            "tools": {"approval_mode": "plan"},
            "_fields_set": 1,
        },
    )

    loaded = load_settings(project)

    assert loaded.settings.fast_model == "camel"
    assert loaded.settings.disable_all_hooks is False
    assert loaded.settings.tools.approval_mode == "default"
    hint = "is ignored: settings keys are written in camelCase; write"
    assert loaded.warnings == [
        f"{path}: `fast_model` {hint} `fastModel`",
        f"{path}: `disable_all_hooks` {hint} `disableAllHooks`",
        f"{path}: unknown setting `_fields_set` is ignored",
        f"{path}: `tools.approval_mode` {hint} `tools.approvalMode`",
    ]


# Regression: a key whose value may take several shapes (`model.available`, `context.fileName`)
# got one line per shape, named with pydantic's internal names of the shapes
# (`model.available.list[union[str,function-after[_id_not_blank(), ModelChoice]]].0.authType`).
ONE_LINE_PER_PROBLEM = {
    "a wrong field of a model entry": (
        {"model": {"available": ["m1", {"id": "m2", "authType": "x"}]}},
        "line 7: `model.available[1].authType` must be 'openai' or 'anthropic' (got \"x\")",
    ),
    "a model entry with a blank id": (
        {"model": {"available": [{"id": " "}]}},
        'line 3: `model.available[0]` must be an entry with a non-blank `id` (got {"id": " "})',
    ),
    "a model entry that is neither a name nor an object": (
        {"model": {"available": [5]}},
        "line 3: `model.available[0]` must be a string or an object (got 5)",
    ),
    "available that is neither a list nor auto": (
        {"model": {"available": "every"}},
        "line 3: `model.available` must be a list or 'auto' (got \"every\")",
    ),
    "a file name that is neither a string nor a list": (
        {"context": {"fileName": 5}},
        "line 3: `context.fileName` must be a string or a list (got 5)",
    ),
    "a wrong item of a file name list": (
        {"context": {"fileName": ["AGENTS.md", 3]}},
        "line 3: `context.fileName[1]` must be a string (got 3)",
    ),
    "a container name as the sandbox": (
        {"tools": {"sandbox": "docker"}},
        "line 3: `tools.sandbox` must be true, false or an object: cairn's sandbox is "
        'bubblewrap, not a container (got "docker")',
    ),
    "a server whose name looks like a type": (
        {"mcpServers": {"str": {"command": "s", "args": "-y"}}},
        'line 5: `mcpServers.str.args` must be a list (got "-y")',
    ),
}


@pytest.mark.parametrize("case", list(ONE_LINE_PER_PROBLEM))
def test_a_key_of_several_shapes_gets_one_line_naming_it_as_written(home, project, case):
    settings, line = ONE_LINE_PER_PROBLEM[case]
    path = write(project / ".cairn" / "settings.json", settings)

    with pytest.raises(SettingsError) as err:
        load_settings(project)

    assert str(err.value) == f"{path} {line}"
