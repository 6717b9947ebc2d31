"""The base classes of the built-in tools: defaults for the tool protocol, a search for a
pattern, and a change to one file."""

from __future__ import annotations

import asyncio
from abc import ABC, abstractmethod
from collections.abc import Mapping
from typing import Any, ClassVar

from cairn.tools.arguments import require_str
from cairn.tools.base import (
    ConfirmationKind,
    FileDiff,
    Location,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)

__all__ = ["BuiltinTool", "FileChangeTool", "PatternSearchTool"]


class BuiltinTool(ABC):
    """Defaults for the :class:`~cairn.tools.base.Tool` protocol; subclasses implement ``_run``.

    ``execute`` turns a :class:`ToolError` into ``ToolResult(error=...)`` and any other failure
    into an error the model can read, so only ``asyncio.CancelledError`` ever escapes.
    """

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] = {}
    kind: ToolKind = ToolKind.OTHER

    def title(self, args: Mapping[str, Any]) -> str:
        return self.name

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        return None

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        return []

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff | None:
        return None

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        try:
            return await self._run(args, ctx)
        except asyncio.CancelledError:
            raise
        except ToolError as exc:
            return ToolResult(error=str(exc))
        except Exception as exc:
            from cairn.debug_log import get_logger  # only on this rare path: it loads config

            get_logger("TOOLS").error(f"{self.name} failed: {type(exc).__name__}: {exc}")
            return ToolResult(error=f"{self.name} failed unexpectedly: {type(exc).__name__}: {exc}")

    @abstractmethod
    async def _run(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult:
        """What the call does; a :class:`ToolError` becomes the call's error."""


class PatternSearchTool(BuiltinTool):
    """A search for a ``pattern`` under an optional ``path`` (``glob``, ``grep_search``)."""

    kind = ToolKind.SEARCH
    verb: ClassVar[str]  # the title's first words, as "Find" in "Find *.py in src"

    def title(self, args: Mapping[str, Any]) -> str:
        where = args.get("path")
        return f"{self.verb} {args.get('pattern', '')}" + (f" in {where}" if where else "")


class FileChangeTool(BuiltinTool):
    """A built-in tool that changes the one file its ``file_path`` names (``write_file``,
    ``edit``): asked about as an edit, located at that file, previewed as :meth:`_diff`."""

    kind = ToolKind.EDIT
    verb = "Change"  # the title: "Write src/a.py"

    def title(self, args: Mapping[str, Any]) -> str:
        return f"{self.verb} {args.get('file_path', '')}"

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        return "edit"

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]:
        try:
            return [Location(ctx.resolve(require_str(args, "file_path"), write=True))]
        except ToolError:
            return []

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff | None:
        try:
            return await self._diff(args, ctx)
        except ToolError:
            return None

    @abstractmethod
    async def _diff(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff:
        """The change the call would make; :class:`ToolError` if it cannot be made."""
