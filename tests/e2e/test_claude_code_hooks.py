"""Issue #30, through the real ``cairn -p``: a Claude Code user's `.claude/settings.json` hooks
(tests/hooks/claude_code/, written to Claude Code's contract, unchanged) guard, rewrite and
inform exactly as in Claude Code.

The bug: hooks in `.claude/settings.json` were ignored without a word, and moved to
`.cairn/settings.json` Claude Code's own Bash validator ran but never blocked (it compares
`tool_name` with "Bash"; cairn sent "run_shell_command").
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from cairn.testing import RecordedRequest, ScriptedServer, reply, tool_call

from .conftest import RunCairn, trust_in_user_settings

pytestmark = [
    pytest.mark.slow,
    pytest.mark.timeout(120),
    pytest.mark.skipif(shutil.which("jq") is None, reason="the scripts use jq"),
]

SCRIPTS = Path(__file__).parents[1] / "hooks" / "claude_code"


def _hook(script: str, **fields: Any) -> dict[str, Any]:
    return {"type": "command", "command": f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/{script}', **fields}


def _claude_settings(project: Path, hooks: dict[str, Any]) -> None:
    shutil.copytree(SCRIPTS, project / ".claude" / "hooks", dirs_exist_ok=True)
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}, indent=2))


def _results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


GUARDS = {
    "PreToolUse": [
        {"matcher": "Bash", "hooks": [_hook("bash_command_validator.py"), _hook("block_rm.sh")]},
        {"matcher": "Read|Edit|Write", "hooks": [_hook("protect_env_files.py")]},
        {"matcher": "Bash", "hooks": [_hook("approve_and_rewrite.py")]},
    ]
}


def test_claude_code_guard_hooks_block_deny_and_rewrite(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    _claude_settings(project, GUARDS)
    trust_in_user_settings(project)
    (project / "build").mkdir()
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "grep -r TODO ."}, id="grep"),
        tool_call("run_shell_command", {"command": "rm -rf build"}, id="rm"),
        tool_call("write_file", {"file_path": ".env", "content": "KEY=1\n"}, id="env"),
        tool_call("run_shell_command", {"command": "npm --version > ran.txt"}, id="npm"),
        tool_call("run_shell_command", {"command": "make check"}, id="make"),
        reply("Done."),
        purpose="main",
    )

    done = run_cairn("-p", "tidy up", "--approval-mode", "default")

    assert done.returncode == 0, done.stderr
    results = _results(scripted_server.requests_for("main")[-1])
    assert "Blocked by a PreToolUse hook" in results["grep"]
    assert "Use 'rg' (ripgrep) instead of 'grep'" in results["grep"]
    assert "Destructive command blocked by hook" in results["rm"]
    assert (project / "build").is_dir()
    assert ".env holds secrets: do not touch it" in results["env"]
    assert not (project / ".env").exists()
    # Rewritten to pnpm and allowed without asking (nobody could have, under -p):
    assert (project / "ran.txt").exists()
    assert "pnpm" in results["npm"]
    assert "denied" not in results["make"].lower()  # allowed by the hook, so it ran


def test_claude_code_context_hooks_reach_the_model(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    hooks = {
        "SessionStart": [{"hooks": [_hook("session_context.sh"), _hook("session_env.sh")]}],
        "UserPromptSubmit": [{"hooks": [_hook("prompt_context.sh")]}],
        "PostToolUse": [{"matcher": "Write|Edit", "hooks": [_hook("post_write_feedback.py")]}],
        "Stop": [{"hooks": [_hook("stop_gate.py")]}],
    }
    _claude_settings(project, hooks)
    trust_in_user_settings(project)
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "notes.txt", "content": "no newline"}, id="w"),
        tool_call("run_shell_command", {"command": 'echo "kind=$PROJECT_KIND"'}, id="env"),
        reply("Done."),
        reply("Added the CHANGELOG entry."),
        purpose="main",
    )

    done = run_cairn("-p", "write notes", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    first, after_write, after_echo, after_stop = scripted_server.requests_for("main")
    prompt = first.last_user_text()
    assert "every shell script starts with set -euo pipefail" in prompt  # SessionStart
    assert "Release freeze until Friday" in prompt  # UserPromptSubmit's plain stdout
    written = _results(after_write)["w"]
    assert f"{project}/notes.txt does not end with a newline; add one." in written
    assert "This project's files end with a newline." in written
    assert "kind=library" in _results(after_echo)["env"]  # CLAUDE_ENV_FILE
    assert after_stop.last_user_text() == "Add a CHANGELOG entry before you stop."


def test_an_untrusted_folders_claude_hooks_do_not_run_and_cairn_says_so(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    _claude_settings(project, GUARDS)
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "grep -r TODO ."}, id="grep"),
        reply("Done."),
        purpose="main",
    )

    done = run_cairn("-p", "look", "--approval-mode", "default")

    assert done.returncode == 0, done.stderr
    assert "is not a trusted folder" in done.stderr and ".claude/settings.json" in done.stderr
    assert "Blocked" not in _results(scripted_server.requests_for("main")[-1])["grep"]

    listed = run_cairn("trust", "--list")
    trusted = run_cairn("trust")
    assert trusted.returncode == 0, trusted.stderr + listed.stderr
    assert ".claude/settings.json hooks.PreToolUse" in trusted.stdout


def test_a_prompt_hook_is_answered_by_the_fast_model(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    hook = {"type": "prompt", "prompt": "Does this command only read? $ARGUMENTS"}
    _claude_settings(project, {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]})
    trust_in_user_settings(project)
    scripted_server.enqueue(reply('{"ok": false, "reason": "It writes a file."}'), purpose="hook")
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "touch x.txt"}, id="t"),
        reply("Stopped."),
        purpose="main",
    )

    done = run_cairn("-p", "make x", "--approval-mode", "yolo")

    assert done.returncode == 0, done.stderr
    [asked] = scripted_server.requests_for("hook")
    assert '"tool_name": "Bash"' in asked.last_user_text()
    assert not (project / "x.txt").exists()
    assert "It writes a file." in _results(scripted_server.requests_for("main")[-1])["t"]
