"""The MCP servers of a runtime and the view one session has of them.

:class:`McpManager` (one per runtime) owns the connections of the configured servers; every
session of the runtime shares them. :class:`SessionMcp` is what one session sees: the runtime's
servers, overlaid with the servers its client passed in (an editor's ``session/new``, a daemon
client's ``POST /session``), which win a name clash and are closed with the session. It turns
what the servers offer into cairn tools with stable names and into slash commands.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.debug_log import get_logger
from cairn.mcp.config import ProxySettings, ServerConfig
from cairn.mcp.connection import McpConnection, ServerStatus
from cairn.mcp.names import NameAllocator, qualified_name
from cairn.mcp.tools import ListMcpResourcesTool, McpTool, ReadMcpResourceTool

if TYPE_CHECKING:
    import mcp.types as types

    from cairn.mcp.tool_cache import CachedTool
    from cairn.tools.base import Tool

__all__ = ["McpManager", "McpPrompt", "SessionMcp"]

_log = get_logger("MCP")


class McpManager:
    """Connections to the configured servers of one runtime, started once, closed on exit."""

    def __init__(
        self,
        servers: Sequence[ServerConfig],
        *,
        cwd: Path,
        environ: Mapping[str, str] | None = None,
        proxy_settings: ProxySettings | None = None,
    ) -> None:
        """``environ``: what stdio servers start with; ``proxy_settings``: where HTTP servers'
        proxy may be set besides the environment (see :class:`McpConnection`)."""
        self._cwd = cwd
        self._listeners: list[Callable[[], None]] = []
        self.connections: list[McpConnection] = [
            McpConnection(
                server,
                cwd=cwd,
                environ=environ,
                on_change=self._notify,
                proxy_settings=proxy_settings,
            )
            for server in servers
        ]
        self._started = False
        self._kept: dict[str, int] = {}  # server -> the generation whose tools were kept
        self._cached: dict[str, list[CachedTool] | None] = {}  # server -> its last start's tools

    def start(self) -> None:
        """Connect every enabled server in the background (once)."""
        if self._started:
            return
        asyncio.get_running_loop()  # RuntimeError outside a loop: nothing is marked started
        self._started = True
        for connection in self.connections:
            connection.start()

    def add_listener(self, listener: Callable[[], None]) -> Callable[[], None]:
        self._listeners.append(listener)
        return lambda: self._listeners.remove(listener) if listener in self._listeners else None

    def _notify(self) -> None:
        self._keep_tool_lists()
        for listener in list(self._listeners):
            listener()

    def _keep_tool_lists(self) -> None:
        """A server that connected (or whose list changed) keeps its tools for the next start."""
        from cairn.mcp.tool_cache import keep_tools

        for connection in self.connections:
            generation = connection.generation
            if connection.status == "connected" and self._kept.get(connection.name) != generation:
                self._kept[connection.name] = generation
                keep_tools(connection.config, self._cwd, connection.tools)

    def cached_tools(self, connection: McpConnection) -> list[CachedTool]:
        """The tools ``connection``'s server offered when it last connected (read once)."""
        if connection.name not in self._cached:
            from cairn.mcp.tool_cache import cached_tools

            self._cached[connection.name] = cached_tools(connection.config, self._cwd)
        return self._cached[connection.name] or []

    async def aclose(self) -> None:
        await asyncio.gather(*(c.aclose() for c in self.connections), return_exceptions=True)


@dataclass(frozen=True)
class McpPrompt:
    """An MCP prompt as the slash command ``/mcp__<server>__<prompt>``."""

    command: str
    connection: McpConnection
    prompt: types.Prompt

    @property
    def description(self) -> str:
        return self.prompt.description or f"MCP prompt {self.prompt.name} of {self.connection.name}"

    @property
    def hint(self) -> str | None:
        names = [a.name for a in self.prompt.arguments or []]
        return " ".join(names) or None

    def arguments(self, text: str) -> dict[str, str]:
        """``key=value`` pairs by name, other words by position; the last takes the rest."""
        declared = [a.name for a in self.prompt.arguments or []]
        named: dict[str, str] = {}
        positional: list[str] = []
        for word in text.split():
            key, sep, value = word.partition("=")
            if sep and key in declared:
                named[key] = value
            else:
                positional.append(word)
        free = [name for name in declared if name not in named]
        for index, name in enumerate(free):
            if index >= len(positional):
                break
            named[name] = (
                " ".join(positional[index:]) if index == len(free) - 1 else positional[index]
            )
        return named

    def missing(self, args: dict[str, str]) -> list[str]:
        return [a.name for a in self.prompt.arguments or [] if a.required and a.name not in args]


