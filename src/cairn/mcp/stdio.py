"""The stdio transport: a child process speaking newline-delimited JSON-RPC.

cairn runs its own instead of the SDK's ``stdio_client`` for what a coding agent needs around
it: the child's PID and exit status (shown in ``/mcp``), the tail of its stderr (the reason a
server failed), lines that are not JSON-RPC skipped with a warning instead of ending the
session, and a shutdown that leaves no process behind: stdin closed, then SIGTERM, then SIGKILL
to everything the child started (it runs under a subreaper, :mod:`cairn.hooks.reaper`, so a
``setsid`` or double-forked process cannot slip away), an exit hook for anything still running,
and, when cairn is killed outright, the subreaper ends it all by itself.

Reading stays linear however a server writes: lines are split as chunks arrive (a 50 MB result
is not rescanned per chunk; parsing it still holds the interpreter for a moment, in any thread),
a line nested too deeply for the parser is an error answer for its request (not a dead reader),
and a notification or request of the server that cairn cannot read is one warning line naming the
server and what was wrong (not the SDK's page of validation errors).
"""

from __future__ import annotations

import atexit
import contextlib
import errno
import json
import os
import re
import signal
import subprocess
from collections import deque
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path

import anyio
import anyio.abc
import mcp.types as types
from anyio.streams.memory import MemoryObjectReceiveStream, MemoryObjectSendStream
from mcp.shared.message import SessionMessage
from pydantic import ValidationError

from cairn.debug_log import get_logger

__all__ = ["CLOSE_GRACE_SECONDS", "MALFORMED_RESPONSE", "StdioProcess", "open_stdio"]

CLOSE_GRACE_SECONDS = 2.0  # after stdin closes, then again after SIGTERM, before the next step
STDERR_TAIL_LINES = 20  # stderr lines kept to explain a failure
MAX_LINE_BYTES = 64 * 1024 * 1024  # a longer stdout line is not a message: it is skipped
MALFORMED_RESPONSE = -32098  # the error cairn answers itself for a malformed response line
# The request id of a line too deep to parse, from its top level (before any nested value).
_TOP_LEVEL_ID = re.compile(rb'"id"\s*:\s*(-?\d{1,18}|"(?:[^"\\]|\\.){0,256}")')
_log = get_logger("MCP")
_live_groups: set[int] = set()  # process groups of running servers, killed at interpreter exit


@dataclass
class StdioProcess:
    """What is known about the child: its PID, its stderr tail, and whether it has exited."""

    pid: int
    stderr_tail: deque[str] = field(default_factory=lambda: deque(maxlen=STDERR_TAIL_LINES))
    returncode: int | None = None
    skipped_lines: int = 0
    exited: anyio.Event = field(default_factory=anyio.Event)

    def describe_exit(self) -> str:
        code = self.returncode
        if code is None:
            status = "closed its stdout"
        elif code < 0:
            status = f"was killed by signal {-code}"
        else:
            status = f"exited with code {code}"
        tail = self.last_stderr()
        return f"the server {status}" + (f": {tail}" if tail else "")

    def last_stderr(self) -> str:
        lines = [line for line in self.stderr_tail if line.strip()]
        return " | ".join(lines[-3:])[-400:]


@asynccontextmanager
async def open_stdio(
    command: str,
    args: tuple[str, ...],
    *,
    environ: Mapping[str, str],
    env: Mapping[str, str],
    cwd: Path,
    name: str,
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        StdioProcess,
    ]
]:
    """Start ``command`` and yield the SDK's message streams and the :class:`StdioProcess`.

    The child's environment is ``environ`` (cairn's, without its secrets) plus the server's
    configured ``env``. Raises ``OSError`` when the program cannot be started.
    """
    from cairn.hooks.process import SUBREAPER, reaped

    environment = {**environ, **env}
    # The subreaper says the server's PID on this pipe, or why it could not start it.
    report, report_to = os.pipe() if SUBREAPER else (None, None)
    try:
        process = await anyio.open_process(
            reaped([command, *args], "server", report_to),
            env=environment,
            cwd=str(cwd),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,  # its own group: Ctrl+C in the terminal is cairn's to handle
            pass_fds=() if report_to is None else (report_to,),
        )
    except OSError:
        if report is not None:
            os.close(report)
        raise
    finally:
        if report_to is not None:
            os.close(report_to)
    server_pid = process.pid
    if report is not None:
        try:
            server_pid = await _started(report, command)
        except OSError:
            with anyio.CancelScope(shield=True):
                await _terminate(process, StdioProcess(process.pid))
            raise
    async with _session(process, server_pid, name) as streams:
        yield streams


