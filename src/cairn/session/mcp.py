"""What a session does with its MCP servers, the same in every front end.

- servers start in the background when the session is made; the first model request waits
  for them only a short grace (``mcp.discoveryTimeoutMs``, 300 ms): a server still connecting
  then is offered with the tools it had at its last start (a call waits for it), or, without
  such a list, joins the first request after it is ready; the user is told once which are
  still connecting, once when they are ready, and which failed;
- tools are synced into the session's registry before every request (lists change);
- prompts are slash commands ``/mcp__<server>__<prompt> ARGS``; ``/mcp`` shows the servers;
- ``@server:uri`` in a prompt attaches that resource.

Nothing here runs (and the MCP SDK is never imported) when a session has no servers.
"""

from __future__ import annotations

import asyncio
import contextlib
import re
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING

from cairn.content import Part, Text
from cairn.debug_log import get_logger
from cairn.vocabulary.events import EventSink, Notice

if TYPE_CHECKING:
    from cairn.mcp.connection import ServerStatus
    from cairn.mcp.manager import McpPrompt, SessionMcp
    from cairn.session.commands import CommandOutcome, SlashCommand
    from cairn.session.session import Session
    from cairn.tools.registry import ToolRegistry

__all__ = [
    "McpSessionState",
    "describe_servers",
    "prompt_commands",
    "resource_mentions",
]

_MENTION = re.compile(r"(?<![\w@])@(?P<server>[A-Za-z0-9_.-]+):(?P<uri>[^\s]+)")
_log = get_logger("MCP")


class McpSessionState:
    """The session's side of its MCP servers: discovery wait, registry sync, prompt commands,
    notices. ``publish`` offers the prompts as the session's commands whenever they change."""

    def __init__(
        self,
        servers: SessionMcp,
        warnings: list[str],
        publish: Callable[[Sequence[SlashCommand]], Awaitable[None]],
        tell: EventSink | None = None,
    ) -> None:
        """``tell``: where a notice outside a turn goes (a server that became ready)."""
        self.servers = servers
        self._tell = tell
        self._warnings = list(warnings)
        self._publish = publish
        self._published: tuple[str, ...] = ()
        self._follower: asyncio.Task[None] | None = None
        self._waited = False
        self._synced: tuple[int, ...] | None = None
        self._tool_names: list[str] = []
        self._joining: set[str] = set()  # said to be still connecting, not yet said ready

    def start(self) -> None:
        """Connect in the background; without a running loop yet, the first turn does it."""
        with contextlib.suppress(RuntimeError):
            self.servers.start()
            if self._follower is None:
                self._follower = asyncio.ensure_future(self._follow())

    async def _follow(self) -> None:
        while True:
            await self.servers.changed()
            await self.publish_prompts()
            if self._tell is not None:
                await self._now_ready(self._tell)

    async def publish_prompts(self) -> None:
        """Offer the servers' prompts as commands, if the list changed."""
        try:
            commands = prompt_commands(self.servers)
            names = tuple(c.name for c in commands)
            if names != self._published:
                self._published = names
                await self._publish(commands)
        except Exception as exc:  # best-effort: the session goes on without them
            _log.warning(f"offering MCP prompts as commands failed: {exc!r}")

    async def aclose(self) -> None:
        if self._follower is not None:
            self._follower.cancel()
            await asyncio.gather(self._follower, return_exceptions=True)
        await self.servers.aclose()

    async def before_first_request(self, bound_seconds: float, sink: EventSink) -> None:
        """Wait for discovery once (bounded); then report failures not reported yet."""
        try:
            if not self._waited:
                self._waited = True
                self.start()
                pending = await self.servers.wait_for_discovery(bound_seconds)
                await self.publish_prompts()  # a first prompt may be one of them
                for warning in self._warnings:
                    await sink(Notice("warning", warning, "mcp"))
                await self._still_connecting(pending, sink)
            await self._now_ready(sink)
            for status in self.servers.unreported_failures():
                await sink(Notice("warning", f"MCP server {status.name}: {status.error}", "mcp"))
        except Exception as exc:  # discovery is best-effort: the turn goes on without it
            _log.warning(f"MCP discovery failed: {exc!r}")

    async def _still_connecting(self, pending: list[str], sink: EventSink) -> None:
        """Said once: the servers the first request goes without (those offered with their
        last start's tools work already: a call waits for them)."""
        offered = set(self.servers.waiting_with_tools())
        joining = [name for name in pending if name not in offered]
        if not joining:
            return
        self._joining.update(joining)
        names = ", ".join(joining)
        await sink(
            Notice(
                "warning",
                f"MCP server(s) still connecting: {names}; their tools join the first request "
                "after they are ready.",
                "mcp",
            )
        )

    async def _now_ready(self, sink: EventSink) -> None:
        """Said once: a server the first request went without is ready now."""
        for connection in self.servers.connections:
            if connection.name in self._joining and connection.status == "connected":
                self._joining.discard(connection.name)
                count = len(connection.tools)
                await sink(
                    Notice(
                        "info",
                        f"MCP server {connection.name} is ready: its {count} "
                        f"tool{' is' if count == 1 else 's are'} offered from now on.",
                        "mcp",
                    )
                )

    def sync_tools(self, registry: ToolRegistry) -> None:
        """Put the servers' current tools in ``registry`` (cheap when nothing changed)."""
        generation = self.servers.generation
        if generation == self._synced:
            return
        for name in self._tool_names:
            registry.unregister(name)
        builtin = registry.names()
        tools = self.servers.tools(builtin)
        for tool in tools:
            registry.register(tool)
        self._tool_names = [tool.name for tool in tools]
        self._synced = generation

    @property
    def tool_names(self) -> list[str]:
        return list(self._tool_names)


