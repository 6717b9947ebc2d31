"""``cairn mcp list|get|add|remove`` as real processes, against a real MCP server."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import pytest

from cairn.testing.mcp import pid_alive

from ..entry_point import run_main
from ..mcp.helpers import (
    SECRET_NAMES,
    SECRETS_DROPPED,
    TOOLS_SERVER,
    reported_environments,
    tools_server,
    with_secrets,
)

pytestmark = pytest.mark.slow

CAIRN = [sys.executable, "-m", "cairn.cli.main"]


@pytest.fixture
def project(tmp_path: Path) -> Path:
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    return root


def _cairn(
    project: Path, cairn_env: dict[str, str], *args: str
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [*CAIRN, *args], cwd=project, env=cairn_env, capture_output=True, text=True, timeout=90
    )


def test_help_lists_the_mcp_command(project: Path, cairn_env: dict[str, str]) -> None:
    done = _cairn(project, cairn_env, "--help")
    assert done.returncode == 0
    assert re.search(r"^  mcp +List, inspect, add and remove MCP servers\.$", done.stdout, re.M)


def test_add_list_get_and_remove_a_stdio_and_an_http_server(
    project: Path, cairn_env: dict[str, str]
) -> None:
    home = Path(cairn_env["CAIRN_HOME"])
    added = _cairn(
        project,
        cairn_env,
        "mcp",
        "add",
        "tools",
        "-e",
        "MODE=test",
        "--",
        sys.executable,
        "-m",
        "cairn.testing.mcp",
        str(TOOLS_SERVER),
    )
    assert added.returncode == 0, added.stderr
    web = _cairn(
        project,
        cairn_env,
        "mcp",
        "add",
        "--transport",
        "http",
        "--scope",
        "project",
        "web",
        "http://127.0.0.1:9/mcp",
        "-H",
        "Authorization: Bearer t",
    )
    assert web.returncode == 0, web.stderr
    user = json.loads((home / "settings.json").read_text())
    assert user["mcpServers"]["tools"] == {
        "command": sys.executable,
        "args": ["-m", "cairn.testing.mcp", str(TOOLS_SERVER)],
        "env": {"MODE": "test"},
    }
    shared = json.loads((project / ".cairn" / "settings.json").read_text())
    assert shared["mcpServers"]["web"] == {
        "httpUrl": "http://127.0.0.1:9/mcp",
        "headers": {"Authorization": "Bearer t"},
    }

    listed = _cairn(project, cairn_env, "mcp", "list")
    assert listed.returncode == 0, listed.stderr
    assert "- tools [stdio, user] connected: 7 tools, 1 prompt, 1 resource" in listed.stdout
    assert "- web [http, project] failed: 0 tools — http://127.0.0.1:9/mcp" in listed.stdout
    assert "cannot reach http://127.0.0.1:9/mcp" in listed.stdout

    got = _cairn(project, cairn_env, "mcp", "get", "tools")
    assert got.returncode == 0, got.stderr
    assert "  mcp__tools__echo\n      Echo the text back." in got.stdout
    assert "prompt: /mcp__tools__review" in got.stdout

    removed = _cairn(project, cairn_env, "mcp", "remove", "web")
    assert removed.returncode == 0, removed.stderr
    assert json.loads((project / ".cairn" / "settings.json").read_text())["mcpServers"] == {}


def test_bad_input_is_a_specific_error_with_exit_code_42(
    project: Path, cairn_env: dict[str, str]
) -> None:
    """The first case through a real ``cairn`` process, the others through cairn's entry point
    in this process (tests/entry_point.py): what they check is the message and the exit code
    ``cairn mcp`` chooses, not the process (each process is ~0.5 s of CPU)."""
    cases = [
        (("mcp", "add", "x"), "A stdio server needs a command"),
        (("mcp", "add", "-t", "http", "x", "ftp://nope"), "needs an http:// or https:// URL"),
        (("mcp", "add", "-t", "ws", "x", "http://127.0.0.1:1"), "Unknown transport 'ws'"),
        (
            ("mcp", "add", "x", "-e", "NOEQUALS", "--", "prog"),
            "--env 'NOEQUALS': expected KEY=VALUE",
        ),
        (("mcp", "get", "missing"), "No MCP server named 'missing'"),
        (("mcp", "remove", "missing"), "No MCP server named 'missing'"),
    ]
    (args, message), *in_process = cases
    done = _cairn(project, cairn_env, *args)
    assert (done.returncode, message in done.stderr) == (42, True), (args, done.stderr)
    for args, message in in_process:
        done = run_main(args, cwd=project, env=cairn_env)
        assert (done.returncode, message in done.stderr) == (42, True), (args, done.stderr)


def test_a_broken_settings_file_is_reported_and_left_alone(
    project: Path, cairn_env: dict[str, str]
) -> None:
    """``list`` as a real process, ``add`` through the entry point in process."""
    settings = project / ".cairn" / "settings.json"
    settings.parent.mkdir()
    settings.write_text('{"mcpServers": {')
    done = _cairn(project, cairn_env, "mcp", "list")
    assert done.returncode == 52, done.stderr
    assert "invalid JSON" in done.stderr
    added = run_main(("mcp", "add", "-s", "project", "x", "--", "prog"), cwd=project, env=cairn_env)
    assert added.returncode == 52, added.stderr
    assert "invalid JSON" in added.stderr
    assert settings.read_text() == '{"mcpServers": {'


def test_list_starts_stdio_servers_without_cairns_secrets(
    project: Path, cairn_env: dict[str, str], tmp_path: Path
) -> None:
    """Bug: `cairn mcp list` started a server with cairn's secrets (only the session dropped
    them). The key in use, here the settings' one, is found by value as well."""
    server = tools_server(tmp_path, MCP_TEST_REPORT_ENV=",".join(SECRET_NAMES))
    home = Path(cairn_env["CAIRN_HOME"])
    settings = {"security": {"auth": {"apiKey": "settings-key-456"}}}
    settings["mcpServers"] = {"tools": server.stdio_config()}  # type: ignore[dict-item]
    (home / "settings.json").write_text(json.dumps(settings))
    without_key = {k: v for k, v in cairn_env.items() if k != "OPENAI_API_KEY"}

    listed = _cairn(project, with_secrets(without_key, "settings-key-456"), "mcp", "list")

    assert listed.returncode == 0, listed.stderr
    assert reported_environments(tmp_path) == [SECRETS_DROPPED]


