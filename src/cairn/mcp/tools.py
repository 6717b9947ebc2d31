"""MCP tools as cairn tools, plus ``list_mcp_resources`` and ``read_mcp_resource``.

Approval of an MCP tool call (the scheduler applies permission rules and hooks first):

- a tool whose annotations say ``readOnlyHint`` runs unasked in ``auto-edit``, ``plan`` and
  ``yolo``, and on a trusted server; in ``default`` it asks;
- any other tool asks, unless its server has ``trust: true`` (or the mode is ``yolo``), and is
  refused in ``plan`` mode even when a rule or ``trust`` would allow it (kind ``"mcp"``).
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING, Any

from cairn.mcp.connection import McpCallError
from cairn.tools.base import ConfirmationKind, ToolContext, ToolKind, ToolResult
from cairn.tools.builtin import BuiltinTool

if TYPE_CHECKING:
    import mcp.types as types

    from cairn.mcp.connection import McpConnection
    from cairn.mcp.tool_cache import CachedTool

__all__ = [
    "LIST_RESOURCES_TOOL",
    "READ_RESOURCE_TOOL",
    "ListMcpResourcesTool",
    "McpTool",
    "ReadMcpResourceTool",
    "input_schema",
]

LIST_RESOURCES_TOOL = "list_mcp_resources"
READ_RESOURCE_TOOL = "read_mcp_resource"
_READ_ONLY_MODES = frozenset({"auto-edit", "plan", "yolo"})
# JSON-schema keys some providers refuse at the top of a function's parameters.
_DROPPED_SCHEMA_KEYS = ("$schema", "$id")


class McpTool(BuiltinTool):
    """One server tool, offered to the model as ``mcp__<server>__<tool>``."""

    def __init__(
        self, connection: McpConnection, tool: types.Tool | CachedTool, name: str
    ) -> None:
        self.connection = connection
        self.server_tool = tool.name
        self.name = name
        annotations = tool.annotations
        self.read_only = bool(annotations and annotations.readOnlyHint)
        self.display_title = (annotations.title if annotations else None) or tool.title or tool.name
        server = connection.name
        about = (tool.description or "").strip() or f"The {tool.name} tool of MCP server {server}."
        self.description = f"{about}\n\n(MCP server: {server})"
        self.parameters: Mapping[str, Any] = input_schema(tool.inputSchema)
        self.kind = ToolKind.READ if self.read_only else ToolKind.OTHER

    @property
    def trusted(self) -> bool:
        return self.connection.config.trust

    def title(self, args: Mapping[str, Any]) -> str:
        return f"{self.display_title} ({self.connection.name} MCP)"

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        mode = ctx.approval_mode
        if self.read_only:
            return None if self.trusted or mode in _READ_ONLY_MODES else "mcp"
        if mode == "plan":
            return "mcp"  # refused by the approval decision whatever rule or trust says
        return None if self.trusted else "mcp"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        timeout = self.connection.config.timeout_ms / 1000
        try:
            result = await self.connection.call_tool(self.server_tool, dict(args), timeout=timeout)
        except McpCallError as exc:
            return ToolResult(error=str(exc))
        from cairn.mcp.results import tool_result  # with the SDK, loaded by now

        return tool_result(result, server=self.connection.name, tool=self.server_tool)


class ListMcpResourcesTool(BuiltinTool):
    """Lists the resources (and resource templates) of the connected MCP servers."""

    name = LIST_RESOURCES_TOOL
    kind = ToolKind.READ
    description = (
        "List the resources MCP servers offer (files, documents, records), with their URIs. "
        "Read one with read_mcp_resource."
    )
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "Only this server's resources."}
        },
    }

    def __init__(self, connections: Sequence[McpConnection]) -> None:
        self._connections = connections

    def title(self, args: Mapping[str, Any]) -> str:
        server = args.get("server")
        return f"List MCP resources of {server}" if server else "List MCP resources"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        wanted = args.get("server")
        lines: list[str] = []
        for connection in self._connections:
            if wanted and connection.name != wanted:
                continue
            for resource in connection.resources:
                about = f" — {resource.description}" if resource.description else ""
                lines.append(f"{connection.name}: {resource.uri} ({resource.name}){about}")
            for template in connection.resource_templates:
                lines.append(
                    f"{connection.name}: {template.uriTemplate} (template: {template.name})"
                )
        if wanted and not any(c.name == wanted for c in self._connections):
            names = ", ".join(c.name for c in self._connections) or "none"
            return ToolResult(error=f"No MCP server named {wanted!r} (servers: {names}).")
        return ToolResult(output="\n".join(lines) or "No MCP server offers resources.")


class ReadMcpResourceTool(BuiltinTool):
    """Reads one resource of an MCP server by URI."""

    name = READ_RESOURCE_TOOL
    kind = ToolKind.READ
    description = "Read a resource of an MCP server by its URI (list them with list_mcp_resources)."
    parameters: Mapping[str, Any] = {
        "type": "object",
        "properties": {
            "server": {"type": "string", "description": "The MCP server's name."},
            "uri": {"type": "string", "description": "The resource's URI."},
        },
        "required": ["server", "uri"],
    }

    def __init__(self, connections: Sequence[McpConnection]) -> None:
        self._connections = connections

    def title(self, args: Mapping[str, Any]) -> str:
        return f"Read {args.get('uri', '')} ({args.get('server', '')} MCP)"

    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        server, uri = args.get("server"), args.get("uri")
        if not isinstance(server, str) or not isinstance(uri, str) or not uri:
            return ToolResult(error="read_mcp_resource needs `server` and `uri` strings.")
        text = await read_resource(self._connections, server, uri)
        return (
            ToolResult(output=text)
            if not text.startswith("Error: ")
            else ToolResult(error=text.removeprefix("Error: "))
        )


async def read_resource(connections: Sequence[McpConnection], server: str, uri: str) -> str:
    """The resource's contents as tagged text, or ``"Error: ..."`` saying why not."""
    from cairn.mcp.results import MAX_RESULT_CHARS

    connection = next((c for c in connections if c.name == server), None)
    if connection is None:
        names = ", ".join(c.name for c in connections) or "none"
        return f"Error: no MCP server named {server!r} (servers: {names})."
    try:
        result = await connection.read_resource(uri)
    except McpCallError as exc:
        return f"Error: {exc}"
    except ValueError as exc:  # not a URI
        return f"Error: {uri!r} is not a valid resource URI ({exc})."
    from cairn.mcp.results import resource_text  # with the SDK, loaded by now

    text = "\n".join(resource_text(item) for item in result.contents)
    return text[:MAX_RESULT_CHARS]


def input_schema(schema: Mapping[str, Any] | None) -> dict[str, Any]:
    """The tool's input schema as function parameters: an object schema, always."""
    if not isinstance(schema, Mapping):
        return {"type": "object", "properties": {}}
    cleaned = copy.deepcopy(dict(schema))
    for key in _DROPPED_SCHEMA_KEYS:
        cleaned.pop(key, None)
    if cleaned.get("type") != "object":
        return {"type": "object", "properties": {}}
    if not isinstance(cleaned.get("properties"), dict):
        cleaned["properties"] = {}
    return cleaned
