from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import time
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.tools.base import ToolContext
from cairn.tools.shell import MAX_SHELL_OUTPUT_CHARS, ShellTool
from cairn.values import replace

from ..process_helpers import DEATH_DEADLINE_SECONDS, pid_alive, wait_until_dead

tool = ShellTool()


async def wait_for_file(path: Path) -> str:
    deadline = time.monotonic() + DEATH_DEADLINE_SECONDS
    while time.monotonic() < deadline:
        if path.exists() and path.read_text().strip():
            return path.read_text().strip()
        await asyncio.sleep(0.02)
    raise AssertionError(f"{path} never appeared")


# Starts a background sleeper in the command's process group and records its pid.
SPAWN_CHILD = "sleep 60 & echo $! > child.pid; sleep 60"


async def test_output_includes_stdout_stderr_and_the_exit_code(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "echo out; echo err >&2; exit 3"}, ctx)

    assert result.error is None
    assert result.output == "out\nerr\n\nExit code: 3"


async def test_stdout_and_stderr_are_interleaved_in_order(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "echo a; echo b >&2; echo c"}, ctx)

    assert result.output is not None
    assert result.output.startswith("a\nb\nc\n")


async def test_runs_in_the_workspace_by_default(workspace: Path, ctx: ToolContext) -> None:
    result = await tool.execute({"command": "pwd -P"}, ctx)

    assert result.output == f"{workspace.resolve()}\n\nExit code: 0"


async def test_directory_argument_runs_in_a_subfolder(workspace: Path, ctx: ToolContext) -> None:
    (workspace / "src").mkdir()

    result = await tool.execute({"command": "pwd -P", "directory": "src"}, ctx)

    assert result.output == f"{(workspace / 'src').resolve()}\n\nExit code: 0"


async def test_directory_outside_the_workspace_is_refused(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "pwd", "directory": "/tmp"}, ctx)

    assert result.error is not None
    assert "outside" in result.error


async def test_missing_directory_is_an_error(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "pwd", "directory": "nope"}, ctx)

    assert result.error is not None
    assert "not an existing folder" in result.error


async def test_no_output_is_stated(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "true"}, ctx)

    assert result.output == "(no output)\n\nExit code: 0"


async def test_stdin_is_closed_so_readers_get_end_of_file(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "cat; echo done"}, ctx)

    assert result.output == "done\n\nExit code: 0"


async def test_timeout_kills_the_whole_process_group(workspace: Path, ctx: ToolContext) -> None:
    result = await tool.execute({"command": SPAWN_CHILD, "timeout": 0.5}, ctx)

    assert result.error is not None
    assert result.error.startswith("Command timed out after 0.5 s")
    child = int((workspace / "child.pid").read_text())
    assert wait_until_dead(child)


async def test_context_shell_timeout_is_the_default(workspace: Path, ctx: ToolContext) -> None:
    ctx.shell_timeout = 0.5

    result = await tool.execute({"command": "sleep 60"}, ctx)

    assert result.error is not None
    assert "timed out after 0.5 s" in result.error


async def test_output_before_the_timeout_is_kept(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "echo progress; sleep 60", "timeout": 0.5}, ctx)

    assert result.error is not None
    assert result.error.endswith("progress\n")


async def test_abort_kills_the_whole_process_group(
    workspace: Path, ctx: ToolContext, abort: AbortController
) -> None:
    running = asyncio.create_task(tool.execute({"command": SPAWN_CHILD}, ctx))
    child = int(await wait_for_file(workspace / "child.pid"))

    abort.abort("user pressed Escape")
    result = await running

    assert result.error is not None
    assert result.error.startswith("Command was cancelled (user pressed Escape)")
    assert wait_until_dead(child)


async def test_cancelling_the_task_kills_the_process_group(
    workspace: Path, ctx: ToolContext
) -> None:
    running = asyncio.create_task(tool.execute({"command": SPAWN_CHILD}, ctx))
    child = int(await wait_for_file(workspace / "child.pid"))

    running.cancel()
    with pytest.raises(asyncio.CancelledError):
        await running

    assert wait_until_dead(child)


# A child in a session of its own (setsid, its parent gone: outside the command's process group),
# deaf to SIGTERM, and one that stays in the group; each records its pid.
ESCAPE_CHILDREN = (
    "setsid sh -c 'trap \"\" TERM; echo $$ > escaped.pid; exec sleep 300' & "
    "sleep 60 & echo $! > child.pid; sleep 60"
)


async def escaped_and_grouped(workspace: Path) -> tuple[int, int]:
    return int(await wait_for_file(workspace / "escaped.pid")), int(
        await wait_for_file(workspace / "child.pid")
    )


@pytest.mark.parametrize(
    "ending", [pytest.param("timeout", marks=pytest.mark.slow), "abort", "cancel"]
)
async def test_a_setsid_child_of_a_command_that_ends_early_is_killed_too(
    workspace: Path, ctx: ToolContext, abort: AbortController, ending: str
) -> None:
    """#24 follow-up: a command stopped by its timeout, an abort or a cancel had its process
    group killed, but what it started with ``setsid`` (another session and group) ran on,
    outside the sandbox, after the call and after cairn."""
    timeout = 5.0 if ending == "timeout" else 120.0  # time for both to start under load
    running = asyncio.create_task(
        tool.execute({"command": ESCAPE_CHILDREN, "timeout": timeout}, ctx)
    )
    escaped, grouped = await escaped_and_grouped(workspace)
    try:
        if ending == "abort":
            abort.abort("user pressed Escape")
        elif ending == "cancel":
            running.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await running
        assert wait_until_dead(grouped)
        assert wait_until_dead(escaped)
    finally:
        for pid in (escaped, grouped):
            with contextlib.suppress(OSError):
                os.kill(pid, signal.SIGKILL)


