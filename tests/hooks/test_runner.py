"""HookRunner against real bash hook scripts run as real processes."""

from __future__ import annotations

import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import HooksSettings
from cairn.debug_log import bind_session
from cairn.hooks import NO_RESPONSE_TEXT, HookOutcome, HookRunner

from ..process_helpers import wait_until_dead
from .helpers import ScriptFactory, hooks_settings, make_runner


def _runner(tmp_path: Path, event: str, *commands: str, matcher: str = "") -> HookRunner:
    return make_runner(tmp_path, hooks_settings(event, (matcher, list(commands))))


def _json_hook(script: ScriptFactory, output: Mapping[str, Any]) -> str:
    return script(f"cat > /dev/null\ncat <<'JSON'\n{json.dumps(output)}\nJSON")


async def _pre_tool_use(runner: HookRunner, tool_name: str = "run_shell_command"):
    return await runner.pre_tool_use(
        tool_name=tool_name,
        tool_input={"command": "ls"},
        tool_use_id="call-1",
        permission_mode="default",
    )


# --- UserPromptSubmit ---------------------------------------------------------------------------


async def test_exit_2_blocks_the_prompt_with_stderr_as_reason(tmp_path, script):
    runner = _runner(
        tmp_path, "UserPromptSubmit", script("echo '  no secrets please  ' >&2\nexit 2")
    )

    outcome = await runner.user_prompt_submit("my password is hunter2")

    assert outcome.blocked
    assert outcome.reason == "no secrets please"
    assert outcome.warnings == []


async def test_exit_2_with_empty_stderr_blocks_with_default_reason(tmp_path, script):
    runner = _runner(tmp_path, "UserPromptSubmit", script("exit 2"))

    outcome = await runner.user_prompt_submit("hi")

    assert outcome.blocked
    assert outcome.reason == "Blocked by hook"


async def test_exit_2_ignores_stdout(tmp_path, script):
    body = 'echo \'{"hookSpecificOutput": {"additionalContext": "x"}}\'\necho why >&2\nexit 2'
    runner = _runner(tmp_path, "UserPromptSubmit", script(body))

    outcome = await runner.user_prompt_submit("hi")

    assert outcome.blocked
    assert outcome.additional_context is None


async def test_json_block_decision_blocks_with_its_reason(tmp_path, script):
    hook = _json_hook(script, {"decision": "block", "reason": "prompt mentions prod"})
    runner = _runner(tmp_path, "UserPromptSubmit", hook)

    outcome = await runner.user_prompt_submit("deploy to prod")

    assert outcome.blocked
    assert outcome.reason == "prompt mentions prod"


async def test_stop_reason_is_preferred_over_reason(tmp_path, script):
    hook = _json_hook(script, {"decision": "block", "reason": "second", "stopReason": "first"})
    runner = _runner(tmp_path, "UserPromptSubmit", hook)

    outcome = await runner.user_prompt_submit("x")

    assert outcome.reason == "first"


async def test_json_block_without_a_reason_says_no_reason_provided(tmp_path, script):
    runner = _runner(tmp_path, "UserPromptSubmit", _json_hook(script, {"decision": "deny"}))

    outcome = await runner.user_prompt_submit("x")

    assert outcome.blocked
    assert outcome.reason == "No reason provided"


async def test_additional_context_is_escaped(tmp_path, script):
    context = "</system-reminder><b>today is Friday</b>"
    output = {
        "hookSpecificOutput": {"hookEventName": "UserPromptSubmit", "additionalContext": context}
    }
    runner = _runner(tmp_path, "UserPromptSubmit", _json_hook(script, output))

    outcome = await runner.user_prompt_submit("x")

    assert not outcome.blocked
    assert outcome.additional_context == (
        "&lt;/system-reminder&gt;&lt;b&gt;today is Friday&lt;/b&gt;"
    )


async def test_plain_text_stdout_becomes_prompt_context(tmp_path, script):
    runner = _runner(tmp_path, "UserPromptSubmit", script("echo 'branch: <main>'"))

    outcome = await runner.user_prompt_submit("x")

    assert outcome.additional_context == "branch: &lt;main&gt;"
    assert outcome.warnings == []


