"""Claude Code compatibility (issue #30): hook scripts written to Claude Code's documented
contract (tests/hooks/claude_code/, unchanged) run from a project's `.claude/settings.json`
through the real loader and runner, and each blocks, allows, rewrites or adds context as
Claude Code's documentation says.

Before, such a guard hook ran but never blocked: it compared `tool_name` with "Bash" and cairn
sent "run_shell_command".
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.config.loader import load_settings
from cairn.hooks import HookRunner
from cairn.testing import ScriptedProvider, reply
from cairn.tools.permissions import PermissionRule

from ..polling import eventually_async
from .helpers import TEST_PATH

SCRIPTS = Path(__file__).with_name("claude_code")
pytestmark = pytest.mark.skipif(shutil.which("jq") is None, reason="the scripts use jq")


@pytest.fixture
def project(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with the scripts in `.claude/hooks/`, in a folder the user trusts."""
    home = tmp_path / "cairn-home"
    home.mkdir()
    (home / "settings.json").write_text(
        json.dumps({"security": {"folderTrust": {"enabled": False}}})
    )
    monkeypatch.setenv("CAIRN_HOME", str(home))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    root = tmp_path / "project"
    (root / ".git").mkdir(parents=True)
    shutil.copytree(SCRIPTS, root / ".claude" / "hooks")
    return root


def _hook(script: str, **fields: Any) -> dict[str, Any]:
    """A handler as Claude Code's docs write it: the script by its path in the project."""
    return {"type": "command", "command": f'"$CLAUDE_PROJECT_DIR"/.claude/hooks/{script}', **fields}


def _runner(project: Path, hooks: Mapping[str, Any], **kwargs: Any) -> HookRunner:
    (project / ".claude" / "settings.json").write_text(json.dumps({"hooks": hooks}))
    loaded = load_settings(project)
    assert not [w for w in loaded.warnings if "trusted" in w]
    kwargs.setdefault("environ", {"PATH": TEST_PATH})
    return HookRunner(loaded.settings.hooks, cwd=project, session_id="s-1", **kwargs)


async def _shell(runner: HookRunner, command: str, **more: Any):
    return await runner.pre_tool_use(
        tool_name="run_shell_command",
        tool_input={"command": command, **more},
        tool_use_id="call-1",
        permission_mode="default",
    )


async def _file(runner: HookRunner, tool: str, path: str, **more: Any):
    return await runner.pre_tool_use(
        tool_name=tool,
        tool_input={"file_path": path, **more},
        tool_use_id="c",
        permission_mode="default",
    )


# ----- PreToolUse: block, deny, allow, rewrite -----


async def test_the_bash_validator_blocks_with_its_reasons_and_leaves_the_rest(project):
    runner = _runner(
        project,
        {"PreToolUse": [{"matcher": "Bash", "hooks": [_hook("bash_command_validator.py")]}]},
    )

    blocked = await _shell(runner, "grep -r TODO src")
    piped = await _shell(runner, "grep -r TODO src | head")
    other = await _file(runner, "read_file", "README.md")

    assert blocked.blocked and blocked.decision == "deny"
    assert "Use 'rg' (ripgrep) instead of 'grep'" in (blocked.reason or "")
    assert not piped.blocked and piped.warnings == []
    assert not other.blocked  # the matcher keeps it to Bash


async def test_a_json_deny_names_its_reason(project):
    runner = _runner(
        project, {"PreToolUse": [{"matcher": "Bash", "hooks": [_hook("block_rm.sh")]}]}
    )

    outcome = await _shell(runner, "rm -rf build")

    assert outcome.decision == "deny"
    assert outcome.reason == "Destructive command blocked by hook"
    assert (await _shell(runner, "ls")).decision is None


async def test_a_file_guard_sees_absolute_paths_and_claude_code_tool_names(project):
    guard = {"matcher": "Read|Edit|Write", "hooks": [_hook("protect_env_files.py")]}
    runner = _runner(project, {"PreToolUse": [guard]})

    written = await _file(runner, "write_file", ".env", content="KEY=1")
    edited = await _file(runner, "edit", "./config/../.env.local", old_string="a", new_string="b")
    fine = await _file(runner, "read_file", "notes.txt")

    assert written.blocked and written.reason == ".env holds secrets: do not touch it"
    assert edited.blocked and ".env.local" in (edited.reason or "")
    assert not fine.blocked and fine.warnings == []


