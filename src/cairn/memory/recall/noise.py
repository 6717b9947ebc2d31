"""The recent-tool noise filter: keep tool-usage notes out of Recall while the tool is in use.

When the agent has just used a tool, its live schema is authoritative; a memory that merely
documents how to call that tool (parameter schemas, field mappings, failed-call transcripts) is
noise. A memory about the same tool that carries durable operational context (an owner, a
credential location, a known issue, a workaround) is still worth recalling.

A document is noise when its text mentions an alias of a recently used tool, contains none of
the durable markers and contains at least one usage marker.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from cairn.memory.document import MemoryDoc

__all__ = [
    "DURABLE_MARKERS",
    "MAX_RECENT_TOOL_NAMES_FOR_MEMORY",
    "USAGE_MARKERS",
    "filter_noise",
    "is_noise",
    "remember_tool_name",
    "tool_aliases",
]

MAX_RECENT_TOOL_NAMES_FOR_MEMORY = 20  # completed tool names remembered for the noise filter

# Words that mark a memory as durable operational context, never noise.
DURABLE_MARKERS: tuple[str, ...] = (
    "credential",
    "credentials",
    "escalation",
    "gotcha",
    "gotchas",
    "known issue",
    "known issues",
    "owner",
    "ownership",
    "warning",
    "warnings",
    "workaround",
    "workarounds",
)

# Phrases that mark a memory as tool-usage reference material.
USAGE_MARKERS: tuple[str, ...] = (
    "api docs",
    "api documentation",
    "failed call",
    "failed tool call",
    "failed tool-call",
    "field mapping",
    "field mappings",
    "guessed call",
    "guessed tool",
    "mcp tool",
    "parameter schema",
    "parameter schemas",
    "tool schema",
    "tool schemas",
    "tool usage",
    "usage reference",
)

_MCP_PREFIX = "mcp__"
_MCP_SEPARATOR = "__"
_NAMESPACE_SEPARATOR = "::"
_MCP_MIN_PARTS = 3  # mcp__<server>__<tool>: server and tool names start at part 2


def remember_tool_name(names: list[str], name: str) -> None:
    """Record a completed tool call: move ``name`` to the end and keep the last 20 names."""
    trimmed = name.strip()
    if not trimmed:
        return
    if trimmed in names:
        names.remove(trimmed)
    names.append(trimmed)
    del names[:-MAX_RECENT_TOOL_NAMES_FOR_MEMORY]


def tool_aliases(tool_names: Iterable[str]) -> frozenset[str]:
    """Every lower-cased name a memory might use for one of ``tool_names``.

    ``server::tool`` also yields ``tool``; ``mcp__server__tool`` also yields ``tool`` and
    everything after the server part (``mcp__srv__ns__tool`` → ``ns__tool`` and ``tool``).
    """
    aliases: set[str] = set()
    for raw in tool_names:
        name = raw.strip().lower()
        if not name:
            continue
        aliases.add(name)
        if _NAMESPACE_SEPARATOR in name:
            tail = name.rsplit(_NAMESPACE_SEPARATOR, 1)[1].strip()
            if tail:
                aliases.add(tail)
        if name.startswith(_MCP_PREFIX):
            parts = name.split(_MCP_SEPARATOR)
            if len(parts) >= _MCP_MIN_PARTS:
                aliases.update(p for p in (_MCP_SEPARATOR.join(parts[2:]), parts[-1]) if p)
    return frozenset(aliases)


def is_noise(doc: MemoryDoc, aliases: frozenset[str]) -> bool:
    """True when ``doc`` is usage reference for a recently used tool (see module docstring)."""
    if not aliases:
        return False
    haystack = f"{doc.title} {doc.description} {doc.body}".lower()
    if not any(alias in haystack for alias in aliases):
        return False
    if any(marker in haystack for marker in DURABLE_MARKERS):
        return False
    return any(marker in haystack for marker in USAGE_MARKERS)


def filter_noise(docs: Sequence[MemoryDoc], recent_tools: Sequence[str]) -> list[MemoryDoc]:
    """``docs`` without the noise documents for ``recent_tools`` (aliases derived once)."""
    aliases = tool_aliases(recent_tools)
    if not aliases:
        return list(docs)
    return [doc for doc in docs if not is_noise(doc, aliases)]