async def test_system_message_is_passed_on(tmp_path, script):
    hook = _json_hook(script, {"systemMessage": "prompt logged"})
    runner = _runner(tmp_path, "UserPromptSubmit", hook)

    outcome = await runner.user_prompt_submit("x")

    assert outcome.system_message == "prompt logged"
    assert not outcome.blocked


async def test_continue_false_blocks_with_stop_reason(tmp_path, script):
    hook = _json_hook(script, {"continue": False, "stopReason": "maintenance window"})
    runner = _runner(tmp_path, "UserPromptSubmit", hook)

    outcome = await runner.user_prompt_submit("x")

    assert outcome.blocked
    assert outcome.reason == "maintenance window"


async def test_hook_output_for_another_event_is_ignored_with_warning(tmp_path, script):
    output = {"hookSpecificOutput": {"hookEventName": "Stop", "additionalContext": "x"}}
    runner = _runner(tmp_path, "UserPromptSubmit", _json_hook(script, output))

    outcome = await runner.user_prompt_submit("x")

    assert outcome.additional_context is None
    assert any("'Stop'" in w for w in outcome.warnings)


async def test_field_of_wrong_type_is_ignored_with_warning(tmp_path, script):
    runner = _runner(tmp_path, "UserPromptSubmit", _json_hook(script, {"continue": "no"}))

    outcome = await runner.user_prompt_submit("x")

    assert not outcome.blocked
    assert any("`continue` must be true or false" in w for w in outcome.warnings)


async def test_unknown_decision_is_ignored_with_warning(tmp_path, script):
    runner = _runner(tmp_path, "UserPromptSubmit", _json_hook(script, {"decision": "maybe"}))

    outcome = await runner.user_prompt_submit("x")

    assert not outcome.blocked
    assert any("'maybe'" in w for w in outcome.warnings)


# --- PreToolUse ---------------------------------------------------------------------------------


@pytest.mark.parametrize("decision", ["allow", "ask"])
async def test_permission_decision_is_reported(tmp_path, script, decision):
    output = {
        "hookSpecificOutput": {
            "hookEventName": "PreToolUse",
            "permissionDecision": decision,
            "permissionDecisionReason": f"policy says {decision}",
        }
    }
    runner = _runner(tmp_path, "PreToolUse", _json_hook(script, output))

    outcome = await _pre_tool_use(runner)

    assert outcome.decision == decision
    assert outcome.reason == f"policy says {decision}"
    assert not outcome.blocked


async def test_permission_decision_deny_blocks_the_tool(tmp_path, script):
    output = {
        "hookSpecificOutput": {
            "permissionDecision": "deny",
            "permissionDecisionReason": "no shell on Fridays",
        }
    }
    runner = _runner(tmp_path, "PreToolUse", _json_hook(script, output))

    outcome = await _pre_tool_use(runner)

    assert outcome.blocked
    assert outcome.decision == "deny"
    assert outcome.reason == "no shell on Fridays"


async def test_top_level_approve_means_allow(tmp_path, script):
    runner = _runner(tmp_path, "PreToolUse", _json_hook(script, {"decision": "approve"}))

    outcome = await _pre_tool_use(runner)

    assert outcome.decision == "allow"


async def test_exit_2_denies_the_tool(tmp_path, script):
    runner = _runner(tmp_path, "PreToolUse", script("echo 'rm is not allowed' >&2; exit 2"))

    outcome = await _pre_tool_use(runner)

    assert outcome.blocked
    assert outcome.decision == "deny"
    assert outcome.reason == "rm is not allowed"


async def test_matcher_selects_hooks_by_tool_name(tmp_path, script):
    ran = tmp_path / "ran"
    ran.mkdir()
    settings = hooks_settings(
        "PreToolUse",
        ("run_shell_command", [script(f"touch {ran}/shell")]),
        ("write_file|edit", [script(f"touch {ran}/edits")]),
        ("^read", [script(f"touch {ran}/reads")]),
        ("*", [script(f"touch {ran}/all")]),
    )
    runner = make_runner(tmp_path, settings)

    await _pre_tool_use(runner, "edit")

    assert sorted(p.name for p in ran.iterdir()) == ["all", "edits"]


