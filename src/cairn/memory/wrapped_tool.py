"""A built-in tool seen through memory's rules: the base of the memory tool wrappers.

The main agent's memory-aware tools (:mod:`cairn.memory.remember`) and the memory agents'
guarded tools (:mod:`cairn.memory.background.agent_tools`) each change a few methods of the
tool they wrap; :class:`WrappedTool` delegates the rest.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from cairn.tools.base import (
    ConfirmationKind,
    FileDiff,
    Location,
    Tool,
    ToolContext,
    ToolKind,
    ToolResult,
)

__all__ = ["WrappedTool"]


class WrappedTool:
    """A :class:`~cairn.tools.base.Tool` that does what ``inner`` does; subclasses override."""

    def __init__(self, inner: Tool) -> None:
        self.inner = inner
        self.name = inner.name
        self.description = inner.description
        self.parameters = inner.parameters
        self.kind: ToolKind = inner.kind

    def title(self, args: Mapping[str, Any]) -> str:
        return self.inner.title(args)

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        return self.inner.confirmation(args, ctx)

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        return self.inner.locations(args, ctx)

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff | None:
        return await self.inner.preview(args, ctx)

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        return await self.inner.execute(args, ctx)
