"""Hooks that misbehave, run by a real `cairn -p`: the turn goes on, the exit is clean."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from cairn.testing import ScriptedServer, reply, tool_call

from .conftest import RunCairn, write_settings

pytestmark = [pytest.mark.slow, pytest.mark.timeout(90)]


def _hooks(project: Path, event: str, command: str, matcher: str = "") -> None:
    group = {"matcher": matcher, "hooks": [{"type": "command", "command": command}]}
    settings = {"memory": {"enableManagedAutoMemory": False}, "hooks": {event: [group]}}
    write_settings(project, settings)


def test_a_hook_printing_deeply_nested_json_is_ignored_with_a_warning(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path
) -> None:
    """Regression (#18): a hook printing deeply nested JSON aborted the turn."""
    deep = "python3 -c \"print('[' * 100000 + ']' * 100000)\""
    _hooks(project, "PreToolUse", f"cat > /dev/null; {deep}")
    (project / "a.txt").write_text("hello\n")
    scripted_server.enqueue(tool_call("read_file", {"file_path": "a.txt"}))
    scripted_server.enqueue(reply("read it"))

    done = run_cairn("-p", "read a.txt", "--trust")  # a project's hooks need a trusted folder

    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "read it"
    assert "nested too deeply" in done.stderr
    assert "Traceback" not in done.stderr


def test_a_hook_leaving_a_setsid_child_ends_cleanly(
    run_cairn: RunCairn, scripted_server: ScriptedServer, project: Path, tmp_path: Path
) -> None:
    """Regression (#18): a hook that left a `setsid` child printed an "Event loop is closed"
    traceback at exit (and its output was lost to the timeout)."""
    pid_file = tmp_path / "child.pid"
    specific = '{"hookEventName": "UserPromptSubmit", "additionalContext": "ctx-from-hook"}'
    answer = f'{{"hookSpecificOutput": {specific}}}'
    _hooks(project, "UserPromptSubmit", f"setsid sleep 60 & echo $! > {pid_file}; echo '{answer}'")
    scripted_server.enqueue(reply("ok"))
    try:
        done = run_cairn("-p", "hi", "--trust")

        assert done.returncode == 0, done.stderr
        assert "Event loop is closed" not in done.stderr and "Traceback" not in done.stderr
        assert "ctx-from-hook" in str(scripted_server.requests[0].messages)
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)
