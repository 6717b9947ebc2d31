"""Server configurations: the settings shapes, Claude Code's .mcp.json, client lists, gating."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from cairn.config.loader import SettingsError, load_settings
from cairn.config.trust import trust_folder
from cairn.mcp.config import McpConfigError, collect_servers, read_mcp_json, servers_from_client


@pytest.fixture(autouse=True)
def _cairn_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Trust decisions are recorded under the cairn home: never the real one."""
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "cairn-home"))


def _project(
    tmp_path: Path,
    settings: dict | None = None,
    mcp_json: dict | str | None = None,
    *,
    trusted: bool = True,
) -> Path:
    """A project with these files; trusted (cairn trust) unless ``trusted=False``."""
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    if settings is not None:
        (root / ".cairn").mkdir()
        (root / ".cairn" / "settings.json").write_text(json.dumps(settings, indent=2))
    if mcp_json is not None:
        text = mcp_json if isinstance(mcp_json, str) else json.dumps(mcp_json, indent=2)
        (root / ".mcp.json").write_text(text)
    if trusted:
        trust_folder(root)
    return root


def _servers(root: Path, user: Path, warnings: list[str] | None = None):  # type: ignore[no-untyped-def]
    settings = load_settings(root, user_path=user).settings
    return {s.name: s for s in collect_servers(root, settings, user_path=user, warnings=warnings)}


def test_the_qwen_shapes_give_stdio_sse_and_http_servers(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "mcpServers": {
                "files": {
                    "command": "srv",
                    "args": ["-v"],
                    "env": {"K": "v"},
                    "cwd": "sub",
                    "timeout": 30000,
                    "trust": True,
                    "includeTools": ["a"],
                    "excludeTools": ["b"],
                    "description": "local files",
                },
                "events": {"url": "http://127.0.0.1:1/sse"},
                "api": {"httpUrl": "http://127.0.0.1:1/mcp", "headers": {"Authorization": "x"}},
            }
        },
    )
    servers = _servers(root, tmp_path / "none.json")
    files, events, api = servers["files"], servers["events"], servers["api"]
    assert (files.transport, files.command, files.args, dict(files.env)) == (
        "stdio",
        "srv",
        ("-v",),
        {"K": "v"},
    )
    assert (files.cwd, files.timeout_ms, files.trust, files.description) == (
        "sub",
        30000,
        True,
        "local files",
    )
    assert files.offers("a") and not files.offers("b") and not files.offers("c")
    assert (events.transport, events.url) == ("sse", "http://127.0.0.1:1/sse")
    assert (api.transport, api.url, dict(api.headers)) == (
        "http",
        "http://127.0.0.1:1/mcp",
        {"Authorization": "x"},
    )
    assert files.scope == "project"


