"""Run an MCP server script for tests: over stdio (cairn starts it) or HTTP on 127.0.0.1.

A server script is any Python file that creates a ``FastMCP`` instance (``app = FastMCP(...)``
with ``@app.tool()`` functions) or a low-level ``mcp.server.lowlevel.Server`` with its handlers;
a ``__main__`` block is not needed.

>>> server = FastMCPServer("tests/servers/notes.py")
>>> settings = {"mcpServers": {"notes": server.stdio_config()}}   # cairn starts it
>>> with server.serve_http() as running:                          # this helper starts it
...     settings = {"mcpServers": {"notes": running.config}}      # {"httpUrl": ...}

From a shell: ``python -m cairn.testing.mcp server.py --transport http --port 8123``
(``--port 0``: a free port, printed as the first line on stdout; ``serve_http`` uses that, so
servers of tests run in parallel never race for a port).
Every process started this way appends its PID to ``pid_file`` (when given), so a test can
check that none outlives the cairn process that used it.

The process imports the parts of the SDK its script uses and no more
(:func:`cairn.mcp.sdk_imports.import_by_parts`): the ``mcp`` package's ``__init__`` imports the
client, the server and FastMCP (Starlette, uvicorn, rich) whatever is used, ~0.5 s of CPU that a
low-level server does not need.
"""

from __future__ import annotations

import argparse
import os
import runpy
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from cairn.mcp import import_by_parts

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
    """An MCP server script (FastMCP or a low-level ``Server``) and how to run it."""

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

    def command(
        self,
        transport: str = "stdio",
        port: int | None = None,
        tls: tuple[os.PathLike[str], os.PathLike[str]] | None = None,
    ) -> list[str]:
        args = [sys.executable, "-m", "cairn.testing.mcp", str(self.script)]
        if transport != "stdio":
            args += ["--transport", transport, "--port", str(port)]
        if tls is not None:
            args += ["--certfile", os.fspath(tls[0]), "--keyfile", os.fspath(tls[1])]
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
    def serve_http(
        self,
        transport: Literal["http", "sse"] = "http",
        *,
        tls: tuple[os.PathLike[str], os.PathLike[str]] | None = None,
    ) -> Iterator[RunningMcpServer]:
        """Run the script as a streamable HTTP (or SSE) server on 127.0.0.1 until the block ends;
        over HTTPS with ``tls`` (its certificate and key files, PEM)."""
        process = subprocess.Popen(
            self.command(transport, 0, tls),
            env={**os.environ, **self._child_env()},
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
        )
        try:
            port = _announced_port(process)
            path = "/mcp" if transport == "http" else "/sse"
            scheme = "https" if tls is not None else "http"
            yield RunningMcpServer(f"{scheme}://127.0.0.1:{port}{path}", process.pid, transport)
        finally:
            process.terminate()
            try:
                process.wait(timeout=5)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            for stream in (process.stdout, process.stderr):
                if stream is not None:
                    stream.close()

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


def _announced_port(process: subprocess.Popen[bytes]) -> int:
    """The port a ``--port 0`` server printed once it listens; its stderr if it exits first."""
    stdout = process.stdout
    assert stdout is not None
    lines: list[bytes] = []

    def read_until_the_port() -> None:
        while (line := stdout.readline()) and not line.strip().isdigit():
            pass
        lines.append(line)

    reader = threading.Thread(target=read_until_the_port, daemon=True)
    reader.start()
    reader.join(HTTP_START_TIMEOUT)
    if lines and lines[0]:
        return int(lines[0])
    process.kill()
    process.wait()
    err = process.stderr.read().decode(errors="replace")[-800:] if process.stderr else ""
    if lines:  # end of output: it exited before listening
        raise RuntimeError(f"the MCP server exited with {process.returncode}: {err}")
    raise RuntimeError(f"the MCP server did not listen within {HTTP_START_TIMEOUT:.0f} s: {err}")