class SessionMcp:
    """The MCP servers one session uses: the runtime's plus its client's (client wins)."""

    def __init__(
        self,
        shared: McpManager | None,
        own: Sequence[ServerConfig],
        *,
        cwd: Path,
        environ: Mapping[str, str] | None = None,
        proxy_settings: ProxySettings | None = None,
    ) -> None:
        self._shared = shared
        self.own = McpManager(own, cwd=cwd, environ=environ, proxy_settings=proxy_settings)
        self._changed = asyncio.Event()
        self._removers = [m.add_listener(self._changed.set) for m in self._managers()]
        self._cache: tuple[tuple[int, ...], list[Tool]] | None = None
        self._reported: set[str] = set()
        self.created = time.monotonic()

    def _managers(self) -> list[McpManager]:
        return [m for m in (self._shared, self.own) if m is not None]

    def start(self) -> None:
        for manager in self._managers():
            manager.start()

    @property
    def connections(self) -> list[McpConnection]:
        """In configuration order: the runtime's servers, then the client's."""
        own_names = {c.name for c in self.own.connections}
        shared = self._shared.connections if self._shared is not None else []
        return [c for c in shared if c.name not in own_names] + list(self.own.connections)

    @property
    def generation(self) -> tuple[int, ...]:
        return tuple(c.generation for c in self.connections)

    def statuses(self) -> list[ServerStatus]:
        return [c.snapshot() for c in self.connections]

    async def wait_for_discovery(self, timeout: float) -> list[str]:
        """Wait (at most ``timeout`` s) for servers to settle; the names still connecting."""
        pending = [c for c in self.connections if not c.settled]
        if pending:
            await asyncio.wait(
                [asyncio.ensure_future(c.wait_ready()) for c in pending], timeout=timeout
            )
        return [c.name for c in self.connections if not c.settled]

    def unreported_failures(self) -> list[ServerStatus]:
        """Servers that failed since the last call (each reported once per session)."""
        found = []
        for status in self.statuses():
            key = f"{status.name}:{status.error}"
            if status.status == "failed" and key not in self._reported:
                self._reported.add(key)
                found.append(status)
        return found

    def tools(self, taken: Iterable[str]) -> list[Tool]:
        """The tools of every usable server, named ``mcp__<server>__<tool>``, plus the resource
        tools when a server has resources. ``taken``: names of built-in tools. A server still
        connecting offers the tools it offered when it last connected (a call waits for it)."""
        generation = self.generation
        if self._cache is not None and self._cache[0] == generation:
            return self._cache[1]
        allocator = NameAllocator(taken)
        tools: list[Tool] = []
        with_resources: list[McpConnection] = []
        for connection in self.connections:
            for tool in self._offered(connection):
                if connection.config.offers(tool.name):
                    name = allocator.allocate(connection.name, tool.name)
                    tools.append(McpTool(connection, tool, name))
            usable = _offers_tools(connection)
            if usable and (connection.resources or connection.resource_templates):
                with_resources.append(connection)
        if with_resources:
            tools += [ListMcpResourcesTool(with_resources), ReadMcpResourceTool(with_resources)]
        self._cache = (generation, tools)
        return tools

    def _offered(self, connection: McpConnection) -> Sequence[types.Tool | CachedTool]:
        if _offers_tools(connection):
            return connection.tools
        if connection.status == "connecting":
            return self._manager_of(connection).cached_tools(connection)
        return []

    def _manager_of(self, connection: McpConnection) -> McpManager:
        if connection in self.own.connections or self._shared is None:
            return self.own
        return self._shared

    def waiting_with_tools(self) -> list[str]:
        """Servers still connecting whose tools from their last start are offered."""
        return [
            c.name
            for c in self.connections
            if c.status == "connecting" and self._manager_of(c).cached_tools(c)
        ]

    def prompts(self) -> list[McpPrompt]:
        found: list[McpPrompt] = []
        seen: set[str] = set()
        for connection in self.connections:
            if connection.status != "connected":
                continue
            for prompt in connection.prompts:
                command = qualified_name(connection.name, prompt.name)
                if command not in seen:
                    seen.add(command)
                    found.append(McpPrompt(command, connection, prompt))
        return found

    def find(self, server: str) -> McpConnection | None:
        return next((c for c in self.connections if c.name == server), None)

    async def changed(self) -> None:
        """Wait for a change in any server's status or lists since the last call."""
        await self._changed.wait()
        self._changed.clear()

    async def aclose(self) -> None:
        """Close the client's servers (the runtime's stay up for its other sessions)."""
        for remove in self._removers:
            remove()
        await self.own.aclose()


def _offers_tools(connection: McpConnection) -> bool:
    """Connected, or crashed but restartable on its next use (its last tools stay callable)."""
    if connection.status == "connected":
        return True
    return connection.status == "failed" and connection.restartable