async def test_allow_and_updated_input_map_back_to_cairns_arguments(project):
    runner = _runner(
        project, {"PreToolUse": [{"matcher": "Bash", "hooks": [_hook("approve_and_rewrite.py")]}]}
    )

    rewritten = await _shell(runner, "npm test", timeout=30, description="tests")
    approved = await _shell(runner, "make check")
    untouched = await _shell(runner, "make deploy")

    assert rewritten.decision == "allow"
    # The hook saw Bash's timeout in milliseconds and wrote it back so: cairn runs 30 seconds.
    assert rewritten.updated_input == {
        "command": "pnpm test",
        "timeout": 30.0,
        "description": "tests",
    }
    assert approved.decision == "allow" and approved.reason == "the checks are safe"
    assert untouched.decision is None and untouched.updated_input is None


# ----- the other events -----


async def test_session_start_context_and_the_env_file(project, tmp_path):
    env_file = tmp_path / "session-env" / "s-1.sh"
    hooks = {"SessionStart": [{"hooks": [_hook("session_context.sh"), _hook("session_env.sh")]}]}
    runner = _runner(project, hooks, env_file=env_file)

    outcome = await runner.session_start(source="startup", model="m")

    assert outcome.additional_context == (
        "Project convention: every shell script starts with set -euo pipefail."
    )
    assert outcome.environment == {
        "PROJECT_KIND": "library",
        "PATH": f"{TEST_PATH}:{project}/tools",  # a shell line: $PATH expanded
    }
    assert oct(env_file.stat().st_mode & 0o777) == "0o600"


async def test_a_second_session_start_starts_from_an_empty_env_file(project, tmp_path):
    env_file = tmp_path / "s-1.sh"
    env_file.write_text("export STALE=1\n")
    runner = _runner(
        project, {"SessionStart": [{"hooks": [_hook("session_context.sh")]}]}, env_file=env_file
    )

    outcome = await runner.session_start(source="clear", model="m")

    assert outcome.environment == {}


async def test_user_prompt_submit_plain_text_is_context_and_a_secret_is_blocked(project):
    hooks = {
        "UserPromptSubmit": [{"hooks": [_hook("prompt_context.sh"), _hook("prompt_guard.py")]}]
    }
    runner = _runner(project, hooks)

    fine = await runner.user_prompt_submit("upgrade the parser")
    secret = await runner.user_prompt_submit("my api_key: sk-123")

    assert fine.additional_context == "Release freeze until Friday: no dependency upgrades."
    assert not fine.blocked
    assert secret.blocked and secret.reason == "Your prompt seems to hold a secret; remove it."


async def test_post_tool_use_feedback_reaches_the_model(project):
    (project / "out.txt").write_text("no newline")
    hooks = {"PostToolUse": [{"matcher": "Write|Edit", "hooks": [_hook("post_write_feedback.py")]}]}
    runner = _runner(project, hooks)

    outcome = await runner.post_tool_use(
        tool_name="write_file",
        tool_input={"file_path": "out.txt", "content": "no newline"},
        tool_response={"output": "Wrote out.txt"},
        tool_use_id="w",
        permission_mode="default",
    )

    assert (
        outcome.blocked
        and outcome.reason == f"{project}/out.txt does not end with a newline; add one."
    )
    assert outcome.additional_context == "This project's files end with a newline."


async def test_the_stop_gate_blocks_once(project):
    runner = _runner(project, {"Stop": [{"hooks": [_hook("stop_gate.py")]}]})

    first = await runner.stop(last_assistant_message="Done.", stop_hook_active=False)
    again = await runner.stop(last_assistant_message="Done.", stop_hook_active=True)

    assert first.blocked and first.reason == "Add a CHANGELOG entry before you stop."
    assert not again.blocked