def prompt_commands(servers: SessionMcp) -> tuple[SlashCommand, ...]:
    """Each server prompt as ``/mcp__<server>__<prompt>``."""
    from cairn.session.commands import SlashCommand

    return tuple(
        SlashCommand(p.command, p.description, _prompt_handler(p), p.hint)
        for p in servers.prompts()
    )


def _prompt_handler(
    prompt: McpPrompt,
) -> Callable[[Session, str, EventSink], Awaitable[CommandOutcome]]:
    async def run(session: Session, args: str, sink: EventSink) -> CommandOutcome:
        from cairn.mcp.connection import McpCallError
        from cairn.mcp.results import prompt_text
        from cairn.session.commands import CommandOutcome

        values = prompt.arguments(args)
        missing = prompt.missing(values)
        if missing:
            usage = " ".join(f"<{a.name}>" for a in prompt.prompt.arguments or [])
            return CommandOutcome(
                f"/{prompt.command} needs {', '.join(missing)}. Usage: /{prompt.command} {usage}"
            )
        try:
            result = await prompt.connection.get_prompt(prompt.prompt.name, values)
        except McpCallError as exc:
            return CommandOutcome(f"/{prompt.command} failed: {exc}")
        text = prompt_text(result)
        if not text.strip():
            return CommandOutcome(f"The MCP prompt /{prompt.command} is empty.")
        return CommandOutcome(prompt=text)

    return run


def describe_servers(statuses: list[ServerStatus]) -> str:
    """The ``/mcp`` (and ``cairn mcp list``) listing."""
    if not statuses:
        return "No MCP servers are configured. `cairn mcp add` adds one; see docs/mcp.md."
    lines = [f"MCP servers ({len(statuses)}):"]
    for s in statuses:
        counts = _count(s.tools, "tool")
        if s.prompts:
            counts += ", " + _count(s.prompts, "prompt")
        if s.resources:
            counts += ", " + _count(s.resources, "resource")
        lines.append(f"- {s.name} [{s.transport}, {s.scope}] {s.status}: {counts} — {s.target}")
        if s.error:
            lines.append(f"    {s.error}")
    return "\n".join(lines)


def _count(number: int, noun: str) -> str:
    return f"{number} {noun}{'' if number == 1 else 's'}"


async def resource_mentions(servers: SessionMcp, text: str, sink: EventSink) -> list[Part]:
    """The resources ``@server:uri`` mentions in ``text`` name, as parts to send with it."""
    from cairn.mcp.tools import read_resource

    parts: list[Part] = []
    seen: set[tuple[str, str]] = set()
    for match in _MENTION.finditer(text):
        server, uri = match.group("server"), match.group("uri").rstrip(".,;:!?)")
        if servers.find(server) is None or (server, uri) in seen:
            continue
        seen.add((server, uri))
        content = await read_resource(servers.connections, server, uri)
        if content.startswith("Error: "):
            await sink(Notice("warning", f"@{server}:{uri} was not attached: {content[7:]}", "mcp"))
            continue
        parts.append(Text(content))
    return parts
