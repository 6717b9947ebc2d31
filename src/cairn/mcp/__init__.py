"""The MCP client: servers from settings, ``.mcp.json`` and clients, as tools, prompts, resources.

Importing this package is cheap: its names load on first use, the MCP SDK is imported by
:mod:`cairn.mcp.connection` and the modules that use it, which load only when at least one
server is configured, and a workspace without servers reads only :mod:`cairn.mcp.sources`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from cairn._lazy import lazy_exports

if TYPE_CHECKING:
    from cairn.mcp.config import (
        McpConfigError,
        ServerConfig,
        collect_servers,
        read_mcp_json,
        servers_from_client,
    )
    from cairn.mcp.names import is_mcp_name, qualified_name
    from cairn.mcp.sdk_imports import import_by_parts

__all__ = [
    "McpConfigError",
    "ServerConfig",
    "collect_servers",
    "import_by_parts",
    "is_mcp_name",
    "qualified_name",
    "read_mcp_json",
    "servers_from_client",
]

__getattr__, __dir__ = lazy_exports(
    __name__,
    {
        "McpConfigError": "config",
        "ServerConfig": "config",
        "collect_servers": "config",
        "read_mcp_json": "config",
        "servers_from_client": "config",
        "is_mcp_name": "names",
        "qualified_name": "names",
        "import_by_parts": "sdk_imports",
    },
    __all__,
)