def test_environment_references_expand_in_settings(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("MCP_TOKEN", "s3cret")
    root = _project(
        tmp_path,
        {
            "mcpServers": {
                "gh": {"command": "gh-mcp", "env": {"TOKEN": "${MCP_TOKEN}", "ALSO": "$MCP_TOKEN"}}
            }
        },
    )
    assert dict(_servers(root, tmp_path / "none.json")["gh"].env) == {
        "TOKEN": "s3cret",
        "ALSO": "s3cret",
    }


def test_claude_code_mcp_json_is_read_with_its_types_and_defaults(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("API_KEY", "k1")
    monkeypatch.delenv("UNSET_VAR", raising=False)
    root = _project(
        tmp_path,
        mcp_json={
            "mcpServers": {
                "local": {
                    "type": "stdio",
                    "command": "npx",
                    "args": ["-y", "pkg"],
                    "env": {"KEY": "${API_KEY}"},
                },
                "remote": {
                    "type": "http",
                    "url": "${BASE:-http://127.0.0.1:2}/mcp",
                    "headers": {"X-Key": "${API_KEY}"},
                },
                "old": {
                    "type": "sse",
                    "url": "http://127.0.0.1:3/sse",
                    "env": {"A": "${UNSET_VAR}"},
                },
            }
        },
    )
    servers = _servers(root, tmp_path / "none.json")
    assert servers["local"].transport == "stdio" and dict(servers["local"].env) == {"KEY": "k1"}
    assert (
        servers["remote"].transport == "http" and servers["remote"].url == "http://127.0.0.1:2/mcp"
    )
    assert dict(servers["remote"].headers) == {"X-Key": "k1"}
    assert servers["old"].transport == "sse"
    assert {s.scope for s in servers.values()} == {"mcp.json"}


def test_project_settings_beat_mcp_json_which_beats_user_settings(tmp_path: Path) -> None:
    user = tmp_path / "user.json"
    user.write_text(
        json.dumps({"mcpServers": {"a": {"command": "user-a"}, "b": {"command": "user-b"}}})
    )
    root = _project(
        tmp_path,
        {"mcpServers": {"a": {"httpUrl": "http://127.0.0.1:1/mcp"}}},
        {"mcpServers": {"a": {"command": "json-a"}, "b": {"command": "json-b"}}},
    )
    servers = _servers(root, user)
    assert (servers["a"].transport, servers["a"].command) == ("http", None)  # replaced whole
    assert servers["b"].command == "json-b"


def test_a_wrong_type_names_the_file_the_line_and_the_key(tmp_path: Path) -> None:
    root = _project(tmp_path, {"mcpServers": {"gh": {"command": "x", "args": "not-a-list"}}})
    with pytest.raises(SettingsError) as error:
        load_settings(root, user_path=tmp_path / "none.json")
    message = str(error.value)
    assert "settings.json line 5" in message and "`mcpServers.gh.args` must be a list" in message


def test_a_server_without_a_transport_is_an_error_saying_what_is_expected(tmp_path: Path) -> None:
    root = _project(tmp_path, {"mcpServers": {"gh": {"args": []}}})
    with pytest.raises(
        SettingsError, match=r"`mcpServers\.gh` must be a server with `command` \(stdio\)"
    ):
        load_settings(root, user_path=tmp_path / "none.json")


def test_a_broken_mcp_json_is_a_warning_and_its_servers_do_not_start(tmp_path: Path) -> None:
    root = _project(tmp_path, mcp_json='{"mcpServers": {"x": {"type": "stdio"}}}')
    warnings: list[str] = []
    assert _servers(root, tmp_path / "none.json", warnings) == {}
    assert len(warnings) == 1
    assert (
        ".mcp.json" in warnings[0]
        and "`mcpServers.x` must be a stdio server with a `command`" in warnings[0]
    )


def test_invalid_json_in_mcp_json_names_the_line(tmp_path: Path) -> None:
    root = _project(tmp_path, mcp_json='{"mcpServers": {\n  "x": oops}}')
    with pytest.raises(McpConfigError, match=r"\.mcp\.json line 2 column \d+: invalid JSON"):
        read_mcp_json(root / ".mcp.json")


def test_disabled_excluded_and_not_allowed_servers_carry_the_reason(tmp_path: Path) -> None:
    root = _project(
        tmp_path,
        {
            "mcpServers": {
                "a": {"command": "a", "disabled": True},
                "b": {"command": "b"},
                "c": {"command": "c"},
                "d": {"command": "d"},
            },
            "mcp": {"excluded": ["b"], "allowed": ["a", "b", "d"]},
        },
    )
    servers = _servers(root, tmp_path / "none.json")
    assert servers["a"].disabled_reason == "disabled in settings"
    assert servers["b"].disabled_reason == "listed in mcp.excluded"
    assert servers["c"].disabled_reason == "not listed in mcp.allowed"
    assert not servers["d"].disabled


def test_acp_server_lists_become_client_servers() -> None:
    servers = servers_from_client(
        [
            {"name": "fs", "command": "srv", "args": ["a"], "env": [{"name": "K", "value": "v"}]},
            {
                "type": "http",
                "name": "web",
                "url": "http://127.0.0.1:1/mcp",
                "headers": [{"name": "Authorization", "value": "Bearer t"}],
            },
            {"type": "sse", "name": "ev", "url": "http://127.0.0.1:1/sse", "headers": []},
        ],
        source="ACP session/new",
    )
    fs, web, ev = servers
    assert (fs.transport, fs.command, fs.args, dict(fs.env), fs.scope) == (
        "stdio",
        "srv",
        ("a",),
        {"K": "v"},
        "client",
    )
    assert (web.transport, dict(web.headers)) == ("http", {"Authorization": "Bearer t"})
    assert ev.transport == "sse"


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ("nope", r"mcpServers\[0\] must be an object"),
        ({"command": "x"}, r"`name` must be a non-empty string"),
        ({"name": "a", "type": "ws", "url": "x"}, r'`type` must be "stdio", "http" or "sse"'),
        ({"name": "a", "command": ""}, r"`command` must be a non-empty string"),
        ({"name": "a", "command": "x", "args": [1]}, r"`args` must be a list of strings"),
        (
            {"name": "a", "type": "http", "url": "ftp://x"},
            r"`url` must be an http:// or https:// URL",
        ),
        ({"name": "a", "command": "x", "env": [{"value": "v"}]}, r"name/value|pairs"),
    ],
)
def test_a_bad_client_server_entry_is_a_specific_error(entry: object, message: str) -> None:
    with pytest.raises(McpConfigError, match=message):
        servers_from_client([entry], source="POST /session")


