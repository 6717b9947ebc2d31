"""Running one hook command: bash in its own process group, JSON on stdin, capped output.

A hook is finished when its command exits. Its output is read until then (and for a moment
after, for what is still in the pipes); then whatever the hook left running in its process group
is stopped (SIGTERM, then SIGKILL), and the pipes are closed. A process that left the group
(``setsid``, a daemon) keeps running, but cannot hold up the turn by keeping the output open. A
hook that outlives its timeout, whose caller is cancelled, or whose cairn goes away (even
killed) is killed with everything it started, ``setsid`` and double-forked processes included:
it runs under a subreaper (:mod:`cairn.hooks.reaper`) that keeps them in its process tree.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_OUTPUT_BYTES",
    "REAPER_SCRIPT",
    "SUBREAPER",
    "CommandResult",
    "kill_everything",
    "reaped",
    "run_command",
    "spawn_group",
    "timeout_seconds",
]

_P = TypeVar("_P", bound=asyncio.SubprocessProtocol)

DEFAULT_TIMEOUT_SECONDS = 60.0  # a hook's time limit when settings give none or a non-positive one
MILLISECONDS_THRESHOLD = 1000  # timeout values from here up are milliseconds (older settings files)
MAX_OUTPUT_BYTES = 1024 * 1024  # stdout and stderr kept per hook; the rest is read and dropped
POST_EXIT_DRAIN_SECONDS = 0.5  # output still read after the command exits
LEFTOVER_GRACE_SECONDS = 1.0  # between SIGTERM and SIGKILL of what the hook left in its group
REAPER_SCRIPT = Path(__file__).with_name("reaper.py")  # run as a plain script, stdlib only
SUBREAPER = sys.platform.startswith("linux")  # elsewhere commands run without the reaper


@dataclass(frozen=True)
class CommandResult:
    """How a hook command ended. ``error`` is set when it could not be started at all."""

    exit_code: int | None = None
    stdout: str = ""
    stderr: str = ""
    timed_out: bool = False
    timeout: float = DEFAULT_TIMEOUT_SECONDS
    truncated: bool = False
    error: str | None = None


def timeout_seconds(value: float | None) -> float:
    """A settings ``timeout`` in seconds: values of 1000 or more are milliseconds."""
    if value is None or value <= 0:
        return DEFAULT_TIMEOUT_SECONDS
    if value >= MILLISECONDS_THRESHOLD:
        return value / 1000
    return float(value)


class _HookProtocol(asyncio.SubprocessProtocol):
    """Collects stdout and stderr (capped) and tells when the command and its pipes end."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.output = {1: bytearray(), 2: bytearray()}
        self.truncated = False
        self.exited: asyncio.Future[None] = loop.create_future()
        self.output_closed: asyncio.Future[None] = loop.create_future()
        self._open = {1, 2}

    def pipe_data_received(self, fd: int, data: bytes) -> None:
        kept = self.output.get(fd)
        if kept is None:
            return
        room = MAX_OUTPUT_BYTES - len(kept)
        if len(data) > room:
            self.truncated = True
        kept += data[: max(room, 0)]

    def pipe_connection_lost(self, fd: int, exc: Exception | None) -> None:
        self._open.discard(fd)
        if not self._open and not self.output_closed.done():
            self.output_closed.set_result(None)

    def process_exited(self) -> None:
        if not self.exited.done():
            self.exited.set_result(None)

    def text(self, fd: int) -> str:
        return self.output[fd].decode("utf-8", errors="replace")


