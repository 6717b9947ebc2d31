"""Every hook event of #13 through the real ``cairn -p`` and ``cairn --acp`` processes, with a
hook script written to Claude Code's documented contract (tests/e2e/claude_hook.py): each event
fires with its documented input, and what the script answers is honoured."""

from __future__ import annotations

import asyncio
import json
import sys
from pathlib import Path
from typing import Any

import pytest

from cairn.testing import RecordedRequest, ScriptedServer, ToolCallSpec, reply, tool_call
from cairn.testing import tool_calls as calls

from .conftest import RunCairn
from .test_acp_process import running_agent

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

HOOK = Path(__file__).with_name("claude_hook.py")
EVENTS = (
    "SessionStart",
    "SessionEnd",
    "PreToolUse",
    "PostToolUse",
    "PostToolUseFailure",
    "PreCompact",
    "SubagentStop",
    "Notification",
)
COMMON = {"session_id", "transcript_path", "cwd", "hook_event_name", "timestamp"}


@pytest.fixture
def hooked(cairn_env: dict[str, str], tmp_path: Path) -> dict[str, str]:
    """cairn's environment with the hook script on every event, in the user's settings."""
    command = {"type": "command", "command": f"{sys.executable} {HOOK}"}
    settings = {
        "hooks": {event: [{"hooks": [command]}] for event in EVENTS},
        "notifications": {"idleSeconds": 0.3},
    }
    home = Path(cairn_env["CAIRN_HOME"])
    home.mkdir(parents=True, exist_ok=True)
    (home / "settings.json").write_text(json.dumps(settings))
    return {**cairn_env, "HOOK_LOG": str(tmp_path / "hooks.jsonl")}


def logged(env: dict[str, str], name: str | None = None) -> list[dict[str, Any]]:
    path = Path(env["HOOK_LOG"])
    events = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [e for e in events if name is None or e["hook_event_name"] == name]


def tool_results(request: RecordedRequest) -> dict[str, str]:
    return {m["tool_call_id"]: m["content"] for m in request.messages if m["role"] == "tool"}


def test_session_and_tool_events_fire_with_their_input_and_are_honoured(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, hooked: dict[str, str]
) -> None:
    scripted_server.enqueue(
        tool_call("write_file", {"file_path": "draft.txt", "content": "v1\n"}, id="w"),
        tool_call("read_file", {"file_path": "missing.txt"}, id="r"),
        reply("Done."),
        purpose="main",
    )

    done = run_cairn("-p", "write the draft", "--approval-mode", "default", env=hooked)

    assert done.returncode == 0, done.stderr
    first, second, third = scripted_server.requests_for("main")
    # SessionStart: its context reaches the model with the first prompt.
    assert "SESSION-CONTEXT source=startup" in first.last_user_text()
    (start,) = logged(hooked, "SessionStart")
    assert start.keys() >= COMMON and start["source"] == "startup" and start["model"]
    # PreToolUse: updatedInput is what runs (and its allow needs no one to approve it).
    assert (project / "final.txt").read_text() == "v1\n"
    assert not (project / "draft.txt").exists()
    pre = next(e for e in logged(hooked, "PreToolUse") if e["tool_use_id"] == "w")
    assert pre["tool_name"] == "Write"
    assert pre["tool_input"]["file_path"] == str(project / "draft.txt")  # absolute, as Claude Code
    # PostToolUse: the block's reason and the context go to the model with the result.
    (post,) = logged(hooked, "PostToolUse")
    assert post["tool_use_id"] == "w" and post["tool_input"]["file_path"] == str(
        project / "final.txt"
    )
    assert "output" in post["tool_response"]
    written = tool_results(second)["w"]
    assert "POST-REASON: run the linter next" in written and "POST-CONTEXT" in written
    # PostToolUseFailure: the failed read's error, and the hook's context for the model.
    (failure,) = logged(hooked, "PostToolUseFailure")
    assert failure["tool_name"] == "Read" and "missing.txt" in failure["error"]
    assert failure["is_interrupt"] is False
    assert "FAILURE-CONTEXT" in tool_results(third)["r"]
    # SessionEnd: when cairn -p is done.
    (end,) = logged(hooked, "SessionEnd")
    assert end["reason"] == "other" and end["session_id"] == start["session_id"]


def test_a_pre_compact_block_keeps_the_conversation(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, hooked: dict[str, str]
) -> None:
    done = run_cairn("-p", "/compress", env=hooked)

    (compact,) = logged(hooked, "PreCompact")
    assert compact["trigger"] == "manual" and compact["custom_instructions"] == ""
    assert "A PreCompact hook kept the conversation as it is: not during the release" in (
        done.stdout + done.stderr
    )
    assert scripted_server.requests_for("compression") == []


def test_a_subagent_stop_block_keeps_the_subagent_working(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, hooked: dict[str, str]
) -> None:
    args = {
        "description": "count",
        "prompt": "Count the lines.",
        "subagent_type": "general-purpose",
    }
    scripted_server.enqueue(calls(ToolCallSpec("agent", args, "a")), reply("ok"), purpose="main")
    scripted_server.enqueue(reply("3 lines."), reply("3 lines, 12 words."), purpose="subagent")

    done = run_cairn("-p", "count", env=hooked)

    assert done.returncode == 0, done.stderr
    first, second = logged(hooked, "SubagentStop")
    assert first["agent_type"] == "general-purpose" and first["stop_hook_active"] is False
    assert first["last_assistant_message"] == "3 lines."
    assert second["stop_hook_active"] is True and second["agent_id"] == first["agent_id"]
    _, again = scripted_server.requests_for("subagent")
    assert again.last_user_text() == "Also count the words."
    answer = tool_results(scripted_server.requests_for("main")[1])["a"]
    assert answer.startswith("3 lines, 12 words.\n")  # then what the PostToolUse hook added


async def test_acp_notifies_when_it_asks_and_when_it_waits(
    scripted_server: ScriptedServer, project: Path, hooked: dict[str, str]
) -> None:
    scripted_server.enqueue(
        tool_call("run_shell_command", {"command": "touch made.txt"}),
        reply("Made."),
        purpose="main",
    )
    async with running_agent(hooked, project) as agent:
        session_id = await agent.start_session()
        await agent.prompt(session_id, "make it")
        async with asyncio.timeout(30):
            while len(logged(hooked, "Notification")) < 2:
                await asyncio.sleep(0.05)

    asked, idle = logged(hooked, "Notification")
    assert asked["notification_type"] == "permission_prompt"
    assert asked["message"] == "cairn needs your permission to use run_shell_command"
    assert idle["notification_type"] == "idle_prompt"
    assert idle["message"] == "cairn is waiting for your input"
    assert (project / "made.txt").exists()
