"""Trusted folders with real processes: an untrusted project's hook does not run, until trusted.

The agents (``cairn -p``, ``cairn --acp``) whose trust is checked are real processes; ``cairn
trust``, the command that writes and lists the trust, runs through cairn's entry point in this
process (tests/entry_point.py) except once, where the first test trusts with a real process.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

from cairn.testing import ScriptedServer, reply

from ..entry_point import run_main
from .conftest import CAIRN, RunCairn, write_settings


def _trust(project: Path, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    """``cairn trust *args`` in ``project``, run in this process."""
    return run_main(["trust", *args], cwd=project, env=env)


def _hook_settings(project: Path, marker: Path, *, extra: str = "") -> None:
    hook = project / "hook.sh"
    hook.write_text(f"#!/bin/bash\necho ran >> '{marker}'{extra}\n")
    hook.chmod(0o755)
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "hooks": {"UserPromptSubmit": [{"hooks": [{"type": "command", "command": str(hook)}]}]},
        },
    )


def _runs(marker: Path) -> int:
    return len(marker.read_text().splitlines()) if marker.exists() else 0


def test_an_untrusted_projects_hook_runs_only_after_cairn_trust(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    cairn_env: dict[str, str],
) -> None:
    marker = tmp_path / "hook-ran"
    _hook_settings(project, marker)
    scripted_server.default = reply("Answered.")

    untrusted = run_cairn("-p", "hello")
    assert untrusted.returncode == 0, untrusted.stderr
    assert _runs(marker) == 0
    assert untrusted.stderr.count("not a trusted folder") == 1
    assert "`cairn trust`" in untrusted.stderr

    trusted = run_cairn("trust")
    assert trusted.returncode == 0, trusted.stderr
    assert "hooks.UserPromptSubmit" in trusted.stdout and "hook.sh" in trusted.stdout

    after = run_cairn("-p", "hello again")
    assert after.returncode == 0, after.stderr
    assert _runs(marker) == 1
    assert "not a trusted folder" not in after.stderr

    _hook_settings(project, marker, extra="  # now it does something else")
    changed = run_cairn("-p", "and again")
    assert _runs(marker) == 1
    assert "changed since you trusted it" in changed.stderr

    once = run_cairn("-p", "once more", "--trust")
    assert once.returncode == 0, once.stderr
    assert _runs(marker) == 2
    [listed] = _trust(project, cairn_env, "--list").stdout.splitlines()
    assert listed.split()[:2] == ["changed", str(project)]  # trusted once, changed since


def test_revoking_trust_turns_the_hook_off_again(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    cairn_env: dict[str, str],
) -> None:
    marker = tmp_path / "hook-ran"
    _hook_settings(project, marker)
    scripted_server.default = reply("Answered.")
    assert _trust(project, cairn_env).returncode == 0

    revoked = _trust(project, cairn_env, "--revoke")
    assert revoked.returncode == 0 and "revoked" in revoked.stdout
    run_cairn("-p", "hello")

    assert _runs(marker) == 0
    bad = _trust(project, cairn_env, str(tmp_path / "missing"))
    assert bad.returncode == 42 and "is not a folder" in bad.stderr


def test_the_acp_agent_does_not_run_an_untrusted_projects_hook_and_says_how_to_trust(
    cairn_env: dict[str, str], scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    marker = tmp_path / "hook-ran"
    _hook_settings(project, marker)
    scripted_server.default = reply("Answered.")
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": 1}},
        {"jsonrpc": "2.0", "id": 2, "method": "session/new",
         "params": {"cwd": str(project), "mcpServers": []}},
    ]  # fmt: skip
    process = subprocess.Popen(
        [*CAIRN, "--acp"],
        env=cairn_env,
        cwd=project,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    assert process.stdin is not None and process.stdout is not None
    try:
        answers = [_call(process, message) for message in messages]
        session_id = answers[1]["result"]["sessionId"]
        prompt = {"jsonrpc": "2.0", "id": 3, "method": "session/prompt",
                  "params": {"sessionId": session_id,
                             "prompt": [{"type": "text", "text": "hello"}]}}  # fmt: skip
        assert _call(process, prompt)["result"]["stopReason"] == "end_turn"
    finally:
        process.stdin.close()  # end of input: the agent shuts down
        process.wait(timeout=30)
    assert process.stderr is not None
    stderr = process.stderr.read()

    assert _runs(marker) == 0
    assert stderr.decode().count("not a trusted folder") == 1
    assert "`cairn trust`" in stderr.decode()


def _call(process: subprocess.Popen[bytes], message: dict[str, Any]) -> dict[str, Any]:
    assert process.stdin is not None and process.stdout is not None
    process.stdin.write(json.dumps(message).encode() + b"\n")
    process.stdin.flush()
    while True:
        answer = json.loads(process.stdout.readline())
        if answer.get("id") == message["id"] and "method" not in answer:
            return dict(answer)


def test_an_untrusted_projects_mcp_server_starts_only_after_cairn_trust(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    cairn_env: dict[str, str],
) -> None:
    """A stdio server of the project's .mcp.json: not started by `cairn -p` (its tools are not
    offered to the model) until the folder is trusted."""
    from ..mcp.helpers import patient_discovery, tools_server

    patient_discovery(project.parent / "cairn-home")  # cairn_env's, next to the project fixture
    server_log = tmp_path / "server.log"
    entry = tools_server(tmp_path).stdio_config()
    (project / ".mcp.json").write_text(json.dumps({"mcpServers": {"tools": entry}}))
    scripted_server.default = reply("Answered.")

    untrusted = run_cairn("-p", "hello")
    assert untrusted.returncode == 0, untrusted.stderr
    assert "not a trusted folder" in untrusted.stderr and "1 MCP server" in untrusted.stderr
    assert not server_log.exists()
    offered = scripted_server.requests_for("main")[-1].tool_names
    assert not any(name.startswith("mcp__") for name in offered)

    assert _trust(project, cairn_env).returncode == 0
    trusted = run_cairn("-p", "hello again")
    assert trusted.returncode == 0, trusted.stderr
    assert "start" in server_log.read_text()
    assert "mcp__tools__echo" in scripted_server.requests_for("main")[-1].tool_names
