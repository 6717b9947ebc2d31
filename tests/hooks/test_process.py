"""run_command: real bash processes, capped output, timeouts and cancellation."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from pathlib import Path

import pytest

from cairn.hooks.process import (
    MAX_OUTPUT_BYTES,
    reaped,
    run_command,
    spawn_group,
    timeout_seconds,
)
from cairn.hooks.reaper import descendants

from ..polling import eventually
from ..process_helpers import pid_alive
from .helpers import TEST_PATH

ENV = {"PATH": TEST_PATH}


async def _run(command: str, tmp_path: Path, *, stdin: bytes = b"", timeout: float = 10):
    return await run_command(command, stdin=stdin, cwd=tmp_path, env=ENV, timeout=timeout)


async def test_stdout_stderr_and_exit_code_are_returned(tmp_path):
    result = await _run("cat; echo oops >&2; exit 3", tmp_path, stdin=b"hello")

    assert result.exit_code == 3
    assert result.stdout == "hello"
    assert result.stderr == "oops\n"
    assert not result.timed_out
    assert result.error is None


async def test_output_beyond_one_megabyte_is_dropped_and_flagged(tmp_path):
    result = await _run(f"head -c {MAX_OUTPUT_BYTES + 5000} /dev/zero | tr '\\0' a", tmp_path)

    assert result.exit_code == 0
    assert len(result.stdout) == MAX_OUTPUT_BYTES
    assert result.truncated


async def test_output_of_exactly_one_megabyte_is_kept_whole(tmp_path):
    result = await _run(f"head -c {MAX_OUTPUT_BYTES} /dev/zero | tr '\\0' a", tmp_path)

    assert len(result.stdout) == MAX_OUTPUT_BYTES
    assert not result.truncated


async def test_timeout_reports_timed_out(tmp_path):
    result = await _run("sleep 30", tmp_path, timeout=0.3)

    assert result.timed_out
    assert result.exit_code is None


async def test_cancelling_the_caller_kills_the_process_group(tmp_path):
    pid_file = tmp_path / "pid"
    task = asyncio.create_task(_run(f"sleep 30 & echo $! > {pid_file}; wait", tmp_path))
    while not pid_file.exists() or not pid_file.read_text().strip():
        await asyncio.sleep(0.02)

    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task

    pid = int(pid_file.read_text())
    assert await _wait_dead(pid), f"child {pid} still running after its hook was cancelled"


async def test_missing_working_directory_is_an_error_not_an_exception(tmp_path):
    result = await run_command("true", stdin=b"", cwd=tmp_path / "nope", env=ENV, timeout=5)

    assert result.error is not None
    assert result.exit_code is None


@pytest.mark.parametrize(
    ("configured", "seconds"),
    [
        (None, 60.0),
        (0, 60.0),
        (-5, 60.0),
        (0.5, 0.5),
        (30, 30.0),
        (999, 999.0),
        (1000, 1.0),
        (60000, 60.0),
    ],
)
def test_timeout_values_of_1000_or_more_are_milliseconds(configured, seconds):
    assert timeout_seconds(configured) == seconds


async def _wait_dead(pid: int) -> bool:
    for _ in range(250):
        if not pid_alive(pid):
            return True
        await asyncio.sleep(0.02)
    return False


async def test_background_children_left_in_the_group_are_stopped_when_the_hook_ends(tmp_path):
    """A hook that leaves `sleep &` behind is done when its command exits: its output counts
    (it is not a timeout) and the leftover is stopped."""
    pid_file = tmp_path / "pid"
    command = f"sleep 30 & echo $! > {pid_file}; echo '{{\"ok\": 1}}'"
    result = await _run(command, tmp_path, timeout=20)

    assert not result.timed_out
    assert result.exit_code == 0 and result.stdout == '{"ok": 1}\n'
    assert await _wait_dead(int(pid_file.read_text()))


async def test_a_setsid_child_holding_the_output_does_not_hold_up_the_hook(tmp_path):
    """Regression (#18): a hook that left a `setsid` child kept its pipes open; the hook timed
    out and cairn printed an "Event loop is closed" traceback at exit. The child left the hook's
    process group on purpose, so it keeps running (documented); the hook is read and closed."""
    pid_file = tmp_path / "pid"
    command = f"setsid sleep 30 & echo $! > {pid_file}; echo done"
    try:
        result = await _run(command, tmp_path, timeout=20)

        assert not result.timed_out
        assert result.stdout == "done\n"
    finally:
        if pid_file.exists():
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


async def test_a_timed_out_hooks_setsid_children_are_killed(tmp_path):
    """Regression (issue 24): a timed-out hook's `setsid` child (and a daemon that double-forked
    away from it) outlived cairn, although a timed-out hook's children are killed (docs)."""
    setsid_pid, daemon_pid = tmp_path / "setsid.pid", tmp_path / "daemon.pid"
    command = (
        f"setsid sleep 3600 & echo $! > {setsid_pid}; "
        f"(setsid sh -c 'sleep 3601 & echo $! > {daemon_pid}' &); sleep 30"
    )
    try:
        result = await _run(command, tmp_path, timeout=2)

        assert result.timed_out
        pids = [int(path.read_text()) for path in (setsid_pid, daemon_pid)]
        for pid in pids:
            assert await _wait_dead(pid), f"{pid} outlived its timed-out hook"
    finally:
        for path in (setsid_pid, daemon_pid):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(path.read_text()), signal.SIGKILL)