@asynccontextmanager
async def _session(
    process: anyio.abc.Process, server_pid: int, name: str
) -> AsyncIterator[
    tuple[
        MemoryObjectReceiveStream[SessionMessage | Exception],
        MemoryObjectSendStream[SessionMessage],
        StdioProcess,
    ]
]:
    """The message streams over a started ``process`` (the subreaper, or the server itself)."""
    info = StdioProcess(server_pid)
    _live_groups.add(process.pid)
    to_session, read_stream = anyio.create_memory_object_stream[SessionMessage | Exception](16)
    write_stream, from_session = anyio.create_memory_object_stream[SessionMessage](16)
    try:
        async with anyio.create_task_group() as group:
            reply = write_stream.clone()  # answers to server requests cairn cannot read
            group.start_soon(_read_stdout, process, to_session, reply, info, name)
            group.start_soon(_read_stderr, process, info, name)
            group.start_soon(_write_stdin, process, from_session)
            try:
                yield read_stream, write_stream, info
            finally:
                with anyio.CancelScope(shield=True):
                    await _terminate(process, info)
                group.cancel_scope.cancel()
    finally:
        _live_groups.discard(process.pid)
        for stream in (read_stream, write_stream, to_session, from_session):
            await stream.aclose()


async def _started(report: int, command: str) -> int:
    """The server's PID, as its subreaper reports it; ``OSError`` when it could not start."""
    text = await anyio.to_thread.run_sync(_read_all, report)
    word, _, value = text.strip().partition(" ")
    if word == "pid" and value.isdigit():
        return int(value)
    code = int(value) if word == "error" and value.isdigit() else errno.ENOEXEC
    raise OSError(code, os.strerror(code), command)


def _read_all(fd: int) -> str:
    chunks = []
    try:
        while chunk := os.read(fd, 256):
            chunks.append(chunk)
    finally:
        os.close(fd)
    return b"".join(chunks).decode("ascii", "replace")


async def _read_stdout(
    process: anyio.abc.Process,
    sink: MemoryObjectSendStream[SessionMessage | Exception],
    reply: MemoryObjectSendStream[SessionMessage],
    info: StdioProcess,
    name: str,
) -> None:
    assert process.stdout is not None
    lines = _LineSplitter(info, name)
    try:
        async with sink, reply:
            async for chunk in process.stdout:
                for line in lines.feed(chunk):
                    message = _parse(line, info, name)
                    if message is None:
                        continue
                    problem = _unreadable(message)
                    if problem is None:
                        await sink.send(SessionMessage(message))
                        continue
                    _log.warning(f"MCP server {name} {problem}; it was skipped")
                    refusal = _refusal(message, problem)
                    if refusal is not None:
                        await reply.send(SessionMessage(refusal))
    except (anyio.ClosedResourceError, anyio.BrokenResourceError):
        pass
    finally:
        with anyio.CancelScope(shield=True), anyio.move_on_after(CLOSE_GRACE_SECONDS):
            info.returncode = await process.wait()
        info.exited.set()


class _LineSplitter:
    """Newline-delimited lines from chunks, each byte looked at once; a line longer than
    :data:`MAX_LINE_BYTES` is dropped with a warning (the rest of it too)."""

    def __init__(self, info: StdioProcess, name: str) -> None:
        self._info, self._name = info, name
        self._pieces: list[bytes] = []
        self._size = 0
        self._dropping = False

    def feed(self, chunk: bytes) -> list[bytes]:
        lines: list[bytes] = []
        start = 0
        while (end := chunk.find(b"\n", start)) >= 0:
            if self._dropping:
                self._dropping = False
            else:
                self._pieces.append(chunk[start:end])
                lines.append(b"".join(self._pieces))
            self._pieces, self._size = [], 0
            start = end + 1
        rest = chunk[start:]
        if rest and not self._dropping:
            self._pieces.append(rest)
            self._size += len(rest)
            if self._size > MAX_LINE_BYTES:
                self._info.skipped_lines += 1
                _log.warning(f"MCP server {self._name}: a stdout line over 64 MiB was skipped")
                self._pieces, self._size, self._dropping = [], 0, True
        return lines


def _parse(line: bytes, info: StdioProcess, name: str) -> types.JSONRPCMessage | None:
    text = line.strip()
    if not text:
        return None
    try:
        return types.JSONRPCMessage.model_validate_json(text)
    except ValueError as exc:
        if "recursion limit exceeded" in str(exc):
            return _answer_to_deep(text, name)
    answer = _answer_to_malformed(text)
    if answer is not None:
        _log.warning(f"MCP server {name} sent a malformed response: {text[:200]!r}")
        return answer
    info.skipped_lines += 1
    _log.warning(f"MCP server {name} printed a line that is not JSON-RPC: {text[:200]!r}")
    return None


def _answer_to_deep(text: bytes, name: str) -> types.JSONRPCMessage | None:
    """A line nested too deeply to parse: an error answer for the request its top level names
    (nothing when it names none)."""
    head = text[1:]
    cut = min((i for i in (head.find(b"{"), head.find(b"[")) if i >= 0), default=len(head))
    found = _TOP_LEVEL_ID.search(head[:cut])
    _log.warning(f"MCP server {name} sent a message nested too deeply to read ({len(text)} bytes)")
    if found is None:
        return None
    raw = found.group(1)
    ident: int | str = json.loads(raw) if raw.startswith(b'"') else int(raw)
    error = types.ErrorData(
        code=MALFORMED_RESPONSE, message="the answer is nested too deeply to read"
    )
    return types.JSONRPCMessage(types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))