def main(argv: list[str] | None = None) -> None:
    """``python -m cairn.testing.mcp SCRIPT [--transport stdio|http|sse] [--port N]
    [--certfile PEM --keyfile PEM]`` (the last two: HTTPS, for a low-level ``Server``)."""
    parser = argparse.ArgumentParser(prog="python -m cairn.testing.mcp")
    parser.add_argument("script", help="a Python file that creates a FastMCP or Server instance")
    parser.add_argument("--transport", choices=("stdio", "http", "sse"), default="stdio")
    parser.add_argument("--port", type=int, default=8000)
    parser.add_argument("--certfile", help="serve HTTPS with this certificate (PEM)")
    parser.add_argument("--keyfile", help="and this key (PEM)")
    options = parser.parse_args(argv)
    tls = (options.certfile, options.keyfile) if options.certfile else None
    pid_file = os.environ.get(_PID_FILE_ENV)
    if pid_file:
        with open(pid_file, "a", encoding="utf-8") as handle:
            handle.write(f"{os.getpid()}\n")
    import_by_parts()  # the SDK's modules a script uses, no more
    app = _load_app(Path(options.script))
    if not _is_fastmcp(app):
        import anyio

        anyio.run(_serve_lowlevel, app, options.transport, options.port, tls)
        return
    if tls is not None:
        raise SystemExit("--certfile: HTTPS is served for a low-level Server script only")
    if options.transport == "stdio":
        app.run("stdio")
        return
    app.settings.host = "127.0.0.1"
    app.settings.port = options.port
    if options.port:
        app.run("streamable-http" if options.transport == "http" else "sse")
        return
    import anyio

    anyio.run(_serve_on_a_free_port, app, options.transport)


def _is_fastmcp(app: Any) -> bool:
    fastmcp = sys.modules.get("mcp.server.fastmcp.server")
    return fastmcp is not None and isinstance(app, fastmcp.FastMCP)


async def _serve_lowlevel(
    app: Any, transport: str, port: int, tls: tuple[str, str] | None = None
) -> None:
    """Serve a low-level ``Server`` over stdio, or HTTP/SSE as FastMCP serves its own (the same
    paths: ``/mcp``, ``/sse`` and ``/messages/``)."""
    if transport == "stdio":
        from mcp.server.stdio import stdio_server

        async with stdio_server() as (read, write):
            await app.run(read, write, app.create_initialization_options())
        return
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", port))
    listener.listen(128)
    if not port:
        print(listener.getsockname()[1], flush=True)
    certfile, keyfile = tls if tls is not None else (None, None)
    config = uvicorn.Config(
        _lowlevel_asgi(app, transport),
        log_level="warning",
        ssl_certfile=certfile,
        ssl_keyfile=keyfile,
    )
    await uvicorn.Server(config).serve(sockets=[listener])


def _lowlevel_asgi(app: Any, transport: str) -> Any:
    from starlette.applications import Starlette
    from starlette.responses import Response
    from starlette.routing import Mount, Route

    if transport == "http":
        from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

        manager = StreamableHTTPSessionManager(app=app)

        class Endpoint:  # an ASGI app, not a request handler, for Starlette's Route
            async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
                await manager.handle_request(scope, receive, send)

        return Starlette(routes=[Route("/mcp", Endpoint())], lifespan=lambda _: manager.run())
    from mcp.server.sse import SseServerTransport

    sse = SseServerTransport("/messages/")

    async def events(request: Any) -> Response:
        async with sse.connect_sse(request.scope, request.receive, request._send) as streams:
            await app.run(streams[0], streams[1], app.create_initialization_options())
        return Response()

    routes = [
        Route("/sse", endpoint=events, methods=["GET"]),
        Mount("/messages/", app=sse.handle_post_message),
    ]
    return Starlette(routes=routes)


async def _serve_on_a_free_port(app: Any, transport: str) -> None:
    """Listen on a port the kernel picks, print it, then serve: no other process can race for
    it between choosing and binding, as with a port probed first and bound later."""
    import uvicorn

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(128)
    print(listener.getsockname()[1], flush=True)
    asgi = app.streamable_http_app() if transport == "http" else app.sse_app()
    config = uvicorn.Config(asgi, log_level=app.settings.log_level.lower())
    await uvicorn.Server(config).serve(sockets=[listener])


def _load_app(script: Path) -> Any:
    sys.path.insert(0, str(script.parent))
    # The script first: one that exits or hangs before it imports the SDK never pays for it.
    namespace = runpy.run_path(str(script), run_name="cairn_mcp_script")
    kinds = [
        module.__dict__[name]
        for module, name in (
            (sys.modules.get("mcp.server.fastmcp.server"), "FastMCP"),
            (sys.modules.get("mcp.server.lowlevel.server"), "Server"),
        )
        if module is not None
    ]  # only what the script imported: FastMCP's import is most of its cost
    for name in _APP_NAMES:
        if kinds and isinstance(namespace.get(name), tuple(kinds)):
            return namespace[name]
    found = [value for value in namespace.values() if kinds and isinstance(value, tuple(kinds))]
    if not found:
        raise SystemExit(f"{script}: no FastMCP or Server instance found")
    return found[0]


if __name__ == "__main__":
    main()