async def test_a_cancelled_hooks_setsid_child_is_killed(tmp_path):
    """A hook cancelled with its turn is killed with everything it started."""
    pid_file = tmp_path / "pid"
    task = asyncio.create_task(_run(f"setsid sleep 3600 & echo $! > {pid_file}; wait", tmp_path))
    while not pid_file.exists() or not pid_file.read_text().strip():
        await asyncio.sleep(0.02)
    task.cancel()
    with pytest.raises(asyncio.CancelledError):
        await task
    try:
        assert await _wait_dead(int(pid_file.read_text()))
    finally:
        with contextlib.suppress(OSError):
            os.kill(int(pid_file.read_text()), signal.SIGKILL)


async def test_a_spawn_cancelled_after_its_command_started_kills_its_setsid_children(tmp_path):
    """Regression: a cancel that reached spawn_group while asyncio was still connecting the pipes
    SIGKILLed the reaper's process group only; when the event loop was slow enough for the reaper
    to have started the command meanwhile, the command's `setsid` child and double-forked daemon
    (outside the group) went to init and outlived the cancelled spawn."""
    setsid_pid, daemon_pid = tmp_path / "setsid.pid", tmp_path / "daemon.pid"
    command = (
        f"setsid sleep 3600 & echo $! > {setsid_pid}; "
        f"(setsid sh -c 'sleep 3601 & echo $! > {daemon_pid}' &); sleep 30"
    )
    spawning = asyncio.create_task(
        spawn_group(
            lambda: asyncio.SubprocessProtocol(),
            reaped(["bash", "-c", command], "hook"),
            cwd=tmp_path,
            env=ENV,
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    )
    try:
        # The fork happens in one step of the spawn; connecting the pipes takes several more.
        while not _started_by_us(str(setsid_pid)):
            assert not spawning.done(), "the spawn ended before its process could be seen"
            await asyncio.sleep(0)
        # A slow event loop: nothing else on it runs until the command has started its children.
        assert eventually(lambda: _written(setsid_pid) and _written(daemon_pid)), "no children"
        assert not spawning.done()
        spawning.cancel()
        with pytest.raises(asyncio.CancelledError):
            await spawning
        for path in (setsid_pid, daemon_pid):
            pid = int(path.read_text())
            assert await _wait_dead(pid), f"{pid} outlived its cancelled spawn"
    finally:
        for path in (setsid_pid, daemon_pid):
            with contextlib.suppress(OSError, ValueError):
                os.kill(int(path.read_text()), signal.SIGKILL)


def _started_by_us(marker: str) -> bool:
    """Whether a process below this one has ``marker`` on its command line."""
    for pid in descendants(os.getpid()):
        with contextlib.suppress(OSError):
            if marker.encode() in Path(f"/proc/{pid}/cmdline").read_bytes():
                return True
    return False


def _written(pid_file: Path) -> bool:
    with contextlib.suppress(OSError):
        return pid_file.read_text().endswith("\n")
    return False