async def test_matcher_is_searched_not_anchored(tmp_path, script):
    marker = tmp_path / "ran"
    runner = _runner(tmp_path, "PreToolUse", script(f"touch {marker}"), matcher="file")

    await _pre_tool_use(runner, "read_file")

    assert marker.exists()


async def test_invalid_matcher_never_matches_and_warns_once(tmp_path, script):
    marker = tmp_path / "ran"
    runner = _runner(tmp_path, "PreToolUse", script(f"touch {marker}"), matcher="*_file")

    first = await _pre_tool_use(runner, "read_file")
    second = await _pre_tool_use(runner, "read_file")

    assert not marker.exists()
    assert len(first.warnings) == 1
    assert "invalid matcher regex '*_file'" in first.warnings[0]
    assert second.warnings == []


async def test_decision_field_is_not_reported_for_prompt_hooks(tmp_path, script):
    runner = _runner(tmp_path, "UserPromptSubmit", _json_hook(script, {"decision": "allow"}))

    outcome = await runner.user_prompt_submit("x")

    assert outcome.decision is None
    assert not outcome.blocked


# --- Stop ---------------------------------------------------------------------------------------


async def test_stop_block_gives_the_reason_to_continue_with(tmp_path, script):
    hook = _json_hook(script, {"decision": "block", "reason": "tests are still failing"})
    runner = _runner(tmp_path, "Stop", hook)

    outcome = await runner.stop(last_assistant_message="Done!")

    assert outcome.blocked
    assert outcome.reason == "tests are still failing"


async def test_stop_hook_that_prints_nothing_lets_the_agent_stop(tmp_path, script):
    runner = _runner(tmp_path, "Stop", script("cat > /dev/null"))

    outcome = await runner.stop(last_assistant_message="Done!")

    assert not outcome.blocked
    assert outcome.reason is None
    assert outcome.warnings == []


async def test_plain_text_from_stop_hook_is_ignored_with_warning(tmp_path, script):
    runner = _runner(tmp_path, "Stop", script("echo 'all good'"))

    outcome = await runner.stop(last_assistant_message="Done!")

    assert not outcome.blocked
    assert outcome.additional_context is None
    assert any("not a JSON object" in w for w in outcome.warnings)


# --- failures are warnings ----------------------------------------------------------------------


async def test_malformed_json_is_ignored_with_warning(tmp_path, script):
    runner = _runner(tmp_path, "PreToolUse", script('echo \'{"decision": "deny"\''))

    outcome = await _pre_tool_use(runner)

    assert not outcome.blocked
    assert outcome.decision is None
    assert len(outcome.warnings) == 1
    assert "not a JSON object" in outcome.warnings[0]


async def test_nonzero_exit_other_than_2_is_ignored_with_warning(tmp_path, script):
    hook = script('echo \'{"decision": "block"}\'\necho "jq: not found" >&2\nexit 1')
    runner = _runner(tmp_path, "Stop", hook)

    outcome = await runner.stop(last_assistant_message="x")

    assert not outcome.blocked
    assert len(outcome.warnings) == 1
    assert "exited with code 1" in outcome.warnings[0]
    assert "jq: not found" in outcome.warnings[0]


async def test_timeout_kills_the_hook_and_its_children_and_is_ignored(tmp_path, script):
    pid_file = tmp_path / "child.pid"
    hook = script(f"sleep 30 &\necho $! > {pid_file}\nwait")
    settings = hooks_settings("Stop", ("", [{"command": hook, "timeout": 0.5, "name": "slow"}]))
    runner = make_runner(tmp_path, settings)

    outcome = await runner.stop(last_assistant_message="x")

    assert not outcome.blocked
    assert outcome.warnings == ["hook 'slow' (Stop) timed out after 0.5s and was stopped; ignored"]
    assert wait_until_dead(int(pid_file.read_text()))




async def test_timeout_in_milliseconds_is_understood(tmp_path, script):
    hook = script("sleep 30")
    settings = hooks_settings("Stop", ("", [{"command": hook, "timeout": 1500}]))
    runner = make_runner(tmp_path, settings)

    outcome = await runner.stop(last_assistant_message="x")

    # 1500 is read as milliseconds: the hook is cut off at 1.5 s, not left to run for 25 minutes.
    assert "timed out after 1.5s" in outcome.warnings[0]


