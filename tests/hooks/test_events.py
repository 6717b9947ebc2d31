"""The events #13 adds, against real hook scripts: what each answer means, and which hooks a
matcher picks for each event."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.hooks import HookRunner

from .helpers import ScriptFactory, hooks_settings, make_runner


def _runner(tmp_path: Path, event: str, command: str, matcher: str = "") -> HookRunner:
    return make_runner(tmp_path, hooks_settings(event, (matcher, [command])))


def _answering(script: ScriptFactory, output: Mapping[str, Any]) -> str:
    return script(f"cat > /dev/null\ncat <<'JSON'\n{json.dumps(output)}\nJSON")


async def test_continue_false_stops_a_stop_hook_instead_of_keeping_the_agent_going(
    tmp_path, script
):
    """Regression: `continue: false` from a Stop hook was read as a block, so the agent kept
    working; Claude Code's contract says it stops, and wins over `decision: block`."""
    output = {"continue": False, "stopReason": "quota reached", "decision": "block"}
    runner = _runner(tmp_path, "Stop", _answering(script, output))

    outcome = await runner.stop(last_assistant_message="done")

    assert outcome.stop and outcome.stop_reason == "quota reached"
    assert not outcome.blocked


async def test_pre_tool_use_may_rewrite_the_input(tmp_path, script):
    specific = {"hookEventName": "PreToolUse", "updatedInput": {"command": "ls -la"}}
    runner = _runner(tmp_path, "PreToolUse", _answering(script, {"hookSpecificOutput": specific}))

    outcome = await runner.pre_tool_use(
        tool_name="run_shell_command",
        tool_input={"command": "ls"},
        tool_use_id="c1",
        permission_mode="default",
    )

    assert outcome.updated_input == {"command": "ls -la"}
    assert not outcome.blocked


async def test_an_updated_input_that_is_not_an_object_is_a_warning(tmp_path, script):
    specific = {"hookEventName": "PreToolUse", "updatedInput": "ls -la"}
    runner = _runner(tmp_path, "PreToolUse", _answering(script, {"hookSpecificOutput": specific}))

    outcome = await runner.pre_tool_use(
        tool_name="read_file", tool_input={}, tool_use_id="c1", permission_mode="default"
    )

    assert outcome.updated_input is None
    assert any("updatedInput` must be an object" in w for w in outcome.warnings)


async def test_matchers_pick_mcp_tools_by_server_and_events_by_their_own_field(tmp_path, script):
    marker = tmp_path / "ran"
    command = script(f"cat >> {marker}; echo >> {marker}")
    settings = hooks_settings("PostToolUse", ("mcp__github__.*", [command]))
    runner = make_runner(tmp_path, settings)
    common = {"tool_input": {}, "tool_response": {}, "permission_mode": "default"}

    await runner.post_tool_use(tool_name="mcp__github__create_issue", tool_use_id="a", **common)
    await runner.post_tool_use(tool_name="mcp__slack__post", tool_use_id="b", **common)
    starts = _runner(tmp_path, "SessionStart", command, matcher="resume|clear")
    await starts.session_start(source="startup", model="m")
    await starts.session_start(source="clear", model="m")

    seen = [json.loads(line) for line in marker.read_text().splitlines() if line.strip()]
    assert [(e["hook_event_name"], e.get("tool_use_id") or e.get("source")) for e in seen] == [
        ("PostToolUse", "a"),
        ("SessionStart", "clear"),
    ]


async def test_session_start_text_output_is_context_and_exit_2_is_for_the_user(tmp_path, script):
    text = _runner(tmp_path, "SessionStart", script("cat > /dev/null\necho 'branch: main'"))
    refused = _runner(tmp_path, "SessionStart", script("cat > /dev/null\necho nope >&2\nexit 2"))

    context = await text.session_start(source="startup", model="m")
    blocked = await refused.session_start(source="startup", model="m")

    assert context.additional_context == "branch: main"
    assert blocked.blocked and blocked.reason == "nope"


async def test_a_failure_hooks_exit_2_is_context_for_the_model(tmp_path, script):
    runner = _runner(
        tmp_path, "PostToolUseFailure", script("cat > /dev/null\necho 'try ls' >&2\nexit 2")
    )

    outcome = await runner.post_tool_use_failure(
        tool_name="read_file",
        tool_input={},
        tool_use_id="c",
        error="no such file",
        permission_mode="default",
    )

    assert outcome.additional_context == "try ls" and not outcome.blocked
