"""Shared pieces of the MCP tests: the test server script and real connections to it."""

from __future__ import annotations

import sys
from pathlib import Path

from cairn.mcp.config import ServerConfig
from cairn.testing.mcp import FastMCPServer

SERVERS = Path(__file__).parent / "servers"
TOOLS_SERVER = SERVERS / "tools_server.py"
RAW_SERVER = SERVERS / "raw_server.py"


def tools_server(tmp_path: Path, **env: str) -> FastMCPServer:
    """The test server, logging to ``tmp_path/server.log`` and recording its PIDs."""
    return FastMCPServer(
        TOOLS_SERVER,
        env={"MCP_TEST_LOG": str(tmp_path / "server.log"), **env},
        pid_file=tmp_path / "pids",
    )


def stdio_config(server: FastMCPServer, name: str = "tools", **fields: object) -> ServerConfig:
    entry = server.stdio_config()
    return ServerConfig(
        name,
        "stdio",
        command=entry["command"],
        args=tuple(entry["args"]),
        env=entry["env"],
        **fields,  # type: ignore[arg-type]
    )


def raw_config(tmp_path: Path, mode: str, name: str = "raw") -> ServerConfig:
    return ServerConfig(
        name,
        "stdio",
        command=sys.executable,
        args=(str(RAW_SERVER), mode),
        env={"MCP_TEST_LOG": str(tmp_path / "raw.log")},
    )


def server_log(tmp_path: Path) -> list[str]:
    path = tmp_path / "server.log"
    return path.read_text().splitlines() if path.exists() else []
