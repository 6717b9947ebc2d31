"""The MCP client: servers from settings, ``.mcp.json`` and clients, as tools, prompts, resources.

Importing this package is cheap: the MCP SDK is imported by :mod:`cairn.mcp.connection` and the
modules that use it, which load only when at least one server is configured.
"""

from __future__ import annotations

from cairn.mcp.config import (
    McpConfigError,
    ServerConfig,
    collect_servers,
    read_mcp_json,
    servers_from_client,
)
from cairn.mcp.names import is_mcp_name, qualified_name

__all__ = [
    "McpConfigError",
    "ServerConfig",
    "collect_servers",
    "is_mcp_name",
    "qualified_name",
    "read_mcp_json",
    "servers_from_client",
]
