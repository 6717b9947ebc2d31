"""The tool list each MCP server offered when it last connected, kept for the next start.

A server can take seconds to start (``npx`` fetching a package, a JVM); a session does not wait
for it. While it is still connecting, the tools it offered last time are offered in its name,
and a call to one of them waits for the server (:meth:`McpConnection.call_tool`). Once it is
connected its own list replaces them, and is kept again.

The lists live in ``$CAIRN_HOME/mcp-tools/<digest>.json`` (owner-only), one per server as
configured: the digest covers its name, what it runs or reaches (command, arguments,
environment, folder, URL, headers) and the folder it runs in, so a changed configuration never
gets another's tools. A file that cannot be read is no list.
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from cairn.config.paths import cairn_home
from cairn.debug_log import get_logger
from cairn.values import Value

if TYPE_CHECKING:
    import mcp.types as types

    from cairn.mcp.config import ServerConfig

__all__ = ["CACHE_FOLDER", "CachedTool", "cached_tools", "keep_tools"]

CACHE_FOLDER = "mcp-tools"
MAX_CACHE_BYTES = 8 << 20  # a larger file is no list
_log = get_logger("MCP")


class CachedAnnotations(Value):
    title: str | None = None
    readOnlyHint: bool | None = None


class CachedTool(Value):
    """A tool as its server described it (the fields :class:`~cairn.mcp.tools.McpTool` reads)."""

    name: str
    inputSchema: dict[str, Any]
    description: str | None = None
    title: str | None = None
    annotations: CachedAnnotations | None = None

    @classmethod
    def of(cls, entry: Any) -> CachedTool | None:
        """``entry`` as kept, or ``None`` when it is not a tool."""
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            return None
        schema = entry.get("inputSchema")
        notes = entry.get("annotations")
        annotations = None
        if isinstance(notes, dict):
            title = notes.get("title")
            read_only = notes.get("readOnlyHint")
            annotations = CachedAnnotations(
                title if isinstance(title, str) else None,
                read_only if isinstance(read_only, bool) else None,
            )
        return cls(
            entry["name"],
            schema if isinstance(schema, dict) else {"type": "object"},
            _text(entry.get("description")),
            _text(entry.get("title")),
            annotations,
        )


def _text(value: Any) -> str | None:
    return value if isinstance(value, str) else None


def cached_tools(config: ServerConfig, cwd: Path) -> list[CachedTool] | None:
    """The tools ``config``'s server offered when it last connected, or ``None``. Read without
    the MCP SDK, which may still be loading when a session's first request is built."""
    path = _path(config, cwd)
    try:
        if path.stat().st_size > MAX_CACHE_BYTES:
            return None
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or not isinstance(data.get("tools"), list):
        return None
    return [tool for entry in data["tools"] if (tool := CachedTool.of(entry)) is not None]


def keep_tools(config: ServerConfig, cwd: Path, tools: list[types.Tool]) -> None:
    """Keep ``tools`` as ``config``'s list for its next start (best effort)."""
    from cairn.fsutil import atomic_write_text

    path = _path(config, cwd)
    listed: list[dict[str, Any]] = [
        tool.model_dump(mode="json", by_alias=True, exclude_none=True) for tool in tools
    ]
    text = json.dumps({"server": config.name, "tools": listed}, ensure_ascii=False)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write_text(path, text, durable=False)
        os.chmod(path, 0o600)
    except OSError as exc:
        _log.debug(f"MCP server {config.name}: its tool list was not kept ({exc})")


def _path(config: ServerConfig, cwd: Path) -> Path:
    identity = json.dumps([config.name, str(cwd), *map(repr, config.identity())])
    digest = hashlib.sha256(identity.encode("utf-8")).hexdigest()[:32]
    return cairn_home() / CACHE_FOLDER / f"{digest}.json"
