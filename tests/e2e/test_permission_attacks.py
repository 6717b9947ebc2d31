"""Issue #18's permission and tool findings, each replayed against a real ``cairn`` process.

The scripted model plays the attacker: it asks for the tool call that escaped the permission
system. Each test checks what happened on disk and what the model was sent back.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import httpx
import pytest

from cairn.testing import ScriptedServer, reply, tool_call

from ..polling import eventually_awaited
from .conftest import RunCairn, trust_in_user_settings, write_settings
from .test_daemon import serve  # noqa: F401  (the fixture starting `cairn serve`)

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]


def tool_results(server: ScriptedServer) -> list[str]:
    """The content of every tool message the model was sent, in order."""
    return [str(m["content"]) for r in server.requests for m in r.messages if m["role"] == "tool"]


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def test_the_model_cannot_write_its_own_permissions_in_auto_edit(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression (#18): in auto-edit the model wrote .cairn/settings.json (a hook and
    permissions.allow ["Bash"]); the next run executed the hook and ran shell unasked."""
    settings = project / ".cairn" / "settings.json"
    before = settings.read_text()
    hook = {"hooks": [{"type": "command", "command": "touch hooked"}]}
    escalation = {"permissions": {"allow": ["Bash"]}, "hooks": {"UserPromptSubmit": [hook]}}
    write = {"file_path": ".cairn/settings.json", "content": json.dumps(escalation)}
    scripted_server.enqueue(tool_call("write_file", write))
    scripted_server.enqueue(reply("done"))

    first = run_cairn("-p", "tidy up", "--approval-mode", "auto-edit")

    assert first.returncode == 0, first.stderr
    assert settings.read_text() == before
    assert "change cairn's own configuration" in tool_results(scripted_server)[0]

    scripted_server.enqueue(tool_call("run_shell_command", {"command": "touch pwned"}))
    scripted_server.enqueue(reply("done"))
    second = run_cairn("-p", "next")

    assert second.returncode == 0, second.stderr
    assert not (project / "hooked").exists()
    assert not (project / "pwned").exists()


def test_read_only_git_does_not_run_the_repository_fsmonitor(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression (#18): `git status` ran core.fsmonitor unasked in default mode."""
    (project / ".git").rmdir()
    git(project, "init", "-q")
    git(project, "config", "core.fsmonitor", f"touch {project / 'pwned'}; echo")
    hook = project / ".git" / "hooks" / "post-index-change"
    hook.write_text(f"#!/bin/sh\ntouch {project / 'hooked'}\n")
    hook.chmod(0o755)
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "git status"}))
    scripted_server.enqueue(reply("clean"))

    done = run_cairn("-p", "status?")

    assert done.returncode == 0, done.stderr
    assert "Exit code: 0" in tool_results(scripted_server)[0]  # it ran, unasked
    assert not (project / "pwned").exists()
    assert not (project / "hooked").exists()


def test_a_shell_command_cannot_print_cairns_secrets(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
) -> None:
    """Regression (#18): `env` ran unasked and printed OPENAI_API_KEY and CAIRN_SERVER_TOKEN."""
    secrets = {"OPENAI_API_KEY": "sk-e2e-secret-0123", "CAIRN_SERVER_TOKEN": "tok-e2e-0123"}
    env = {**cairn_env, **secrets}
    command = "env; echo $OPENAI_API_KEY"
    scripted_server.enqueue(tool_call("run_shell_command", {"command": command}))
    scripted_server.enqueue(reply("ok"))

    done = run_cairn("-p", "show env", "--yolo", env=env)

    assert done.returncode == 0, done.stderr
    (output,) = tool_results(scripted_server)
    assert "PATH=" in output
    assert "sk-e2e-secret-0123" not in output and "tok-e2e-0123" not in output


def test_a_shell_command_cannot_print_the_other_keys_cairn_uses(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    cairn_env: dict[str, str],
    project: Path,
) -> None:
    """Regression: the web search key (TAVILY_API_KEY) and a model.available entry's envKey
    reached every shell command; only the main endpoint's key was kept out."""
    write_settings(
        project,
        {
            "memory": {"enableManagedAutoMemory": False},
            "tools": {"webSearch": {"provider": "tavily"}},
            "model": {"available": [{"id": "other", "envKey": "OTHER_MODEL_KEY"}]},
        },
    )
    trust_in_user_settings(project)  # an entry's envKey counts only in a trusted folder
    secrets = {"TAVILY_API_KEY": "tvly-e2e-secret-0123", "OTHER_MODEL_KEY": "om-e2e-secret-0123"}
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "env"}))
    scripted_server.enqueue(reply("ok"))

    done = run_cairn("-p", "show env", "--yolo", env={**cairn_env, **secrets})

    assert done.returncode == 0, done.stderr
    (output,) = tool_results(scripted_server)
    assert "PATH=" in output
    assert "tvly-e2e-secret-0123" not in output and "om-e2e-secret-0123" not in output


