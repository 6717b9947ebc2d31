"""docs/acp.md: the Zed settings start a working agent, and every documented extension exists."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

pytestmark = [pytest.mark.slow, pytest.mark.timeout(60)]

DOC = Path(__file__).resolve().parents[2] / "docs" / "acp.md"
_SETTINGS = re.compile(r"<!-- docs-test: zed-settings -->\n```json\n(.*?)```", re.DOTALL)
_EXTENSION = re.compile(r"^\| `(_cairn/[a-z]+)` \|", re.MULTILINE)


def zed_agent() -> dict[str, Any]:
    [block] = _SETTINGS.findall(DOC.read_text())
    agent: dict[str, Any] = json.loads(block)["agent_servers"]["cairn"]
    return agent


def test_the_documented_zed_settings_start_an_agent_that_answers_every_extension(
    cairn_env: dict[str, str], tmp_path: Path
) -> None:
    agent = zed_agent()
    command = str(Path(sys.executable).parent / agent["command"])
    project = tmp_path / "project"
    project.mkdir()
    extensions = _EXTENSION.findall(DOC.read_text())
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "session/new",
            "params": {"cwd": str(project), "mcpServers": []},
        },
    ]
    process = subprocess.Popen(
        [command, *agent["args"]],
        env=cairn_env,
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    assert process.stdin is not None and process.stdout is not None
    answers: dict[int, dict[str, Any]] = {}

    def call(message: dict[str, Any]) -> dict[str, Any]:
        process.stdin.write(json.dumps(message).encode() + b"\n")  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        while message["id"] not in answers:
            reply = json.loads(process.stdout.readline())  # type: ignore[union-attr]
            if "id" in reply and "method" not in reply:
                answers[reply["id"]] = reply
        return answers[message["id"]]

    try:
        call(requests[0])
        session_id = call(requests[1])["result"]["sessionId"]
        results = [
            call(
                {
                    "jsonrpc": "2.0",
                    "id": 10 + i,
                    "method": name,
                    "params": {"sessionId": session_id},
                }
            )
            for i, name in enumerate(extensions)
        ]
    finally:
        process.stdin.close()
        process.wait(timeout=30)

    assert agent["args"][0] == "--acp"
    assert sorted(extensions) == [
        "_cairn/continue",
        "_cairn/recap",
        "_cairn/retry",
        "_cairn/rewind",
    ]
    assert all("result" in result for result in results), results
