"""!cmd: a real shell command in the workspace."""

from __future__ import annotations

import asyncio

from cairn.ui.shell import MAX_SHELL_OUTPUT_CHARS, run_shell

from ..polling import eventually_async
from ..process_helpers import wait_until_dead


async def test_output_and_exit_code_are_returned(tmp_path):
    (tmp_path / "a.txt").write_text("")

    result = await run_shell("ls; echo oops >&2; exit 3", tmp_path, timeout=10)

    assert result.output.splitlines() == ["a.txt", "oops"]
    assert result.exit_code == 3
    assert not result.timed_out


async def test_a_command_that_runs_too_long_is_stopped(tmp_path):
    result = await run_shell("echo started; sleep 30", tmp_path, timeout=0.5)

    assert result.timed_out
    assert result.exit_code is None
    assert result.output == "started\n"


async def test_cancelling_stops_the_command(tmp_path):
    marker, pid_file = tmp_path / "done", tmp_path / "shell.pid"
    started = f"echo $$ > {pid_file}.part && mv {pid_file}.part {pid_file}"
    command = f"{started}; sleep 1 && touch {marker}"
    task = asyncio.create_task(run_shell(command, tmp_path, timeout=30))
    assert await eventually_async(pid_file.exists)  # the command has started

    task.cancel()
    await asyncio.gather(task, return_exceptions=True)

    # once the shell that would run `touch` is gone, the marker can never appear
    assert await asyncio.to_thread(wait_until_dead, int(pid_file.read_text()))
    assert not marker.exists()


async def test_long_output_keeps_the_end(tmp_path):
    count = MAX_SHELL_OUTPUT_CHARS // 4
    result = await run_shell(f"seq 1 {count}", tmp_path, timeout=10)

    assert result.truncated
    assert len(result.output) == MAX_SHELL_OUTPUT_CHARS
    assert result.output.endswith(f"{count}\n")


async def test_stdin_is_closed(tmp_path):
    result = await run_shell("cat", tmp_path, timeout=5)

    assert result.exit_code == 0
    assert result.output == ""