def _unreadable(message: types.JSONRPCMessage) -> str | None:
    """What is wrong with a notification or request of the server that the SDK could not read
    (it would log every validation error, many lines, and drop it); ``None`` when it can."""
    root = message.root
    shape: type[types.ServerNotification] | type[types.ServerRequest]
    if isinstance(root, types.JSONRPCNotification):
        kind, shape = "notification", types.ServerNotification
    elif isinstance(root, types.JSONRPCRequest):
        kind, shape = "request", types.ServerRequest
    else:
        return None
    data = root.model_dump(by_alias=True, mode="json", exclude_none=True)
    try:
        shape.model_validate(data)
    except ValidationError as exc:
        errors = exc.errors()
        other_methods = {
            e["loc"][0]
            for e in errors
            if e["type"] == "literal_error" and e["loc"][1:] == ("method",)
        }
        matching = [e for e in errors if e["loc"][0] not in other_methods]
        if not matching:
            return f"sent a {kind} cairn does not know ({root.method})"
        first = matching[0]
        where = ".".join(str(part) for part in first["loc"][1:])
        return f"sent a {kind} cairn cannot read ({root.method}: {where}: {first['msg']})"
    return None


def _refusal(message: types.JSONRPCMessage, problem: str) -> types.JSONRPCMessage | None:
    """The error answer to a server request cairn cannot read (a notification needs none)."""
    root = message.root
    if not isinstance(root, types.JSONRPCRequest):
        return None
    error = types.ErrorData(code=types.INVALID_PARAMS, message=f"The server {problem}.")
    return types.JSONRPCMessage(types.JSONRPCError(jsonrpc="2.0", id=root.id, error=error))


def _answer_to_malformed(text: bytes) -> types.JSONRPCMessage | None:
    """A line that names a request's id but is no valid response, as an error response for
    that request: the caller learns at once instead of waiting for its timeout."""
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    if not isinstance(data, dict) or "method" in data:
        return None
    ident = data.get("id")
    if isinstance(ident, bool) or not isinstance(ident, int | str):
        return None
    shape = types.JSONRPCError if "error" in data else types.JSONRPCResponse
    try:
        shape.model_validate(data)
        problem = "not a JSON-RPC response"
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        problem = f"{where}: {first['msg']}" if where else first["msg"]
    error = types.ErrorData(code=MALFORMED_RESPONSE, message=problem)
    return types.JSONRPCMessage(types.JSONRPCError(jsonrpc="2.0", id=ident, error=error))


async def _read_stderr(process: anyio.abc.Process, info: StdioProcess, name: str) -> None:
    assert process.stderr is not None
    pending = b""
    with contextlib.suppress(anyio.ClosedResourceError, anyio.BrokenResourceError):
        async for chunk in process.stderr:
            *lines, pending = (pending + chunk).split(b"\n")
            for raw in lines:
                line = raw.decode("utf-8", "replace").rstrip()
                info.stderr_tail.append(line)
                _log.debug(f"MCP server {name} stderr: {line}")
            pending = pending[-4096:]
    if pending.strip():
        info.stderr_tail.append(pending.decode("utf-8", "replace").rstrip())


async def _write_stdin(
    process: anyio.abc.Process, source: MemoryObjectReceiveStream[SessionMessage]
) -> None:
    assert process.stdin is not None
    with contextlib.suppress(
        anyio.ClosedResourceError, anyio.BrokenResourceError, BrokenPipeError, ConnectionError
    ):
        async with source:
            async for message in source:
                data = message.message.model_dump_json(by_alias=True, exclude_none=True)
                await process.stdin.send((data + "\n").encode())


async def _terminate(process: anyio.abc.Process, info: StdioProcess) -> None:
    """Close stdin (the MCP way to ask a stdio server to exit), then escalate to the group."""
    if process.stdin is not None:
        with contextlib.suppress(Exception):
            await process.stdin.aclose()
    for sig in (None, signal.SIGTERM, signal.SIGKILL):
        if sig == signal.SIGKILL:
            _kill_everything(process.pid)
        elif sig is not None:
            _signal_group(process.pid, sig)
        with anyio.move_on_after(CLOSE_GRACE_SECONDS):
            info.returncode = await process.wait()
            _signal_group(process.pid, signal.SIGKILL)  # children it left in its group
            return


def _signal_group(pid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, sig)


def _kill_everything(pid: int) -> None:
    from cairn.hooks.process import kill_everything

    kill_everything(pid)


@atexit.register
def _kill_leftovers() -> None:
    """A process that exits without closing its servers (an unhandled error) still kills them."""
    for pid in list(_live_groups):
        _kill_everything(pid)
