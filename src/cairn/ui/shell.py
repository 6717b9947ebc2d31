"""``!cmd``: run a shell command in the workspace and show its output (not sent to the model)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.ui.transcript import NoticeView, ShellView

if TYPE_CHECKING:
    from cairn.ui.app import CairnApp

__all__ = ["MAX_SHELL_OUTPUT_CHARS", "ShellResult", "run_shell", "show_shell", "start_shell"]

MAX_SHELL_OUTPUT_CHARS = 64_000  # output kept from one command (the end is kept)
_KILL_GRACE_SECONDS = 2.0  # between SIGTERM and SIGKILL


@dataclass(frozen=True)
class ShellResult:
    command: str
    output: str
    exit_code: int | None  # None: it was stopped (timeout or cancel)
    timed_out: bool = False
    truncated: bool = False


async def run_shell(
    command: str, cwd: Path, *, timeout: float, env: Mapping[str, str] | None = None
) -> ShellResult:
    """Run ``command`` with the user's shell; stdout and stderr together, stdin closed.

    ``env`` is the session's command environment (cairn's secrets dropped); ``None`` = cairn's.
    Cancelling the calling task stops the command's whole process group.
    """
    process = await asyncio.create_subprocess_shell(
        command,
        cwd=cwd,
        env=None if env is None else dict(env),
        stdin=asyncio.subprocess.DEVNULL,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.STDOUT,
        start_new_session=True,
    )
    try:
        data, timed_out = await _collect(process, timeout)
    except asyncio.CancelledError:
        await _stop(process)
        raise
    if timed_out:
        await _stop(process)
    text = data.decode("utf-8", errors="replace")
    truncated = len(text) > MAX_SHELL_OUTPUT_CHARS
    if truncated:
        text = text[-MAX_SHELL_OUTPUT_CHARS:]
    return ShellResult(
        command,
        text,
        None if timed_out else process.returncode,
        timed_out=timed_out,
        truncated=truncated,
    )


async def show_shell(
    view: ShellView, command: str, cwd: Path, *, timeout: float, env: Mapping[str, str]
) -> None:
    """Run ``command`` (:func:`run_shell`) and show its output, exit code and why it stopped
    in ``view``."""
    try:
        result = await run_shell(command, cwd, timeout=timeout, env=env)
    except asyncio.CancelledError:
        view.show("", None, note="cancelled")
        return
    except OSError as exc:
        view.show(str(exc), None, note="could not start")
        return
    notes = []
    if result.timed_out:
        notes.append(f"stopped after {timeout:.0f} s")
    if result.truncated:
        notes.append("only the end of the output is shown")
    view.show(result.output, result.exit_code, note="; ".join(notes))


async def _collect(process: asyncio.subprocess.Process, timeout: float) -> tuple[bytes, bool]:
    assert process.stdout is not None
    chunks: list[bytes] = []
    kept = 0

    async def read() -> None:
        nonlocal kept
        assert process.stdout is not None
        while chunk := await process.stdout.read(65536):
            chunks.append(chunk)
            kept += len(chunk)
            while kept > 4 * MAX_SHELL_OUTPUT_CHARS and len(chunks) > 1:
                kept -= len(chunks.pop(0))  # bound memory: only the tail is shown
        await process.wait()

    try:
        await asyncio.wait_for(read(), timeout)
    except TimeoutError:
        return b"".join(chunks), True
    return b"".join(chunks), False


async def _stop(process: asyncio.subprocess.Process) -> None:
    if process.returncode is not None:
        return
    for sig in (signal.SIGTERM, signal.SIGKILL):
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(process.pid, sig)
        try:
            await asyncio.wait_for(process.wait(), _KILL_GRACE_SECONDS)
            return
        except TimeoutError:
            continue


async def start_shell(app: CairnApp, command: str) -> None:
    """``!cmd`` typed in ``app``: its view in the conversation, the command in the background
    (``app.shell_tasks``: Esc or Ctrl+C cancels it)."""
    if not command:
        await app.transcript.add(NoticeView("warning", "Type a command after !, e.g. !ls"))
        return
    view = ShellView(command)
    await app.transcript.add(view)
    timeout = app.runtime.settings.tools.shell_timeout_seconds
    environment = app.session.workspace.environment
    shown = show_shell(view, command, app.session.cwd, timeout=timeout, env=environment)
    task = asyncio.create_task(shown)
    app.shell_tasks.add(task)
    task.add_done_callback(app.shell_tasks.discard)
