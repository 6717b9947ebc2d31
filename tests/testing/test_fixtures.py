"""The pytest fixtures: a running server and an isolated environment pointing at it."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from cairn.testing import ScriptedServer, reply
from cairn.testing.fixtures import isolated_env

# A child process that asks the model at OPENAI_BASE_URL once, the way a CLI run would.
CHILD = """
import json, os, urllib.request
request = urllib.request.Request(
    os.environ["OPENAI_BASE_URL"] + "/chat/completions",
    data=json.dumps({"model": os.environ["OPENAI_MODEL"], "stream": False,
                     "messages": [{"role": "user", "content": "from the child"}]}).encode(),
    headers={"Authorization": "Bearer " + os.environ["OPENAI_API_KEY"],
             "Content-Type": "application/json", "X-Cairn-Purpose": "main"},
)
answer = json.load(urllib.request.urlopen(request, timeout=10))
print(answer["choices"][0]["message"]["content"])
"""


def test_the_server_fixture_is_running(scripted_server: ScriptedServer) -> None:
    assert scripted_server.base_url.startswith("http://127.0.0.1:")
    assert scripted_server.requests == []


def test_cairn_env_points_at_the_server_with_a_test_key(
    scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    assert cairn_env["OPENAI_BASE_URL"] == scripted_server.base_url
    assert cairn_env["OPENAI_API_KEY"] == "test-key"
    assert cairn_env["OPENAI_MODEL"] == "scripted-model"


def test_cairn_env_gives_fresh_home_folders(cairn_env: dict[str, str], tmp_path: Path) -> None:
    for name in ("HOME", "CAIRN_HOME"):
        folder = Path(cairn_env[name])
        assert folder.is_dir()
        assert folder.is_relative_to(tmp_path)
        assert list(folder.iterdir()) == []


def test_a_subprocess_run_with_cairn_env_reaches_the_server(
    scripted_server: ScriptedServer, cairn_env: dict[str, str]
) -> None:
    scripted_server.enqueue(reply("hello, child"))

    child = subprocess.run(
        [sys.executable, "-c", CHILD], env=cairn_env, capture_output=True, text=True, timeout=30
    )

    assert child.stdout.strip() == "hello, child", child.stderr
    [request] = scripted_server.requests
    assert request.last_user_text() == "from the child"
    assert request.headers["authorization"] == "Bearer test-key"


def test_isolated_env_removes_proxies_and_inherited_settings(tmp_path: Path) -> None:
    inherited = {
        "PATH": "/usr/bin",
        "HTTPS_PROXY": "http://proxy:3128",
        "http_proxy": "http://proxy:3128",
        "ALL_PROXY": "socks5://proxy",
        "no_proxy": "example.com",
        "OPENAI_ORG_ID": "org",
        "CAIRN_MEMORY_LOCAL": "1",
        "CAIRN_DEBUG_LOG_FILE": "0",
    }

    env = isolated_env("http://127.0.0.1:1/v1", tmp_path, inherited)

    assert env["PATH"] == "/usr/bin"
    assert env["CAIRN_DEBUG_LOG_FILE"] == "0"
    for dropped in (
        "HTTPS_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "OPENAI_ORG_ID",
        "CAIRN_MEMORY_LOCAL",
    ):
        assert dropped not in env
    assert "127.0.0.1" in env["NO_PROXY"]
    assert env["no_proxy"] == env["NO_PROXY"]