def test_list_shows_an_untrusted_folders_servers_as_disabled_with_why_until_trusted(
    project: Path, cairn_env: dict[str, str], tmp_path: Path
) -> None:
    """The loader drops an untrusted project file's mcpServers; `cairn mcp list` still names
    them (and .mcp.json's), as disabled with the reason and the way out, and starts none."""
    server = tools_server(tmp_path)
    (project / ".cairn").mkdir()
    (project / ".cairn" / "settings.json").write_text(
        json.dumps({"mcpServers": {"local": server.stdio_config()}})
    )
    (project / ".mcp.json").write_text(
        json.dumps({"mcpServers": {"shared": {"type": "stdio", **server.stdio_config()}}})
    )

    untrusted = _cairn(project, cairn_env, "mcp", "list")

    assert untrusted.returncode == 0, untrusted.stderr
    why = (
        "    this folder is not trusted, so its project servers do not start; "
        "review them, then run `cairn trust`"
    )
    for line in ("- local [stdio, project] disabled: 0 tools", why):
        assert line in untrusted.stdout
    assert "- shared [stdio, mcp.json] disabled: 0 tools" in untrusted.stdout
    assert untrusted.stdout.count(why) == 2
    assert server.pids() == []  # nothing was started

    assert _cairn(project, cairn_env, "trust").returncode == 0
    trusted = _cairn(project, cairn_env, "mcp", "list")

    assert trusted.returncode == 0, trusted.stderr
    assert "- local [stdio, project] connected: 7 tools" in trusted.stdout
    assert "- shared [stdio, mcp.json] connected: 7 tools" in trusted.stdout
    assert len(server.pids()) == 2 and not any(pid_alive(pid) for pid in server.pids())


def test_list_starts_every_server_at_once(
    project: Path, cairn_env: dict[str, str], tmp_path: Path
) -> None:
    """Issue #30: `cairn mcp list` must not start the servers one after another (three npx
    servers took 11 s). Each server here connects only once all three processes have started
    (each records its PID when it starts), so a list that waited for one before starting the
    next would never see the others connected."""
    go = tmp_path / "go"
    pids = tmp_path / "pids"
    starter = (
        "import pathlib, time\n"
        f"pids, go = pathlib.Path({str(pids)!r}), pathlib.Path({str(go)!r})\n"
        "while not pids.exists() or len(pids.read_text().split()) < 3:\n"
        "    time.sleep(0.02)\n"
        "go.touch()\n"
    )
    server = tools_server(tmp_path, MCP_TEST_WAIT_FOR=str(go))
    home = Path(cairn_env["CAIRN_HOME"])
    servers = {f"s{n}": server.stdio_config() for n in range(3)}
    (home / "settings.json").write_text(json.dumps({"mcpServers": servers}))
    opener = subprocess.Popen([sys.executable, "-c", starter])
    try:
        listed = _cairn(project, cairn_env, "mcp", "list")
    finally:
        opener.kill()
        opener.wait()

    assert listed.returncode == 0, listed.stderr
    assert listed.stdout.count("connected: 7 tools") == 3, listed.stdout
