"""cairn.testing.mcp: a FastMCP script served over HTTP on a port the server itself picked."""

from __future__ import annotations

import socket
from pathlib import Path
from urllib.parse import urlsplit

import pytest

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
    assert (one.url, two.url) == (f"http://127.0.0.1:{ports[0]}/mcp", f"http://127.0.0.1:{ports[1]}/sse")
    assert not any(pid_alive(pid) for pid in pids)


def test_a_script_that_exits_before_listening_is_an_error_with_its_stderr(tmp_path: Path) -> None:
    server = FastMCPServer(TOOLS_SERVER, env={"MCP_TEST_FAIL_START": "1"})

    with pytest.raises(RuntimeError, match=r"exited with 3: .*told to fail"), server.serve_http():
        pass
