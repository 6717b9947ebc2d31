"""``cairn -p`` tells the user what it declined: each denial on stderr in text mode, and in
``permission_denials`` (Claude Code's shape) in json and stream-json."""

from __future__ import annotations

import json
from pathlib import Path

from cairn.testing import ScriptedServer, ToolCallSpec, error_reply, reply, tool_call, tool_calls

from .conftest import RunCairn, write_settings

WRITE = {"file_path": "notes.txt", "content": "hello\n"}
COMMAND = {"command": "touch made-by-model.txt"}


def script_two_refused_calls(server: ScriptedServer) -> None:
    """The model wants to write a file and run a command in one response, then answers."""
    both = tool_calls(ToolCallSpec("write_file", WRITE), ToolCallSpec("run_shell_command", COMMAND))
    server.enqueue(both, purpose="main")
    server.enqueue(reply("I could not change anything."), purpose="main")


def test_text_mode_tells_each_denial_on_stderr(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression: default mode declined edits and commands silently; only the model knew."""
    script_two_refused_calls(scripted_server)

    done = run_cairn("-p", "make notes")

    assert done.returncode == 0, done.stderr
    assert done.stdout == "I could not change anything.\n"
    denials = [line for line in done.stderr.splitlines() if line.startswith("Denied ")]
    assert len(denials) == 2
    assert denials[0].startswith("Denied Write notes.txt: ")
    assert denials[1].startswith("Denied touch made-by-model.txt: ")
    assert "--approval-mode auto-edit or yolo" in denials[0]
    assert not (project / "notes.txt").exists()
    assert not (project / "made-by-model.txt").exists()


def test_a_denied_command_suggests_what_lets_it_run(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression: a refused shell command said "Re-run with --approval-mode auto-edit or yolo",
    but auto-edit asks before commands too, so the re-run was refused again."""
    scripted_server.enqueue(tool_call("run_shell_command", COMMAND), purpose="main")
    scripted_server.enqueue(reply("Could not."), purpose="main")
    done = run_cairn("-p", "make the file")
    [denial] = [line for line in done.stderr.splitlines() if line.startswith("Denied ")]
    assert "auto-edit" not in denial
    assert "--yolo" in denial and "permissions.allow" in denial

    scripted_server.enqueue(tool_call("run_shell_command", COMMAND), purpose="main")
    scripted_server.enqueue(reply("Made it."), purpose="main")
    again = run_cairn("-p", "make the file", "--yolo")

    assert again.returncode == 0, again.stderr
    assert (project / "made-by-model.txt").exists()


def test_json_result_lists_the_denials_as_claude_code_does(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    """Regression: `permission_denials` was a hard-coded empty list."""
    script_two_refused_calls(scripted_server)

    done = run_cairn("-p", "make notes", "-o", "json")

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout)[-1]
    assert result["type"] == "result"
    assert result["permission_denials"] == [
        {"tool_name": "write_file", "tool_use_id": "call_1", "tool_input": WRITE},
        {"tool_name": "run_shell_command", "tool_use_id": "call_2", "tool_input": COMMAND},
    ]
    assert "Denied" not in done.stderr  # machine output: the result says it


def test_stream_json_result_lists_the_denials(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    script_two_refused_calls(scripted_server)

    done = run_cairn("-p", "make notes", "-o", "stream-json")

    assert done.returncode == 0, done.stderr
    result = json.loads(done.stdout.splitlines()[-1])
    assert [d["tool_use_id"] for d in result["permission_denials"]] == ["call_1", "call_2"]


def test_a_deny_rule_and_plan_mode_are_denials_too(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    write_settings(
        project,
        {"memory": {"enableManagedAutoMemory": False}, "permissions": {"deny": ["Bash(rm *)"]}},
    )
    scripted_server.enqueue(tool_call("run_shell_command", {"command": "rm -rf build"}))
    scripted_server.enqueue(reply("Not allowed."))
    scripted_server.enqueue(tool_call("write_file", WRITE))
    scripted_server.enqueue(reply("Planning only."))

    ruled = run_cairn("-p", "clean", "-o", "json", "--approval-mode", "yolo")
    planned = run_cairn("-p", "write", "-o", "json", "--approval-mode", "plan")

    [by_rule] = json.loads(ruled.stdout)[-1]["permission_denials"]
    assert by_rule["tool_input"] == {"command": "rm -rf build"}
    [by_plan] = json.loads(planned.stdout)[-1]["permission_denials"]
    assert by_plan["tool_name"] == "write_file"


def test_a_tool_that_fails_on_its_own_is_not_a_denial(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(tool_call("read_file", {"file_path": "missing.txt"}))
    scripted_server.enqueue(reply("It is missing."))

    done = run_cairn("-p", "read it", "-o", "json")

    assert json.loads(done.stdout)[-1]["permission_denials"] == []


def test_stream_json_reports_each_retry_as_claude_code_does(
    run_cairn: RunCairn, scripted_server: ScriptedServer
) -> None:
    scripted_server.enqueue(error_reply(500, "overloaded", retry_after=0))
    scripted_server.enqueue(reply("Recovered."))

    done = run_cairn("-p", "hi", "-o", "stream-json")

    assert done.returncode == 0, done.stderr
    messages = [json.loads(line) for line in done.stdout.splitlines()]
    [retry] = [m for m in messages if m.get("subtype") == "api_retry"]
    assert retry["type"] == "system"
    assert retry["attempt"] == 1  # the first retry
    assert retry["max_retries"] == 6  # of seven attempts in all
    assert retry["retry_delay_ms"] == 0
    assert "HTTP 500" in retry["error"] and "overloaded" in retry["error"]
    assert messages[-1]["result"] == "Recovered."
