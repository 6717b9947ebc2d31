"""cairn.testing.mcp: server scripts served over HTTP on a port the server itself picked, over
stdio, and with only the parts of the MCP SDK they use."""

from __future__ import annotations

import socket
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from cairn.mcp.config import ServerConfig
from cairn.mcp.connection import McpConnection
from cairn.testing.mcp import FastMCPServer, pid_alive

from ..mcp.helpers import TOOLS_SERVER, tools_server

pytestmark = pytest.mark.slow


def test_servers_started_together_listen_on_ports_they_picked(tmp_path: Path) -> None:
    """Each server binds a port the kernel gives it and prints it once it listens. (The helper
    used to probe a free port, close it and let the server bind it later: a test in another
    xdist worker could take it in between, or answer in the server's place.)"""
    (tmp_path / "b").mkdir()
    first, second = tools_server(tmp_path), tools_server(tmp_path / "b")
    with first.serve_http() as one, second.serve_http("sse") as two:
        ports = [urlsplit(running.url).port for running in (one, two)]
        for port in ports:
            assert port is not None
            socket.create_connection(("127.0.0.1", port), timeout=10).close()
        pids = [one.pid, two.pid]

    assert ports[0] != ports[1]
    assert (one.url, two.url) == (
        f"http://127.0.0.1:{ports[0]}/mcp",
        f"http://127.0.0.1:{ports[1]}/sse",
    )
    assert not any(pid_alive(pid) for pid in pids)


def test_a_script_that_exits_before_listening_is_an_error_with_its_stderr(tmp_path: Path) -> None:
    server = FastMCPServer(TOOLS_SERVER, env={"MCP_TEST_FAIL_START": "1"})

    with pytest.raises(RuntimeError, match=r"exited with 3: .*told to fail"), server.serve_http():
        pass


def test_the_server_process_imports_only_the_sdk_parts_it_uses() -> None:
    """``import_by_parts`` (cairn's MCP connections use it too): a low-level server's process
    skips the ``mcp`` packages' ``__init__`` (the client, FastMCP, Starlette, rich) and loads
    ``jsonschema`` and ``httpx`` only when used; what the ``__init__`` defines is still there on
    first use."""
    probe = (
        "import sys\n"
        "from cairn.mcp.sdk_imports import import_by_parts\n"
        "import_by_parts()\n"
        "import mcp.types, mcp.server.lowlevel, mcp.server.stdio\n"
        "loaded = [m for m in ('mcp.client.session', 'mcp.server.fastmcp', 'starlette', 'rich',\n"
        "    'jsonschema.validators', 'httpx._client') if m in sys.modules]\n"
        "import httpx, jsonschema\n"
        "from mcp import ClientSession\n"
        "from mcp.server import FastMCP\n"
        "print(loaded, httpx.codes.REQUEST_TIMEOUT, jsonschema.ValidationError.__name__,\n"
        "    ClientSession.__name__, FastMCP.__name__)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[]", "408", "ValidationError", "ClientSession", "FastMCP"]


async def test_a_fastmcp_script_is_served_too(tmp_path: Path) -> None:
    """The test server is a low-level one; a user's FastMCP script runs as before."""
    script = tmp_path / "hello.py"
    script.write_text(
        "from mcp.server.fastmcp import FastMCP\n"
        "app = FastMCP('hello')\n"
        "@app.tool()\n"
        "def greet(name: str) -> str:\n"
        "    '''Greet someone.'''\n"
        "    return f'hello {name}'\n"
    )
    command, *args = FastMCPServer(script).command()
    config = ServerConfig("hello", "stdio", command=command, args=tuple(args))
    connection = McpConnection(config, cwd=tmp_path)
    connection.start()
    try:
        assert await connection.wait_ready(60), connection.error
        result = await connection.call_tool("greet", {"name": "you"}, timeout=30)
    finally:
        await connection.aclose()
    assert result.content[0].text == "hello you"
    assert result.structuredContent == {"result": "hello you"}