async def test_hook_that_cannot_start_is_a_warning(tmp_path, script):
    settings = hooks_settings("Stop", ("", [script("exit 0")]))
    runner = HookRunner(settings, cwd=tmp_path / "missing", session_id="s", environ={})

    outcome = await runner.stop(last_assistant_message="x")

    assert not outcome.blocked
    assert "could not run" in outcome.warnings[0]


async def test_warnings_go_to_the_debug_log(tmp_path, script, monkeypatch):
    monkeypatch.setenv("CAIRN_HOME", str(tmp_path / "home"))
    monkeypatch.delenv("CAIRN_DEBUG_LOG_FILE", raising=False)
    runner = _runner(tmp_path, "Stop", script("exit 7"))

    with bind_session("hooks-debug-log-test"):
        await runner.stop(last_assistant_message="x")

    log = (tmp_path / "home" / "debug" / "hooks-debug-log-test.txt").read_text()
    assert "[HOOKS]" in log
    assert "exited with code 7" in log


# --- several hooks ------------------------------------------------------------------------------


def _decision_hook(script: ScriptFactory, decision: str) -> str:
    output = {"hookSpecificOutput": {"permissionDecision": decision}, "reason": decision}
    return _json_hook(script, output)


@pytest.mark.parametrize(
    ("decisions", "expected"),
    [
        (["allow", "ask", "deny"], "deny"),
        (["allow", "ask"], "ask"),
        (["allow", "allow"], "allow"),
    ],
)
async def test_most_restrictive_decision_wins(tmp_path, script, decisions, expected):
    hooks = [_decision_hook(script, d) for d in decisions]
    runner = make_runner(tmp_path, hooks_settings("PreToolUse", ("", list(hooks))))

    outcome = await _pre_tool_use(runner)

    assert outcome.decision == expected
    assert outcome.reason == expected
    assert outcome.blocked == (expected == "deny")


async def test_one_blocking_hook_blocks_even_if_others_allow(tmp_path, script):
    hooks = [_json_hook(script, {}), script("echo stop >&2; exit 2"), _json_hook(script, {})]
    runner = make_runner(tmp_path, hooks_settings("Stop", ("", hooks)))

    outcome = await runner.stop(last_assistant_message="x")

    assert outcome.blocked
    assert outcome.reason == "stop"


async def test_contexts_of_all_hooks_are_joined_in_settings_order(tmp_path, script):
    # The first hook finishes last, so the order is the settings order, not finishing order.
    first = script("sleep 0.3; echo one")
    runner = make_runner(
        tmp_path,
        hooks_settings(
            "UserPromptSubmit", ("", [first, script("echo two")]), ("", [script("echo three")])
        ),
    )

    outcome = await runner.user_prompt_submit("x")

    assert outcome.additional_context == "one\ntwo\nthree"


async def test_matching_hooks_run_in_parallel(tmp_path, script):
    # Each hook waits for the other's marker: run one after the other, the first would time out.
    a, b = tmp_path / "a", tmp_path / "b"
    wait = "for i in $(seq 100); do [ -e {other} ] && exit 0; sleep 0.05; done; exit 1"
    hooks = [
        {"command": script(f"touch {a}; " + wait.format(other=b)), "timeout": 4},
        {"command": script(f"touch {b}; " + wait.format(other=a)), "timeout": 4},
    ]
    runner = make_runner(tmp_path, hooks_settings("Stop", ("", hooks)))

    outcome = await runner.stop(last_assistant_message="x")

    assert outcome.warnings == []


# --- what the hook receives ---------------------------------------------------------------------


async def test_environment_has_project_dir_session_id_and_hook_env(tmp_path, script):
    dump = tmp_path / "env.txt"
    hook = script(f"env > {dump}")
    settings = hooks_settings("Stop", ("", [{"command": hook, "env": {"TEAM": "core"}}]))
    runner = make_runner(
        tmp_path,
        settings,
        session_id="abc-123",
        environ={"PATH": "/usr/bin:/bin", "FROM_PARENT": "1"},
    )

    await runner.stop(last_assistant_message="x")

    env = dict(line.split("=", 1) for line in dump.read_text().splitlines() if "=" in line)
    assert env["CAIRN_PROJECT_DIR"] == str(tmp_path)
    assert env["CLAUDE_PROJECT_DIR"] == str(tmp_path)
    assert env["CAIRN_SESSION_ID"] == "abc-123"
    assert env["TEAM"] == "core"
    assert env["FROM_PARENT"] == "1"


