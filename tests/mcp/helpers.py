"""Shared pieces of the MCP tests: the test server script and real connections to it."""

from __future__ import annotations

import json
import sys
from pathlib import Path

from cairn.mcp.config import ServerConfig
from cairn.testing.mcp import FastMCPServer

SERVERS = Path(__file__).parent / "servers"
# The first model request waits for MCP servers at most `mcp.discoveryTimeoutMs` (300 ms by
# default), which a server starting on a loaded machine can miss. Tests that expect a server's
# tools in the first request raise the bound; the wait still ends once every server is up.
PATIENT_DISCOVERY = {"discoveryTimeoutMs": 300_000}
TOOLS_SERVER = SERVERS / "tools_server.py"
RAW_SERVER = SERVERS / "raw_server.py"


def tools_server(tmp_path: Path, **env: str) -> FastMCPServer:
    """The test server, logging to ``tmp_path/server.log`` and recording its PIDs."""
    return FastMCPServer(
        TOOLS_SERVER,
        env={"MCP_TEST_LOG": str(tmp_path / "server.log"), **env},
        pid_file=tmp_path / "pids",
    )


def patient_discovery(cairn_home: Path) -> None:
    """User settings in ``cairn_home`` under which the first request waits for MCP servers as
    long as they take to connect (they apply in untrusted folders too)."""
    path = cairn_home / "settings.json"
    settings = json.loads(path.read_text()) if path.exists() else {}
    settings.setdefault("mcp", {}).update(PATIENT_DISCOVERY)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(settings, indent=2))


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


SECRET_NAMES = ["OPENAI_API_KEY", "CAIRN_SERVER_TOKEN", "HOLDS_THE_KEY", "HARMLESS"]
SECRETS_DROPPED = {
    "OPENAI_API_KEY": None,
    "CAIRN_SERVER_TOKEN": None,
    "HOLDS_THE_KEY": None,
    "HARMLESS": "kept",
}  # what a stdio server sees of SECRET_NAMES under with_secrets()


def with_secrets(environ: dict[str, str], key: str) -> dict[str, str]:
    """``environ`` with a daemon token, a variable holding ``key`` and a harmless variable."""
    return {
        **environ,
        "CAIRN_SERVER_TOKEN": "daemon-token-123",
        "HOLDS_THE_KEY": f"Bearer {key}",
        "HARMLESS": "kept",
    }


def reported_environments(tmp_path: Path) -> list[dict[str, str | None]]:
    """What each start of the test server saw of ``MCP_TEST_REPORT_ENV``'s variables."""
    return [json.loads(line[4:]) for line in server_log(tmp_path) if line.startswith("env ")]