USER_SERVER = {"mcpServers": {"mine": {"command": "mine-mcp"}}}


@pytest.mark.parametrize(
    ("user", "project", "mcp_json", "trusted", "expected"),
    [
        (None, None, None, True, False),
        (None, {"model": {"name": "m"}}, None, True, False),
        (None, {"mcpServers": {}}, None, True, False),
        (USER_SERVER, None, None, True, True),
        (None, {"mcpServers": {"db": {"command": "db-mcp"}}}, None, True, True),
        (None, {"mcpServers": {"db": {"command": "db-mcp"}}}, None, False, True),
        (None, None, {"mcpServers": {"gh": {"command": "gh-mcp"}}}, True, True),
        (None, None, {"mcpServers": {"gh": {"command": "gh-mcp"}}}, False, True),
        (None, None, "{broken", True, True),
    ],
)
def test_a_workspace_said_to_have_no_servers_has_none_to_list_or_warn_about(
    tmp_path: Path,
    user: dict | None,
    project: dict | None,
    mcp_json: dict | str | None,
    trusted: bool,
    expected: bool,
) -> None:
    """The start-up check that keeps cairn.mcp.config unimported (cairn.mcp.sources): where it
    says no, collecting the servers finds none (listed disabled ones included) and no warning;
    where there is something to list or warn about it says yes."""
    from cairn.mcp.sources import may_configure_servers

    root = _project(tmp_path, project, mcp_json, trusted=trusted)
    user_path = tmp_path / "user.json"
    if user is not None:
        user_path.write_text(json.dumps(user))
    settings = load_settings(root, user_path=user_path).settings
    warnings: list[str] = []
    found = collect_servers(root, settings, user_path=user_path, warnings=warnings)

    assert may_configure_servers(root, settings) is expected
    assert bool(found or warnings) is expected


def test_a_snake_case_project_server_never_starts_and_is_not_listed(tmp_path: Path) -> None:
    """Regression (#24, critical): `mcp_servers` in a project file started its program in a
    folder never trusted: the scope decision read `mcpServers` only, the settings both."""
    user = tmp_path / "user.json"
    user.write_text("{}")
    root = _project(
        tmp_path, {"mcp_servers": {"x": {"command": "sh", "args": ["-c", "touch pwned"]}}}
    )

    assert _servers(root, user) == {}


def test_the_users_server_stays_on_beside_an_untrusted_projects_server_of_its_name(
    tmp_path: Path,
) -> None:
    """The loader left the project's `db` out: the `db` in the settings is the user's own, and
    an untrusted folder does not turn it off."""
    user = tmp_path / "user.json"
    user.write_text(json.dumps({"mcpServers": {"db": {"command": "my-db-mcp"}}}))
    root = _project(tmp_path, {"mcpServers": {"db": {"command": "evil-mcp"}}}, trusted=False)

    [server] = _servers(root, user).values()

    assert (server.command, server.scope, server.disabled) == ("my-db-mcp", "user", False)