async def spawn_group(
    protocol: Callable[[], _P], argv: list[str], **options: Any
) -> tuple[asyncio.SubprocessTransport, _P]:
    """Start ``argv`` as the leader of a new process group (and session).

    The start is shielded: a cancel that arrives while asyncio connects the pipes would make it
    kill the leader alone and leave its children running; instead the start completes, the
    command is killed with everything it started (:func:`kill_everything`: under the reaper,
    ``setsid`` children of a command already running too), and the cancel goes on.
    ``OSError`` means it could not start.
    """
    loop = asyncio.get_running_loop()
    starting = loop.subprocess_exec(protocol, *argv, start_new_session=True, **options)
    spawn = asyncio.ensure_future(starting)
    try:
        return await asyncio.shield(spawn)
    except asyncio.CancelledError:
        with contextlib.suppress(OSError):
            transport, _ = await spawn
            kill_everything(transport.get_pid())
            transport.close()
        raise


async def run_command(
    command: str, *, stdin: bytes, cwd: Path, env: Mapping[str, str], timeout: float
) -> CommandResult:
    """Run ``command`` with ``bash -c`` in ``cwd``; never raises for the command's own failures."""
    loop = asyncio.get_running_loop()
    try:
        transport, protocol = await spawn_group(
            lambda: _HookProtocol(loop),
            reaped(["bash", "-c", command], "hook"),
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
        )
    except OSError as exc:
        return CommandResult(error=str(exc), timeout=timeout)
    try:
        _feed(transport, stdin)
        try:
            await asyncio.wait_for(asyncio.shield(protocol.exited), timeout)
        except TimeoutError:
            kill_everything(transport.get_pid())
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(protocol.exited), LEFTOVER_GRACE_SECONDS)
            return CommandResult(timed_out=True, timeout=timeout)
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(asyncio.shield(protocol.output_closed), POST_EXIT_DRAIN_SECONDS)
        await _stop_leftovers(transport.get_pid(), protocol)
        return CommandResult(
            exit_code=transport.get_returncode(),
            stdout=protocol.text(1),
            stderr=protocol.text(2),
            timeout=timeout,
            truncated=protocol.truncated,
        )
    except asyncio.CancelledError:
        kill_everything(transport.get_pid())
        raise
    finally:
        transport.close()


def reaped(argv: list[str], mode: str, report_fd: int | None = None) -> list[str]:
    """``argv`` run under the subreaper (:mod:`cairn.hooks.reaper`): ``hook``, ``server`` or
    ``shell`` mode; ``report_fd``: where it writes the command's PID (an fd passed to it).
    Elsewhere than Linux, ``argv`` itself. Start it from the event loop's thread: the reaper's
    parent-death signal comes when the *thread* that started it exits, not the process."""
    if not SUBREAPER:
        return argv
    python = os.path.realpath(sys.executable)
    report = [] if report_fd is None else [str(report_fd)]
    return [python, "-I", "-S", str(REAPER_SCRIPT), mode, str(os.getpid()), *report, "--", *argv]


def kill_everything(pid: int) -> None:
    """SIGKILL what a command run by :func:`reaped` (as ``pid``) started, wherever it went
    (``setsid`` ones too), then its process group."""
    from cairn.hooks.reaper import kill_tree

    kill_tree(pid)
    _kill_group(pid, signal.SIGKILL)


def _feed(transport: asyncio.SubprocessTransport, data: bytes) -> None:
    """Write the event to the hook's stdin and close it (a hook that never reads it may)."""
    pipe = transport.get_pipe_transport(0)
    if pipe is None:
        return
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)  # type: ignore[attr-defined]
        pipe.write_eof()  # type: ignore[attr-defined]


async def _stop_leftovers(pid: int, protocol: _HookProtocol) -> None:
    """What the hook started in its process group and left running is stopped."""
    if not _kill_group(pid, signal.SIGTERM):
        return
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(asyncio.shield(protocol.output_closed), LEFTOVER_GRACE_SECONDS)
    _kill_group(pid, signal.SIGKILL)


def _kill_group(pid: int, signum: signal.Signals) -> bool:
    """Signal the process group; False when nothing is left in it."""
    try:
        os.killpg(pid, signum)
    except (ProcessLookupError, PermissionError):
        return False
    return True