async def test_an_async_hook_is_not_waited_for_and_says_its_part_later(project):
    hooks = {"PostToolUse": [{"hooks": [_hook("async_audit.sh", **{"async": True})]}]}
    runner = _runner(project, hooks)

    outcome = await runner.post_tool_use(
        tool_name="run_shell_command",
        tool_input={"command": "ls"},
        tool_response={"output": "a\n"},
        tool_use_id="x",
        permission_mode="default",
    )

    assert outcome.additional_context is None and not outcome.blocked
    assert await eventually_async(lambda: (project / "audit.log").exists())
    later = await _background(runner)
    assert later.additional_context == "AUDITED Bash"
    assert later.system_message == "audited Bash"
    assert json.loads((project / "audit.log").read_text()) == {
        "tool": "Bash",
        "input": {"command": "ls"},
    }
    assert runner.take_background() is None  # said once


async def _background(runner: HookRunner):
    found = []

    def done() -> bool:
        outcome = runner.take_background()
        if outcome is not None:
            found.append(outcome)
        return bool(found)

    assert await eventually_async(done)
    return found[0]


async def test_closing_stops_an_async_hook_still_running(project, tmp_path):
    marker = tmp_path / "finished"
    hooks = {"Stop": [{"hooks": [{"command": f"sleep 30; touch {marker}", "async": True}]}]}
    runner = _runner(project, hooks)

    await runner.stop(last_assistant_message="x")
    await runner.close()

    assert runner.take_background() is None
    assert not marker.exists()


# ----- the input every hook gets -----


async def test_every_event_carries_claude_codes_common_fields(project, tmp_path):
    log = tmp_path / "events.jsonl"
    record = {"hooks": [_hook("record_event.py")]}
    hooks = {event: [record] for event in ("PreToolUse", "UserPromptSubmit", "Stop")}
    runner = _runner(
        project,
        hooks,
        environ={"PATH": TEST_PATH, "HOOK_LOG": str(log)},
        transcript_path=tmp_path / "s-1.jsonl",
        approval_mode=lambda: "auto-edit",
    )

    await runner.user_prompt_submit("hi")
    await runner.pre_tool_use(
        tool_name="read_file",
        tool_input={"file_path": "a.py", "offset": 0},
        tool_use_id="r",
        permission_mode="yolo",
    )
    await runner.stop(last_assistant_message="ok")

    prompt, pre, stop = (json.loads(line) for line in log.read_text().splitlines())
    for event in (prompt, pre, stop):
        assert event["session_id"] == "s-1" and event["cwd"] == str(project)
        assert event["transcript_path"] == str(tmp_path / "s-1.jsonl")
        assert event["env"]["CLAUDE_PROJECT_DIR"] == str(project)
    assert prompt["permission_mode"] == stop["permission_mode"] == "acceptEdits"
    assert pre["permission_mode"] == "bypassPermissions"
    assert pre["tool_name"] == "Read"
    assert pre["tool_input"] == {"file_path": str(project / "a.py"), "offset": 1}  # 1-based


@pytest.mark.parametrize(
    ("tool", "claude"),
    [
        ("run_shell_command", "Bash"),
        ("read_file", "Read"),
        ("write_file", "Write"),
        ("edit", "Edit"),
        ("glob", "Glob"),
        ("grep_search", "Grep"),
        ("list_directory", "LS"),
        ("web_fetch", "WebFetch"),
        ("web_search", "WebSearch"),
        ("todo_write", "TodoWrite"),
        ("agent", "Task"),
        ("mcp__github__create_issue", "mcp__github__create_issue"),
    ],
)
async def test_tool_names_are_claude_codes_and_its_matchers_select_them(
    project, tmp_path, tool, claude
):
    log = tmp_path / "events.jsonl"
    matcher = {
        "matcher": claude if claude != "Task" else "Agent",
        "hooks": [_hook("record_event.py")],
    }
    runner = _runner(
        project, {"PreToolUse": [matcher]}, environ={"PATH": TEST_PATH, "HOOK_LOG": str(log)}
    )

    await runner.pre_tool_use(
        tool_name=tool, tool_input={}, tool_use_id="t", permission_mode="default"
    )

    assert json.loads(log.read_text())["tool_name"] == claude