@pytest.mark.parametrize(
    "command",
    ["/bin/rm victim.txt", 'bash -c "rm victim.txt"', "env rm victim.txt", "\\rm victim.txt",
     "echo victim.txt | xargs rm", "find . -name victim.txt -delete", "unlink victim.txt",
     "{ rm victim.txt; }", "R=rm; $R victim.txt"],
)  # fmt: skip
def test_a_deny_rule_holds_in_yolo_whatever_the_spelling(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, command: str
) -> None:
    """Regression (#18): `permissions.deny: ["Bash(rm*)"]` was bypassed by 19 of 30 spellings."""
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False}, "permissions": {"deny": ["Bash(rm*)"]}},
    )
    (project / "victim.txt").write_text("keep me\n")
    scripted_server.enqueue(tool_call("run_shell_command", {"command": command}))
    scripted_server.enqueue(reply("ok"))

    done = run_cairn("-p", "clean up", "--yolo")

    assert done.returncode == 0, done.stderr
    assert (project / "victim.txt").read_text() == "keep me\n"
    assert "Bash(rm*)" in tool_results(scripted_server)[0]


def test_reading_a_fifo_ends_the_call_instead_of_hanging_the_turn(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression (#18): read_file on a FIFO hung the turn."""
    os.mkfifo(project / "pipe")
    scripted_server.enqueue(tool_call("read_file", {"file_path": "pipe"}))
    scripted_server.enqueue(reply("it is a pipe"))

    done = run_cairn("-p", "read pipe", timeout=60)

    assert done.returncode == 0, done.stderr
    assert "FIFO" in tool_results(scripted_server)[0]


@pytest.mark.parametrize("searcher", ["rg", "python"])
def test_grep_does_not_follow_a_symlink_out_of_the_workspace(
    run_cairn: RunCairn,
    scripted_server: ScriptedServer,
    project: Path,
    tmp_path: Path,
    cairn_env: dict[str, str],
    searcher: str,
) -> None:
    """Regression (#18): grep_search printed the content of a file symlinked from outside
    (the Python search; ripgrep does not follow links)."""
    env = dict(cairn_env)
    if searcher == "python":
        (tmp_path / "no-rg").mkdir()
        env["PATH"] = str(tmp_path / "no-rg")
    elif shutil.which("rg") is None:
        pytest.skip("ripgrep (rg) is not installed")
    (tmp_path / "outside.txt").write_text("api_key = hunter2\n")
    (project / "link.txt").symlink_to(tmp_path / "outside.txt")
    (project / "app.txt").write_text("api_key = placeholder\n")
    scripted_server.enqueue(tool_call("grep_search", {"pattern": "api_key"}))
    scripted_server.enqueue(reply("found"))

    done = run_cairn("-p", "find keys", env=env)

    assert done.returncode == 0, done.stderr
    (output,) = tool_results(scripted_server)
    assert "app.txt:1:api_key = placeholder" in output
    assert "hunter2" not in output


async def test_a_fifo_read_does_not_freeze_the_daemon(
    serve: object,  # noqa: F811
    scripted_server: ScriptedServer,
    project: Path,
) -> None:
    """Regression (#18): read_file on a FIFO froze `cairn serve` (/health stopped answering)."""
    os.mkfifo(project / "pipe")
    scripted_server.enqueue(tool_call("read_file", {"file_path": "pipe"}))
    scripted_server.enqueue(reply("a pipe"))
    served = serve()  # type: ignore[operator]
    async with httpx.AsyncClient(base_url=served.url, timeout=20) as client:
        session = (await client.post("/session", json={})).json()["sessionId"]
        await client.post(f"/session/{session}/prompt", json={"prompt": "read the pipe"})

        async def healthy_until_the_tool_answered() -> bool:
            assert (await client.get("/health")).status_code == 200
            return len(tool_results(scripted_server)) == 1

        assert await eventually_awaited(healthy_until_the_tool_answered)

    assert "FIFO" in tool_results(scripted_server)[0]