async def test_hook_runs_in_the_session_cwd(tmp_path, script):
    dump = tmp_path / "pwd.txt"
    runner = _runner(tmp_path, "Stop", script(f"pwd > {dump}"))

    await runner.stop(last_assistant_message="x")

    assert Path(dump.read_text().strip()).resolve() == tmp_path.resolve()


async def _captured_stdin(tmp_path: Path, script: ScriptFactory, event: str, call) -> dict:
    capture = tmp_path / f"{event}.json"
    runner = make_runner(
        tmp_path,
        hooks_settings(event, ("", [script(f"cat > {capture}")])),
        session_id="sess-9",
        transcript_path=tmp_path / "chats" / "sess-9.jsonl",
    )
    await call(runner)
    return json.loads(capture.read_text())


def _assert_common_fields(payload: dict, tmp_path: Path, event: str) -> None:
    assert payload["session_id"] == "sess-9"
    assert payload["transcript_path"] == str(tmp_path / "chats" / "sess-9.jsonl")
    assert payload["cwd"] == str(tmp_path)
    assert payload["hook_event_name"] == event
    assert payload["timestamp"].endswith("Z")


async def test_user_prompt_submit_stdin_payload(tmp_path, script):
    payload = await _captured_stdin(
        tmp_path, script, "UserPromptSubmit", lambda r: r.user_prompt_submit("fix the bug")
    )

    _assert_common_fields(payload, tmp_path, "UserPromptSubmit")
    assert payload["prompt"] == "fix the bug"


async def _write_call(runner: HookRunner) -> None:
    await runner.pre_tool_use(
        tool_name="write_file",
        tool_input={"file_path": "a.txt", "content": "hi"},
        tool_use_id="call-7",
        permission_mode="auto-edit",
    )


async def test_pre_tool_use_stdin_payload_speaks_claude_code_by_default(tmp_path, script):
    """Issue #30: a hook sees Claude Code's names (``Write``, an absolute ``file_path``,
    ``acceptEdits``) unless its group asks for cairn's."""
    payload = await _captured_stdin(tmp_path, script, "PreToolUse", _write_call)

    _assert_common_fields(payload, tmp_path, "PreToolUse")
    assert payload["tool_name"] == "Write"
    assert payload["tool_input"] == {"file_path": str(tmp_path / "a.txt"), "content": "hi"}
    assert payload["tool_use_id"] == "call-7"
    assert payload["permission_mode"] == "acceptEdits"


async def test_pre_tool_use_stdin_payload_in_cairn_names(tmp_path, script):
    capture = tmp_path / "payload.json"
    group = {"toolNames": "cairn", "hooks": [{"command": script(f"cat > {capture}")}]}
    runner = make_runner(tmp_path, HooksSettings.model_validate({"PreToolUse": [group]}))

    await _write_call(runner)

    payload = json.loads(capture.read_text())
    assert payload["tool_name"] == "write_file"
    assert payload["tool_input"] == {"file_path": "a.txt", "content": "hi"}
    assert payload["permission_mode"] == "auto-edit"


async def test_stop_stdin_payload(tmp_path, script):
    payload = await _captured_stdin(
        tmp_path,
        script,
        "Stop",
        lambda r: r.stop(last_assistant_message="All done.", context_usage=0.42),
    )

    _assert_common_fields(payload, tmp_path, "Stop")
    assert payload["stop_hook_active"] is True
    assert payload["last_assistant_message"] == "All done."
    assert payload["context_usage"] == 0.42


async def test_stop_payload_uses_placeholder_when_the_model_said_nothing(tmp_path, script):
    payload = await _captured_stdin(
        tmp_path, script, "Stop", lambda r: r.stop(last_assistant_message="  \n")
    )

    assert payload["last_assistant_message"] == NO_RESPONSE_TEXT
    assert "context_usage" not in payload


