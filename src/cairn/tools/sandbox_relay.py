"""Inside a ``network: loopback`` sandbox: relays ``127.0.0.1:<port>`` to the host's port.

Run as a plain script, ``python -I -S sandbox_relay.py <folder> -- <command...>``, as the parent
of the sandboxed command (:mod:`cairn.tools.sandbox_net` serves the other end): for each Unix
socket named by a port number in ``<folder>``, it listens on that port of the sandbox's own
loopback and copies each connection to the socket; then it runs the command and exits with its
status. Standard library and threads only, no package imports: every command of a ``loopback``
sandbox starts it first, so it starts in milliseconds.
"""

from __future__ import annotations

import contextlib
import os
import socket
import subprocess
import sys
import threading
from collections.abc import Sequence

__all__ = ["main"]

RELAY_CHUNK = 1 << 16  # bytes copied per read


def main(args: Sequence[str]) -> int:
    if len(args) < 3 or args[1] != "--":
        sys.stderr.write("usage: python -I -S sandbox_relay.py <folder> -- <command...>\n")
        return 2
    folder, argv = args[0], list(args[2:])
    for name in sorted(os.listdir(folder)):
        if name.isdigit():
            _listen(os.path.join(folder, name), int(name))
    code = subprocess.Popen(argv).wait()
    return 128 - code if code < 0 else code  # killed by a signal: the shell's convention


def _listen(path: str, port: int) -> None:
    server = socket.create_server(("127.0.0.1", port))

    def accept() -> None:
        while True:
            conn, _ = server.accept()
            threading.Thread(target=_relay, args=(conn, path), daemon=True).start()

    threading.Thread(target=accept, daemon=True).start()


def _relay(conn: socket.socket, path: str) -> None:
    upstream = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        upstream.connect(path)
    except OSError:
        conn.close()
        upstream.close()
        return
    back = threading.Thread(target=_copy, args=(upstream, conn), daemon=True)
    back.start()
    _copy(conn, upstream)
    back.join()
    conn.close()
    upstream.close()


def _copy(source: socket.socket, target: socket.socket) -> None:
    try:
        while data := source.recv(RELAY_CHUNK):
            target.sendall(data)
        target.shutdown(socket.SHUT_WR)
    except OSError:
        with contextlib.suppress(OSError):
            target.shutdown(socket.SHUT_RDWR)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
