"""The names MCP tools and prompts get: ``mcp__<server>__<tool>``, valid for every provider.

OpenAI-compatible endpoints accept function names matching ``^[a-zA-Z0-9_-]{1,64}$``. Other
characters become ``_``; a name over 64 characters keeps its start and ends in a short hash of
the original server and tool names, so the same tool always gets the same name. Two tools that
would still share a name are told apart the same way, in configuration order.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Iterable

__all__ = [
    "MAX_NAME_LENGTH",
    "MCP_PREFIX",
    "NameAllocator",
    "is_mcp_name",
    "qualified_name",
    "sanitize",
    "server_of",
]

MCP_PREFIX = "mcp__"
MAX_NAME_LENGTH = 64  # the function-name limit of OpenAI-compatible endpoints
_HASH_LENGTH = 8
_INVALID = re.compile(r"[^A-Za-z0-9_-]")


def sanitize(name: str) -> str:
    """``name`` with every character a provider refuses replaced by ``_``."""
    cleaned = _INVALID.sub("_", name)
    return cleaned or "_"


def qualified_name(server: str, tool: str) -> str:
    """``mcp__<server>__<tool>``, sanitised and at most :data:`MAX_NAME_LENGTH` characters."""
    full = f"{MCP_PREFIX}{sanitize(server)}__{sanitize(tool)}"
    if len(full) <= MAX_NAME_LENGTH:
        return full
    return _hashed(full, server, tool)


def is_mcp_name(name: str) -> bool:
    return name.startswith(MCP_PREFIX)


def server_of(name: str) -> str | None:
    """The (sanitised) server part of ``mcp__<server>__<tool>``, else ``None``."""
    if not is_mcp_name(name):
        return None
    server, sep, _ = name[len(MCP_PREFIX) :].partition("__")
    return server if sep else None


class NameAllocator:
    """Hands out unique names in a fixed order; ``taken`` are names already in use (built-ins)."""

    def __init__(self, taken: Iterable[str] = ()) -> None:
        self._used = set(taken)

    def allocate(self, server: str, tool: str) -> str:
        name = qualified_name(server, tool)
        if name in self._used:
            name = _hashed(name, server, tool)
        counter = 2
        base = name
        while name in self._used:  # a hash collision: practically never, but never a clash
            suffix = f"_{counter}"
            name = base[: MAX_NAME_LENGTH - len(suffix)] + suffix
            counter += 1
        self._used.add(name)
        return name


def _hashed(name: str, server: str, tool: str) -> str:
    digest = hashlib.sha256(f"{server}\0{tool}".encode()).hexdigest()[:_HASH_LENGTH]
    keep = MAX_NAME_LENGTH - _HASH_LENGTH - 1
    return f"{name[:keep]}_{digest}"