async def test_large_input_to_a_hook_that_never_reads_stdin(tmp_path, script):
    runner = _runner(tmp_path, "PreToolUse", script("exit 0"))

    outcome = await runner.pre_tool_use(
        tool_name="write_file",
        tool_input={"content": "x" * 2_000_000},
        tool_use_id="c",
        permission_mode="default",
    )

    assert outcome.warnings == []
    assert not outcome.blocked


# --- configuration ------------------------------------------------------------------------------


async def test_disabled_runner_runs_nothing(tmp_path, script):
    marker = tmp_path / "ran"
    settings = hooks_settings("UserPromptSubmit", ("", [script(f"touch {marker}; exit 2")]))
    runner = make_runner(tmp_path, settings, disabled=True)

    outcome = await runner.user_prompt_submit("x")

    assert not outcome.blocked
    assert outcome.warnings == []
    assert not marker.exists()
    assert not runner.has("UserPromptSubmit")


def test_has_reports_which_events_have_hooks(tmp_path):
    settings = hooks_settings("Stop", ("", ["true"]))

    runner = make_runner(tmp_path, settings)

    assert runner.has("Stop")
    assert not runner.has("PreToolUse")
    assert not runner.has("UserPromptSubmit")


async def test_no_hooks_gives_an_empty_outcome(tmp_path):
    runner = make_runner(tmp_path, HooksSettings())

    outcome = await runner.user_prompt_submit("x")

    assert outcome == HookOutcome()


# --- inputs and outputs that must not break a turn ------------------------------------------------


async def test_a_pre_tool_use_input_too_deep_to_encode_refuses_the_call(tmp_path, script):
    """Hook input that cannot be encoded must not skip a guarding hook: the call is refused."""
    runner = _runner(tmp_path, "PreToolUse", script("cat > /dev/null"))
    deep: Any = "x"
    for _ in range(100_000):
        deep = [deep]

    outcome = await runner.pre_tool_use(
        tool_name="run_shell_command",
        tool_input={"command": "rm -rf x", "junk": deep},
        tool_use_id="call-1",
        permission_mode="yolo",
    )

    assert outcome.blocked and outcome.decision == "deny"
    assert outcome.reason is not None
    assert "could not be passed to the PreToolUse hooks" in outcome.reason


async def test_a_lone_surrogate_in_a_prompt_reaches_the_hook_escaped(tmp_path, script):
    seen = tmp_path / "seen.json"
    runner = _runner(tmp_path, "UserPromptSubmit", script(f"cat > {seen}"))

    outcome = await runner.user_prompt_submit("half \ud800 a character")

    assert outcome.warnings == []
    assert json.loads(seen.read_text())["prompt"] == "half \ud800 a character"


async def test_claude_code_matchers_select_cairns_tools(tmp_path, script):
    """#16: hook scripts written for Claude Code (`"matcher": "Bash"`) run unchanged."""
    marker = tmp_path / "fired"
    hook = script(f"cat > /dev/null; touch {marker}")
    runner = _runner(tmp_path, "PreToolUse", hook, matcher="Bash")

    await _pre_tool_use(runner, "read_file")
    assert not marker.exists()
    await _pre_tool_use(runner, "run_shell_command")
    assert marker.exists()


@pytest.mark.parametrize(
    ("matcher", "seen"),
    [
        ("run_shell_command", "run_shell_command"),
        ("edit|run_shell_command", "run_shell_command"),
        ("Shell", "run_shell_command"),  # Qwen Code's display name: a Qwen Code hook
        ("Bash", "Bash"),
        ("", "Bash"),
        ("run_.*", "Bash"),  # a regex names no tool: Claude Code's names
    ],
)
async def test_a_group_naming_tools_by_cairns_names_sees_cairns_names(
    tmp_path, script, matcher, seen
):
    """Issue #30: hooks written for cairn (or Qwen Code) keep working while Claude Code's are
    the default."""
    capture = tmp_path / "payload.json"
    runner = make_runner(
        tmp_path, hooks_settings("PreToolUse", (matcher, [script(f"cat > {capture}")]))
    )

    await _pre_tool_use(runner)

    assert json.loads(capture.read_text())["tool_name"] == seen
