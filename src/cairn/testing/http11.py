"""Just enough HTTP/1.1 over asyncio streams for the scripted server.

Keep-alive, ``Content-Length`` and chunked request bodies, ``Expect: 100-continue``, JSON and
chunked SSE responses. Parsing our own requests keeps the server fast (no per-request objects
beyond what is recorded) and lets it cut a response off mid-body on purpose.
"""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any

from cairn.testing.request import Headers

__all__ = [
    "MAX_BODY_BYTES",
    "MAX_HEAD_BYTES",
    "HttpError",
    "IncomingRequest",
    "read_request",
    "send_body",
    "send_json",
    "send_stream",
]

MAX_BODY_BYTES = 10 * 1024 * 1024  # larger request bodies are refused with 413
MAX_HEAD_BYTES = 64 * 1024  # request line plus headers; larger heads are refused with 431
_FINAL_CHUNK = b"0\r\n\r\n"


class HttpError(Exception):
    """A request that cannot be read; answer ``status`` and close the connection."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


@dataclass
class IncomingRequest:
    """One request as read off the wire (the body is not read when it is too large)."""

    method: str
    path: str
    headers: Headers
    body: bytes
    received_at: float
    keep_alive: bool
    too_large: bool = False


async def read_request(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter
) -> IncomingRequest | None:
    """Read one request; None when the client closed the connection between requests."""
    try:
        head = await reader.readuntil(b"\r\n\r\n")
    except asyncio.IncompleteReadError:
        return None
    except asyncio.LimitOverrunError as exc:
        raise HttpError(431, "the request head is too large") from exc
    received_at = time.time()
    method, path, version, headers = _parse_head(head)
    body, too_large = await _read_body(reader, writer, headers)
    return IncomingRequest(
        method, path, headers, body, received_at, _keep_alive(version, headers), too_large
    )


def _parse_head(head: bytes) -> tuple[str, str, str, Headers]:
    lines = head.decode("latin-1").lstrip("\r\n").split("\r\n")
    parts = lines[0].split(" ")
    if len(parts) != 3 or not parts[2].startswith("HTTP/1."):
        raise HttpError(400, f"malformed request line: {lines[0][:100]!r}")
    method, target, version = parts
    items: list[tuple[str, str]] = []
    for line in lines[1:]:
        if not line:
            continue
        name, sep, value = line.partition(":")
        if not sep or not name.strip():
            raise HttpError(400, f"malformed header line: {line[:100]!r}")
        items.append((name.strip(), value.strip()))
    return method.upper(), target.split("?", 1)[0], version, Headers(items)


def _keep_alive(version: str, headers: Headers) -> bool:
    connection = headers.get("connection", "").lower()
    if version == "HTTP/1.0":
        return "keep-alive" in connection
    return "close" not in connection


async def _read_body(
    reader: asyncio.StreamReader, writer: asyncio.StreamWriter, headers: Headers
) -> tuple[bytes, bool]:
    """The body, and whether it was refused as too large."""
    if "chunked" in headers.get("transfer-encoding", "").lower():
        _send_continue(writer, headers)
        chunked = await _read_chunked(reader)
        return (b"", True) if chunked is None else (chunked, False)
    raw_length = headers.get("content-length")
    if raw_length is None:
        return b"", False
    if not raw_length.isdigit():
        raise HttpError(400, f"invalid Content-Length: {raw_length!r}")
    length = int(raw_length)
    if length > MAX_BODY_BYTES:
        return b"", True  # not read: the connection closes after the 413
    _send_continue(writer, headers)
    return await reader.readexactly(length), False


def _send_continue(writer: asyncio.StreamWriter, headers: Headers) -> None:
    if headers.get("expect", "").lower() == "100-continue":
        writer.write(b"HTTP/1.1 100 Continue\r\n\r\n")


async def _read_chunked(reader: asyncio.StreamReader) -> bytes | None:
    """A chunked body; None as soon as it exceeds :data:`MAX_BODY_BYTES`."""
    parts: list[bytes] = []
    total = 0
    while True:
        size_line = await reader.readuntil(b"\r\n")
        try:
            size = int(size_line.split(b";", 1)[0].strip(), 16)
        except ValueError as exc:
            raise HttpError(400, "malformed chunked body") from exc
        if size == 0:
            while await reader.readuntil(b"\r\n") != b"\r\n":
                pass  # trailers carry nothing we record
            return b"".join(parts)
        total += size
        if total > MAX_BODY_BYTES:
            return None
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


def _head(status: int, headers: Sequence[tuple[str, str]]) -> bytes:
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = "Unknown"
    merged: dict[str, tuple[str, str]] = {}
    for name, value in headers:
        merged[name.lower()] = (name, value)  # a later header (a reply's own) replaces a default
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{n}: {v}" for n, v in merged.values())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1", "replace")


def _connection(keep_alive: bool) -> tuple[str, str]:
    return ("Connection", "keep-alive" if keep_alive else "close")


async def send_json(
    writer: asyncio.StreamWriter,
    status: int,
    body: Any,
    *,
    keep_alive: bool,
    extra: Sequence[tuple[str, str]] = (),
    head_only: bool = False,
) -> bool:
    """Send a JSON response; returns ``keep_alive`` (whether the connection stays open)."""
    data = json.dumps(body, ensure_ascii=False).encode()
    return await send_body(
        writer, status, data, keep_alive=keep_alive, extra=extra, head_only=head_only
    )


async def send_body(
    writer: asyncio.StreamWriter,
    status: int,
    data: bytes,
    *,
    keep_alive: bool,
    content_type: str = "application/json",
    extra: Sequence[tuple[str, str]] = (),
    head_only: bool = False,
) -> bool:
    """Send ``data`` as the whole body; returns ``keep_alive``."""
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(data))),
        _connection(keep_alive),
        *extra,
    ]
    writer.write(_head(status, headers) + (b"" if head_only else data))
    await writer.drain()
    return keep_alive


async def send_stream(
    writer: asyncio.StreamWriter,
    frames: Iterable[bytes],
    *,
    keep_alive: bool,
    extra: Sequence[tuple[str, str]] = (),
    frame_delay: float = 0.0,
    drop: bool = False,
) -> bool:
    """Send an SSE response, one HTTP chunk per frame.

    Frames that are not a list are read as they are sent (an endless reply's generator: it
    streams until the client hangs up). With ``drop`` the body is left unterminated and False
    is returned, so the caller closes the connection mid-body: the client sees a cut-off stream.
    """
    headers = [
        ("Content-Type", "text/event-stream"),
        ("Cache-Control", "no-cache"),
        ("Transfer-Encoding", "chunked"),
        _connection(keep_alive),
        *extra,
    ]
    writer.write(_head(200, headers))
    chunks = (b"%x\r\n%s\r\n" % (len(frame), frame) for frame in frames)
    if frame_delay > 0 or not isinstance(frames, list):
        for i, chunk in enumerate(chunks):
            if i and frame_delay > 0:
                await asyncio.sleep(frame_delay)
            writer.write(chunk)
            await writer.drain()
    else:
        writer.write(b"".join(chunks))
    if drop:
        await writer.drain()
        return False
    writer.write(_FINAL_CHUNK)
    await writer.drain()
    return keep_alive
