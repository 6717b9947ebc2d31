"""Newline-delimited JSON-RPC over stdio that answers bad input instead of dropping it.

The SDK's own stdio transport logs and skips a line that is not JSON; a client waiting for an
answer would hang. This transport (the SDK's message-level ``Transport`` seam) answers such a
line with a JSON-RPC error and keeps serving:

- not JSON (or not UTF-8) → ``-32700 Parse error``;
- JSON that is not one message object (a batch, a number, an object without ``method`` or
  ``id``, a non-string method) → ``-32600 Invalid request``;
- a line longer than :data:`MAX_MESSAGE_BYTES`, or params nested absurdly deep → ``-32600``
  and the line is skipped.

Lone surrogates (``"\\ud800"``, valid JSON but not UTF-8) in a message's params become U+FFFD
before the agent sees them, so they can never poison a session or its recording; an ``id`` is
echoed as it came (escaped in the answer), so the client can still match it.

:func:`claim_stdout` takes the process's stdout for protocol messages only: the original file
descriptor is duplicated for the protocol and descriptor 1 is pointed at stderr, so a stray
``print``, a library's log line or a child process can never corrupt the stream.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import stat
import sys
import threading
from collections.abc import Callable
from typing import Any, BinaryIO, Protocol

from cairn.debug_log import get_logger
from cairn.session.boundary import TooDeep, clean_json

__all__ = [
    "INVALID_REQUEST",
    "MAX_MESSAGE_BYTES",
    "PARSE_ERROR",
    "ByteWriter",
    "StdioTransport",
    "claim_stdout",
    "open_stdio_transport",
]

PARSE_ERROR = -32700  # JSON-RPC: the line is not JSON
INVALID_REQUEST = -32600  # JSON-RPC: JSON, but not a request, notification or response
MAX_MESSAGE_BYTES = 64 * 1024 * 1024  # one message (a prompt with embedded files) at most
READ_CHUNK_BYTES = 1024 * 1024  # StreamReader buffer limit; longer lines are read in pieces

_log = get_logger("ACP")


def claim_stdout() -> BinaryIO:
    """Keep fd 1 for the protocol (returned); anything else written to stdout goes to stderr."""
    sys.stdout.flush()
    protocol_fd = os.dup(1)
    os.dup2(2, 1)
    sys.stdout = sys.stderr
    return os.fdopen(protocol_fd, "wb", buffering=0)


def _nothing() -> None:
    return None


class ByteWriter(Protocol):
    def write(self, data: bytes) -> None:
        """Queue ``data`` in order, without waiting; raise ConnectionError once closed."""

    async def drain(self) -> None:
        """Wait while the client is not keeping up."""

    def close(self) -> None:
        """Flush what is queued and release the stream."""


class StdioTransport:
    """JSON-RPC messages over a byte reader and a writer (see the module docstring)."""

    def __init__(
        self,
        reader: asyncio.StreamReader,
        writer: ByteWriter,
        *,
        on_close: Callable[[], None] = _nothing,
        max_message_bytes: int = MAX_MESSAGE_BYTES,
    ) -> None:
        self._reader = reader
        self._writer = writer
        self._on_close = on_close
        self._max_bytes = max_message_bytes
        self._closed = False

    async def send(self, message: dict[str, Any]) -> None:
        if self._closed:
            raise ConnectionError("the ACP connection is closed")
        # Written before the first await: messages leave in the order send() was called.
        self._writer.write(_encode(message))
        await self._writer.drain()

    async def receive(self) -> dict[str, Any] | None:
        while True:
            line = await self._read_line()
            if line is None:
                return None
            message = await self._decode(line)
            if message is not None:
                return message

    async def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        self._writer.close()
        self._on_close()

    async def _decode(self, line: bytes) -> dict[str, Any] | None:
        line = line.strip()
        if not line:
            return None
        try:
            message = json.loads(line)
        except (ValueError, RecursionError) as exc:  # bad JSON, bad UTF-8, absurd nesting
            await self._reply_error(None, PARSE_ERROR, "Parse error", str(exc)[:200])
            return None
        problem = _shape_problem(message)
        if problem is None:
            try:
                return _cleaned(message)
            except TooDeep as exc:
                problem = f"`params` are {exc}"
        request_id = message.get("id") if isinstance(message, dict) else None
        if not isinstance(request_id, str | int) or isinstance(request_id, bool):
            request_id = None
        await self._reply_error(request_id, INVALID_REQUEST, "Invalid request", problem)
        return None

    async def _reply_error(
        self, request_id: str | int | None, code: int, message: str, details: str
    ) -> None:
        _log.warning(f"rejected an ACP message: {message}: {details}")
        error = {"code": code, "message": message, "data": {"details": details}}
        with contextlib.suppress(ConnectionError):
            await self.send({"jsonrpc": "2.0", "id": request_id, "error": error})

    async def _read_line(self) -> bytes | None:
        """The next line; ``b""`` for an over-long line (already answered); ``None`` at EOF."""
        chunks: list[bytes] = []
        size = 0
        while True:
            try:
                chunk = await self._reader.readuntil(b"\n")
                done = True
            except asyncio.LimitOverrunError as exc:
                chunk = await self._reader.readexactly(exc.consumed)
                done = False
            except asyncio.IncompleteReadError as exc:  # EOF: the last line may lack "\n"
                chunk, done = exc.partial, True
                if not chunk and not chunks:
                    return None
            size += len(chunk)
            if size <= self._max_bytes:
                chunks.append(chunk)
            if done:
                break
        if size > self._max_bytes:
            await self._reply_error(
                None, INVALID_REQUEST, "Invalid request", f"message over {self._max_bytes} bytes"
            )
            return b""
        return b"".join(chunks)


def _encode(message: dict[str, Any]) -> bytes:
    text = json.dumps(message, separators=(",", ":"), ensure_ascii=False) + "\n"
    try:
        return text.encode("utf-8")
    except UnicodeEncodeError:  # a lone surrogate (an id the client sent): JSON escapes it
        return (json.dumps(message, separators=(",", ":"), ensure_ascii=True) + "\n").encode()


def _cleaned(message: dict[str, Any]) -> dict[str, Any]:
    """Everything but the ``id`` made safe (:func:`clean_json`); the id is echoed as it came,
    so the client can match the answer to its request."""
    cleaned = {k: v for k, v in message.items() if k != "id"}
    cleaned = clean_json(cleaned)
    if "id" in message:
        cleaned["id"] = message["id"]
    return dict(cleaned)


def _shape_problem(message: Any) -> str | None:
    if isinstance(message, list):
        return "JSON-RPC batches are not supported; send one message per line"
    if not isinstance(message, dict):
        return f"a message must be a JSON object, not {type(message).__name__}"
    if "method" in message:
        if not isinstance(message["method"], str):
            return "`method` must be a string"
        if "params" in message and not isinstance(message["params"], dict | list | None):
            return "`params` must be an object"
        return None
    if "id" not in message:
        return "a message needs a `method` (request or notification) or an `id` (response)"
    return None


async def open_stdio_transport(stdin: BinaryIO, stdout: BinaryIO) -> StdioTransport:
    """A transport over the given binary stdin and (claimed) stdout."""
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader(limit=READ_CHUNK_BYTES)
    on_close: Callable[[], None] = _nothing
    if not _pollable(stdin):  # /dev/null, a regular file: epoll refuses them
        _feed_in_thread(loop, reader, stdin)
    else:
        try:
            read_pipe, _ = await loop.connect_read_pipe(
                lambda: asyncio.StreamReaderProtocol(reader), stdin
            )
            on_close = read_pipe.close
        except (ValueError, OSError):  # not a pipe after all: read it in a thread
            _feed_in_thread(loop, reader, stdin)
    writer: ByteWriter
    try:
        transport, protocol = await loop.connect_write_pipe(_DrainProtocol, stdout)
        writer = _PipeWriter(transport, protocol)
    except (ValueError, OSError):
        writer = _BlockingWriter(stdout)
    return StdioTransport(reader, writer, on_close=on_close)


def _pollable(stream: BinaryIO) -> bool:
    """A pipe, a socket or a terminal: what the event loop can wait on."""
    try:
        mode = os.fstat(stream.fileno()).st_mode
        return stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode) or os.isatty(stream.fileno())
    except (OSError, ValueError):
        return False


class _DrainProtocol(asyncio.BaseProtocol):
    def __init__(self) -> None:
        self._resumed: asyncio.Event = asyncio.Event()
        self._resumed.set()
        self.lost = False

    def pause_writing(self) -> None:
        self._resumed.clear()

    def resume_writing(self) -> None:
        self._resumed.set()

    def connection_lost(self, exc: Exception | None) -> None:
        self.lost = True
        self._resumed.set()

    async def wait_writable(self) -> None:
        await self._resumed.wait()


class _PipeWriter:
    def __init__(self, transport: asyncio.WriteTransport, protocol: _DrainProtocol) -> None:
        self._transport = transport
        self._protocol = protocol

    def write(self, data: bytes) -> None:
        if self._protocol.lost or self._transport.is_closing():
            raise ConnectionError("the client closed the ACP stream")
        self._transport.write(data)

    async def drain(self) -> None:
        await self._protocol.wait_writable()

    def close(self) -> None:
        self._transport.close()  # asyncio still writes out what is buffered


class _BlockingWriter:
    """For a stdout that is a regular file: writes are quick and never wait for a reader."""

    def __init__(self, stdout: BinaryIO) -> None:
        self._stdout = stdout

    def write(self, data: bytes) -> None:
        try:
            self._stdout.write(data)
            self._stdout.flush()
        except (OSError, ValueError) as exc:
            raise ConnectionError(f"cannot write to the ACP client: {exc}") from exc

    async def drain(self) -> None:
        return None

    def close(self) -> None:
        with contextlib.suppress(OSError, ValueError):
            self._stdout.flush()


def _feed_in_thread(
    loop: asyncio.AbstractEventLoop, reader: asyncio.StreamReader, stdin: BinaryIO
) -> None:
    read = getattr(stdin, "read1", stdin.read)

    def pump() -> None:
        try:
            while data := read(READ_CHUNK_BYTES):
                loop.call_soon_threadsafe(reader.feed_data, data)
        except (OSError, ValueError):
            pass
        finally:
            with contextlib.suppress(RuntimeError):  # the loop may already be closed
                loop.call_soon_threadsafe(reader.feed_eof)

    threading.Thread(target=pump, name="cairn-acp-stdin", daemon=True).start()
