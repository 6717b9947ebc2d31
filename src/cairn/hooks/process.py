"""Running one hook command: bash in its own process group, JSON on stdin, capped output.

A hook that outlives its timeout (or whose caller is cancelled) is killed with its whole process
group, so a script's background children do not linger holding the pipes open.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import signal
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "DEFAULT_TIMEOUT_SECONDS",
    "MAX_OUTPUT_BYTES",
    "CommandResult",
    "run_command",
    "timeout_seconds",
]

DEFAULT_TIMEOUT_SECONDS = 60.0  # a hook's time limit when settings give none or a non-positive one
MILLISECONDS_THRESHOLD = 1000  # timeout values from here up are milliseconds (older settings files)
MAX_OUTPUT_BYTES = 1024 * 1024  # stdout and stderr kept per hook; the rest is read and dropped
_READ_CHUNK = 64 * 1024  # bytes per pipe read


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


async def run_command(
    command: str, *, stdin: bytes, cwd: Path, env: Mapping[str, str], timeout: float
) -> CommandResult:
    """Run ``command`` with ``bash -c`` in ``cwd``; never raises for the command's own failures."""
    try:
        process = await asyncio.create_subprocess_exec(
            "bash",
            "-c",
            command,
            cwd=cwd,
            env=dict(env),
            stdin=asyncio.subprocess.PIPE,
            stdout=asyncio.subprocess.PIPE,
            stderr=asyncio.subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return CommandResult(error=str(exc), timeout=timeout)
    finished = False
    try:
        async with asyncio.timeout(timeout):
            result = await _communicate(process, stdin, timeout)
        finished = True
        return result
    except TimeoutError:
        return CommandResult(timed_out=True, timeout=timeout)
    finally:
        if not finished:
            _kill_group(process)
            await process.wait()


async def _communicate(
    process: asyncio.subprocess.Process, stdin: bytes, timeout: float
) -> CommandResult:
    assert process.stdin and process.stdout and process.stderr
    _, (out, out_cut), (err, err_cut) = await asyncio.gather(
        _feed(process.stdin, stdin),
        _read_capped(process.stdout),
        _read_capped(process.stderr),
    )
    exit_code = await process.wait()
    return CommandResult(
        exit_code=exit_code,
        stdout=out.decode("utf-8", errors="replace"),
        stderr=err.decode("utf-8", errors="replace"),
        timeout=timeout,
        truncated=out_cut or err_cut,
    )


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    # A hook that never reads stdin closes the pipe early; that is its right.
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.write(data)
        await pipe.drain()
    with contextlib.suppress(BrokenPipeError, ConnectionResetError):
        pipe.close()
        await pipe.wait_closed()


async def _read_capped(pipe: asyncio.StreamReader) -> tuple[bytes, bool]:
    """Read to EOF, keeping the first :data:`MAX_OUTPUT_BYTES` (the rest is drained, not kept)."""
    kept = bytearray()
    truncated = False
    while chunk := await pipe.read(_READ_CHUNK):
        room = MAX_OUTPUT_BYTES - len(kept)
        if len(chunk) > room:
            truncated = True
        kept += chunk[: max(room, 0)]
    return bytes(kept), truncated


def _kill_group(process: asyncio.subprocess.Process) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(process.pid, signal.SIGKILL)
