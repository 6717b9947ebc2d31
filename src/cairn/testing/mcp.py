"""Run a FastMCP server script for tests: over stdio (cairn starts it) or HTTP on 127.0.0.1.

A FastMCP script is any Python file that creates a ``FastMCP`` instance (``app = FastMCP(...)``
with ``@app.tool()`` functions); a ``__main__`` block is not needed.

>>> server = FastMCPServer("tests/servers/notes.py")
>>> settings = {"mcpServers": {"notes": server.stdio_config()}}   # cairn starts it
>>> with server.serve_http() as running:                          # this helper starts it
...     settings = {"mcpServers": {"notes": running.config}}      # {"httpUrl": ...}

From a shell: ``python -m cairn.testing.mcp server.py --transport http --port 8123``.
Every process started this way appends its PID to ``pid_file`` (when given), so a test can
check that none outlives the cairn process that used it.
"""

from __future__ import annotations

import argparse
import os
import runpy
import socket
import subprocess
import sys
import time
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

__all__ = ["FastMCPServer", "RunningMcpServer", "main", "pid_alive"]

HTTP_START_TIMEOUT = 30.0  # seconds for a server process to accept connections
_PID_FILE_ENV = "CAIRN_TEST_MCP_PID_FILE"
_APP_NAMES = ("mcp", "app", "server")


@dataclass(frozen=True)
class RunningMcpServer:
    """A server this helper started: its URL, PID and the settings entry that reaches it."""

    url: str
    pid: int
    transport: Literal["http", "sse"]

    @property
    def config(self) -> dict[str, Any]:
        """The ``mcpServers`` entry in the Qwen/Gemini shape."""
        return {"httpUrl": self.url} if self.transport == "http" else {"url": self.url}

    @property
    def acp_config(self) -> dict[str, Any]:
        """The entry as an editor passes it in ACP ``session/new`` (without the name)."""
        return {"type": self.transport, "url": self.url, "headers": []}


class FastMCPServer:
    """A FastMCP server script and how to run it."""

    def __init__(
        self,
        script: str | os.PathLike[str],
        *,
        env: Mapping[str, str] | None = None,
        pid_file: str | os.PathLike[str] | None = None,
    ) -> None:
        self.script = Path(script).resolve()
        self.env = dict(env or {})
        self.pid_file = Path(pid_file) if pid_file is not None else None

    def command(self, transport: str = "stdio", port: int | None = None) -> list[str]:
        args = [sys.executable, "-m", "cairn.testing.mcp", str(self.script)]
        if transport != "stdio":
            args += ["--transport", transport, "--port", str(port)]
        return args

    def stdio_config(self, **extra: Any) -> dict[str, Any]:
        """The ``mcpServers`` entry that has cairn start this script over stdio."""
        command, *args = self.command()
        return {"command": command, "args": args, "env": self._child_env(), **extra}

    def acp_stdio_config(self, name: str) -> dict[str, Any]:
        """The entry as an editor passes it in ACP ``session/new``."""
        command, *args = self.command()
        env = [{"name": k, "value": v} for k, v in self._child_env().items()]
        return {"name": name, "command": command, "args": args, "env": env}

    @contextmanager
    def serve_http(self, transport: Literal["http", "sse"] = "http") -> Iterator[RunningMcpServer]:
        """Run the script as a streamable HTTP (or SSE) server on 127.0.0.1 until the block ends."""
        port = _free_port()
        process = subprocess.Popen(
            self.command(transport, port),
            env={**os.environ, **self._child_env()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
        )
        try:
            _wait_for_port(port, process)
            path = "/mcp" if transport == "http" else "/sse"
            yield RunningMcpServer(f"http://127.0.0.1:{port}{path}", process.pid, transport)
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            if process.stderr is not None:
                process.stderr.close()

    def _child_env(self) -> dict[str, str]:
        env = dict(self.env)
        if self.pid_file is not None:
            env[_PID_FILE_ENV] = str(self.pid_file)
        return env

    def pids(self) -> list[int]:
        """Every PID a process of this server recorded in ``pid_file``."""
        if self.pid_file is None or not self.pid_file.is_file():
            return []
        return [int(line) for line in self.pid_file.read_text().split() if line.isdigit()]


def pid_alive(pid: int) -> bool:
    """The process exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:  # no /proc: whether it exists is all that can be told
        from cairn.memory.store.locks import pid_alive as exists

        return exists(pid)
    return stat.rpartition(")")[2].split()[0] != "Z"


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def _wait_for_port(port: int, process: subprocess.Popen[bytes]) -> None:
    deadline = time.monotonic() + HTTP_START_TIMEOUT
    while time.monotonic() < deadline:
        if process.poll() is not None:
            err = process.stderr.read().decode(errors="replace") if process.stderr else ""
            raise RuntimeError(f"the MCP server exited with {process.returncode}: {err[-800:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return
        except OSError:
            time.sleep(0.05)
    process.kill()
    raise RuntimeError(f"the MCP server did not listen on 127.0.0.1:{port} within 30 s")


def main(argv: list[str] | None = None) -> None:
    """``python -m cairn.testing.mcp SCRIPT [--transport stdio|http|sse] [--port N]``."""
    parser = argparse.ArgumentParser(prog="python -m cairn.testing.mcp")
    parser.add_argument("script", help="a Python file that creates a FastMCP instance")
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    options = parser.parse_args(argv)
    pid_file = os.environ.get(_PID_FILE_ENV)
    if pid_file:
        with open(pid_file, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    app = _load_app(Path(options.script))
    if options.transport == "stdio":
        app.run("stdio")
        return
    app.settings.host = "127.0.0.1"
    app.settings.port = options.port
    app.run("streamable-http" if options.transport == "http" else "sse")


def _load_app(script: Path) -> Any:
    from mcp.server.fastmcp import FastMCP

    sys.path.insert(0, str(script.parent))
    namespace = runpy.run_path(str(script), run_name="cairn_mcp_script")
    for name in _APP_NAMES:
        if isinstance(namespace.get(name), FastMCP):
            return namespace[name]
    found = [value for value in namespace.values() if isinstance(value, FastMCP)]
    if not found:
        raise SystemExit(f"{script}: no FastMCP instance found")
    return found[0]


if __name__ == "__main__":
    main()
