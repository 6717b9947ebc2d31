"""Whether anything in a workspace may configure an MCP server, without reading the servers.

Every start-up asks; :mod:`cairn.mcp.config`, which reads and checks the configurations, is
imported only when the answer is yes (a workspace without servers never loads it).
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.config.paths import project_root

if TYPE_CHECKING:
    from cairn.config.settings import Settings

__all__ = ["MCP_JSON", "may_configure_servers", "mcp_json_path", "project_entries"]

MCP_JSON = ".mcp.json"  # Claude Code's project file of MCP servers


def may_configure_servers(cwd: Path, settings: Settings) -> bool:
    """The settings name a server, the project's settings file has ``mcpServers`` entries (an
    untrusted folder's are left out of the settings but listed) or a ``.mcp.json`` exists."""
    from cairn.config.loader import project_settings_path

    return (
        bool(settings.mcp_servers)
        or mcp_json_path(cwd).is_file()
        or bool(project_entries(project_settings_path(cwd)))
    )


def mcp_json_path(cwd: Path) -> Path:
    return project_root(cwd) / MCP_JSON


def project_entries(path: Path) -> dict[str, Any]:
    """The raw ``mcpServers`` entries of the project settings file (empty if unreadable), under
    the one key the settings read them from."""
    from cairn.config.loader import SettingsError, read_settings_file
    from cairn.config.settings import Settings

    if not path.is_file():
        return {}
    key = Settings.model_fields["mcp_servers"].alias or "mcp_servers"
    try:
        servers = read_settings_file(path).get(key, {})
    except SettingsError:
        return {}
    return dict(servers) if isinstance(servers, dict) else {}