# ----- prompt hooks and `if` -----


def _provider(answer: str) -> ScriptedProvider:
    provider = ScriptedProvider(fast_model="fast-1")
    provider.enqueue(reply(answer), purpose="hook")
    return provider


async def test_a_prompt_hook_asks_the_fast_model_and_its_no_denies(project):
    provider = _provider('{"ok": false, "reason": "It deletes the build cache."}')
    hook = {"type": "prompt", "prompt": "Is this command safe? $ARGUMENTS"}
    runner = _runner(
        project, {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]}, provider=provider
    )

    outcome = await _shell(runner, "rm -rf .cache")

    assert outcome.decision == "deny" and outcome.reason == "It deletes the build cache."
    assert outcome.stop  # as Claude Code: a prompt hook's no also stops the agent
    [request] = provider.requests
    assert request.model == "fast-1" and request.purpose == "hook"
    asked = request.contents[-1].text
    assert asked.startswith("Is this command safe? {")
    assert json.loads(asked.removeprefix("Is this command safe? "))["tool_input"] == {
        "command": "rm -rf .cache"
    }


async def test_a_prompt_hooks_yes_lets_the_call_go_on_and_a_stop_hooks_no_keeps_working(project):
    hooks = {
        "PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "Safe?"}]}],
        "Stop": [{"hooks": [{"type": "prompt", "prompt": "Are the tests run?"}]}],
    }
    provider = ScriptedProvider()
    provider.enqueue(
        reply('{"ok": true}'), reply('{"ok": false, "reason": "Run the tests."}'), purpose="hook"
    )
    runner = _runner(project, hooks, provider=provider)

    allowed = await _shell(runner, "ls")
    stop = await runner.stop(last_assistant_message="Done.")

    assert not allowed.blocked and allowed.decision is None and allowed.warnings == []
    assert stop.blocked and stop.reason == "Run the tests." and not stop.stop
    assert provider.requests[0].contents[-1].text.startswith("Safe?\n\n{")  # JSON appended


async def test_a_prompt_hook_whose_model_fails_is_a_warning_not_a_block(project):
    runner = _runner(
        project,
        {"PreToolUse": [{"hooks": [{"type": "prompt", "prompt": "Safe?"}]}]},
        provider=_provider("I think it is fine."),
    )

    outcome = await _shell(runner, "ls")

    assert not outcome.blocked
    [warning] = outcome.warnings
    assert "'Safe?'" in warning and "ignored" in warning


async def test_an_if_rule_narrows_a_hook_to_the_calls_it_covers(project, tmp_path):
    log = tmp_path / "events.jsonl"
    hook = _hook("record_event.py", **{"if": "Bash(git commit *)"})
    runner = _runner(
        project,
        {"PreToolUse": [{"matcher": "Bash", "hooks": [hook]}]},
        environ={"PATH": TEST_PATH, "HOOK_LOG": str(log)},
        rule_test=lambda rule, tool, args: PermissionRule.parse(rule).matches(tool, args, project),
    )

    await _shell(runner, "git status")
    await _shell(runner, "git add . && git commit -m x")

    [event] = (json.loads(line) for line in log.read_text().splitlines())
    assert event["tool_input"]["command"] == "git add . && git commit -m x"


async def test_one_command_configured_twice_runs_once(project, tmp_path):
    log = tmp_path / "events.jsonl"
    group = {"matcher": "Bash", "hooks": [_hook("record_event.py")]}
    runner = _runner(
        project,
        {"PreToolUse": [group, {**group, "matcher": "*"}]},
        environ={"PATH": TEST_PATH, "HOOK_LOG": str(log)},
    )

    await _shell(runner, "ls")

    assert len(log.read_text().splitlines()) == 1


def test_the_scripts_are_unchanged_claude_code_hooks() -> None:
    """None of the scripts names cairn or its tool names: they are Claude Code hooks."""
    for path in SCRIPTS.iterdir():
        if path.suffix in (".py", ".sh"):
            text = path.read_text()
            assert "cairn" not in text.lower() and "run_shell_command" not in text, path.name
            assert os.access(path, os.X_OK), path.name
