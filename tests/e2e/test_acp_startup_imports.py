"""What a real ``cairn --acp`` imports to open a session: the MCP configuration code only when
the editor names servers (most send ``mcpServers: []``). Only *what* is imported is checked."""

from __future__ import annotations

import json
import queue
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest

from cairn.testing import ScriptedServer

pytestmark = pytest.mark.slow

PROBE = (
    "import atexit, sys\n"
    "atexit.register(lambda: sys.stderr.write("
    "'MCP CONFIG IMPORTED ' + str('cairn.mcp.config' in sys.modules) + '\\n'))\n"
    "from cairn.cli.main import main\n"
    "sys.argv = ['cairn', '--acp']\n"
    "main()\n"
)


def open_session(project: Path, env: dict[str, str], servers: list[Any]) -> tuple[dict, bool]:
    """``session/new``'s answer, and whether the agent had imported cairn.mcp.config at exit."""
    log = project.parent / "agent-stderr.txt"
    with log.open("wb") as stderr:
        process = subprocess.Popen(
            [sys.executable, "-c", PROBE],
            cwd=project,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=stderr,
        )
    assert process.stdin is not None and process.stdout is not None
    answers: queue.Queue[dict[str, Any]] = queue.Queue()
    stdout = process.stdout
    threading.Thread(
        target=lambda: [answers.put(json.loads(line)) for line in stdout], daemon=True
    ).start()
    try:
        for message in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
            {
                "jsonrpc": "2.0",
                "id": 2,
                "method": "session/new",
                "params": {"cwd": str(project), "mcpServers": servers},
            },
        ):
            process.stdin.write((json.dumps(message) + "\n").encode())
            process.stdin.flush()
        while (answer := answers.get(timeout=60)).get("id") != 2:
            pass
        process.stdin.close()
        process.wait(timeout=60)
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    line = next(x for x in log.read_text().splitlines() if x.startswith("MCP CONFIG IMPORTED "))
    return answer, line.endswith("True")


def test_a_session_without_mcp_servers_does_not_load_the_mcp_configuration(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    answer, imported = open_session(project, cairn_env, [])

    assert "sessionId" in answer["result"]
    assert not imported


def test_a_session_naming_a_server_checks_it(
    scripted_server: ScriptedServer, cairn_env: dict[str, str], project: Path
) -> None:
    answer, imported = open_session(
        project, cairn_env, [{"name": "", "command": "x", "args": [], "env": []}]
    )

    assert answer["error"]["code"] == -32602  # invalid params, naming the entry
    assert "mcpServers[0]" in json.dumps(answer["error"])
    assert imported
