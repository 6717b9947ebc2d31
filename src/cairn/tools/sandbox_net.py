"""``network: loopback`` for the shell sandbox: the host's loopback TCP services, bridged in.

A sandbox with its own network namespace cannot reach the host at all. For ``loopback``, cairn
lists the TCP ports listening on the host's loopback (or on every address) when a command
starts and, for each, serves a Unix socket in a private folder (:class:`LoopbackBridge`) that
connects to the port on the host. The folder is bound into the sandbox, where this module runs
as the command's parent (:mod:`cairn.tools.sandbox_relay`, run as ``python -I -S
sandbox_relay.py <folder> -- <argv>``): it listens on
``127.0.0.1:<port>`` inside the sandbox and relays each connection to the matching socket, then
runs the command and exits with its status. A service that starts listening after the command
started is not reachable; nothing else on the network is.
"""

from __future__ import annotations

import asyncio
import contextlib
import functools
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

__all__ = [
    "INSIDE_FOLDER",
    "MAX_BRIDGED_PORTS",
    "RELAY_SCRIPT",
    "LoopbackBridge",
    "listening_loopback_ports",
]

INSIDE_FOLDER = "/tmp/.cairn-net"  # noqa: S108 - in the sandbox's private /tmp
RELAY_SCRIPT = Path(__file__).with_name("sandbox_relay.py")  # run inside, as a plain script
MAX_BRIDGED_PORTS = 256  # ports bridged into one sandbox (the lowest ones)
_RELAY_CHUNK = 1 << 16
_LISTEN = "0A"  # TCP_LISTEN in /proc/net/tcp
_LOOPBACK_V4 = ("0100007F", "00000000")  # 127.0.0.1 and 0.0.0.0, as /proc/net/tcp writes them
_LOOPBACK_V6 = ("00000000000000000000000001000000", "00000000000000000000000000000000")


def listening_loopback_ports(proc_net: Path = Path("/proc/net")) -> list[int]:
    """TCP ports the host listens on at 127.0.0.1, ::1 or any address, lowest first."""
    ports: set[int] = set()
    for name, loopback in (("tcp", _LOOPBACK_V4), ("tcp6", _LOOPBACK_V6)):
        try:
            lines = (proc_net / name).read_text().splitlines()[1:]
        except OSError:
            continue
        for line in lines:
            fields = line.split()
            if len(fields) < 4 or fields[3] != _LISTEN:
                continue
            address, _, port = fields[1].partition(":")
            if address in loopback:
                with contextlib.suppress(ValueError):
                    ports.add(int(port, 16))
    return sorted(ports)[:MAX_BRIDGED_PORTS]


class LoopbackBridge:
    """Unix sockets in a temp folder, each connected to one host loopback port."""

    def __init__(self, ports: Sequence[int]) -> None:
        self.ports = list(ports)
        self.folder = Path(tempfile.mkdtemp(prefix="cairn-net-"))
        self._servers: list[asyncio.AbstractServer] = []
        self._relays: set[asyncio.Task[None]] = set()

    async def start(self) -> None:
        for port in self.ports:
            serve = functools.partial(self._serve, port=port)
            path = str(self.folder / str(port))
            self._servers.append(await asyncio.start_unix_server(serve, path))

    async def _serve(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, port: int
    ) -> None:
        task = asyncio.current_task()
        if task is not None:
            self._relays.add(task)
        try:
            upstream = await _connect_host(port)
            if upstream is None:
                return
            await _pipe_both(reader, writer, *upstream)
        finally:
            writer.close()
            if task is not None:
                self._relays.discard(task)

    async def aclose(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._relays):
            task.cancel()
        if self._relays:
            await asyncio.gather(*self._relays, return_exceptions=True)
        shutil.rmtree(self.folder, ignore_errors=True)


async def _connect_host(port: int) -> tuple[asyncio.StreamReader, asyncio.StreamWriter] | None:
    for host in ("127.0.0.1", "::1"):
        with contextlib.suppress(OSError):
            return await asyncio.open_connection(host, port)
    return None


async def _pipe_both(
    reader: asyncio.StreamReader,
    writer: asyncio.StreamWriter,
    up_reader: asyncio.StreamReader,
    up_writer: asyncio.StreamWriter,
) -> None:
    try:
        await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
    finally:
        up_writer.close()


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while data := await reader.read(_RELAY_CHUNK):
            writer.write(data)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        writer.close()