async def test_background_process_does_not_hold_the_result(
    workspace: Path, ctx: ToolContext
) -> None:
    result = await tool.execute({"command": "sleep 60 & echo $! > bg.pid; echo started"}, ctx)
    child = int((workspace / "bg.pid").read_text())
    try:
        assert result.output == "started\n\nExit code: 0"
        assert pid_alive(child)
    finally:
        os.kill(child, signal.SIGKILL)


async def test_long_output_keeps_head_and_tail_with_a_note(ctx: ToolContext) -> None:
    command = "echo START; head -c 200000 /dev/zero | tr '\\0' 'a'; echo; echo END"

    result = await tool.execute({"command": command}, ctx)

    assert result.output is not None
    assert result.output.startswith("START\n")
    assert result.output.endswith("END\n\nExit code: 0")
    assert "characters of output omitted" in result.output
    assert len(result.output) < MAX_SHELL_OUTPUT_CHARS + 200


async def test_invalid_utf8_output_is_replaced_not_fatal(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "printf 'ok \\377\\n'"}, ctx)

    assert result.output == "ok \ufffd\n\nExit code: 0"


async def test_killed_by_signal_is_reported(ctx: ToolContext) -> None:
    result = await tool.execute({"command": "kill -9 $$"}, ctx)

    assert result.output is not None
    assert result.output.endswith("Exit code: killed by signal 9")


@pytest.mark.parametrize("timeout", [0, -5, "soon"])
async def test_invalid_timeout_is_an_error(ctx: ToolContext, timeout: object) -> None:
    result = await tool.execute({"command": "true", "timeout": timeout}, ctx)

    assert result.error is not None
    assert "`timeout`" in result.error


async def test_missing_command_is_an_error(ctx: ToolContext) -> None:
    result = await tool.execute({}, ctx)

    assert result.error is not None
    assert "`command` is required" in result.error


@pytest.mark.parametrize(
    ("command", "expected"),
    [("git status", None), ("ls -la | grep x", None), ("rm -rf build", "exec"), ("ls > f", "exec")],
)
def test_read_only_commands_need_no_confirmation(
    ctx: ToolContext, command: str, expected: str | None
) -> None:
    assert tool.confirmation({"command": command}, ctx) == expected


def test_title_shows_the_command_and_description() -> None:
    assert (
        tool.title({"command": "make test", "description": "run tests"}) == "make test (run tests)"
    )


# Regression (#18): `env` printed OPENAI_API_KEY and CAIRN_SERVER_TOKEN.


async def test_cairns_own_secrets_are_not_in_the_commands_environment(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPENAI_API_KEY", "sk-live-0123456789")
    monkeypatch.setenv("CAIRN_SERVER_TOKEN", "token-0123456789")
    monkeypatch.setenv("ANTHROPIC_API_KEY", "ant-0123456789")
    monkeypatch.setenv("HARMLESS_SETTING", "kept")

    result = await tool.execute({"command": "env"}, ctx)

    assert result.output is not None
    assert "HARMLESS_SETTING=kept" in result.output
    for secret in ("sk-live-0123456789", "token-0123456789", "ant-0123456789"):
        assert secret not in result.output


async def test_a_variable_holding_the_key_in_use_is_removed_whatever_its_name(
    ctx: ToolContext,
) -> None:
    from cairn.tools.environment import command_environment

    environment = command_environment(
        {"MY_KEY": "sk-from-settings-123", "PATH": os.environ["PATH"], "OTHER": "x"},
        secrets=["sk-from-settings-123"],
    )
    result = await tool.execute(
        {"command": "env"}, replace(ctx, environment=environment)
    )

    assert result.output is not None
    assert "sk-from-settings-123" not in result.output and "OTHER=x" in result.output


async def test_the_session_database_url_is_not_in_the_commands_environment(
    ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: ``cairn serve --database`` read ``CAIRN_DATABASE_URL`` (every tenant's
    sessions, with the database password), and every shell command and hook saw it."""
    monkeypatch.setenv("CAIRN_DATABASE_URL", "postgresql://cairn:pw-0123456789@db/sessions")

    result = await tool.execute({"command": "env"}, ctx)

    assert result.output is not None
    assert "pw-0123456789" not in result.output


def test_named_secrets_can_be_passed_on_purpose() -> None:
    from cairn.tools.environment import command_environment

    env = command_environment(
        {"OPENAI_API_KEY": "sk-0123456789", "CAIRN_SERVER_TOKEN": "t-0123456789"},
        secrets=["sk-0123456789"],
        keep=["OPENAI_API_KEY"],
    )

    assert env == {"OPENAI_API_KEY": "sk-0123456789"}


async def test_a_command_run_unasked_cannot_be_hijacked_through_path(
    workspace: Path, ctx: ToolContext, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A read-only `ls` runs unasked, so it must be the system's ls: PATH entries that are
    relative, empty, or inside the workspace (a repository's own `bin/`, `node_modules/.bin`)
    are left out of its PATH."""
    fake = workspace / "bin"
    fake.mkdir()
    (fake / "ls").write_text("#!/bin/sh\ntouch hijacked\n")
    (fake / "ls").chmod(0o755)
    monkeypatch.setenv("PATH", f"bin::{fake}:{os.environ['PATH']}")
    assert tool.confirmation({"command": "ls"}, ctx) is None

    result = await tool.execute({"command": "ls"}, replace(ctx, approval="unasked"))

    assert result.error is None
    assert not (workspace / "hijacked").exists()
