"""Shared pieces of the built-in tools: argument checks, path display, a default base class."""

from __future__ import annotations

import asyncio
import os
import stat
from abc import ABC, abstractmethod
from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from cairn.tools.base import (
    ConfirmationKind,
    FileDiff,
    Location,
    ToolContext,
    ToolError,
    ToolKind,
    ToolResult,
)

__all__ = [
    "BINARY_SNIFF_BYTES",
    "BuiltinTool",
    "FileChangeTool",
    "PatternSearchTool",
    "check_regular_file",
    "display_path",
    "folder_phrase",
    "looks_binary",
    "optional_bool",
    "optional_int",
    "optional_number",
    "optional_str",
    "optional_str_list",
    "require_str",
]

BINARY_SNIFF_BYTES = 8192  # bytes read from the start of a file to look for NUL bytes


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


def require_str(args: Mapping[str, Any], key: str, *, allow_empty: bool = False) -> str:
    value = args.get(key)
    if not isinstance(value, str):
        raise ToolError(f"Invalid parameters: `{key}` is required and must be a string.")
    if not allow_empty and not value.strip():
        raise ToolError(f"Invalid parameters: `{key}` must not be empty.")
    return value


def optional_str(args: Mapping[str, Any], key: str) -> str | None:
    value = args.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise ToolError(f"Invalid parameters: `{key}` must be a string.")
    return value if value.strip() else None


def optional_int(args: Mapping[str, Any], key: str, *, minimum: int = 0) -> int | None:
    """An integer argument; integral floats and digit strings (as models sometimes send) count."""
    value = args.get(key)
    if value is None:
        return None
    number: int | None = None
    if isinstance(value, bool):
        number = None
    elif isinstance(value, int):
        number = value
    elif isinstance(value, float) and value.is_integer():
        number = int(value)
    elif isinstance(value, str) and value.strip().lstrip("-").isdigit():
        number = int(value.strip())
    if number is None or number < minimum:
        raise ToolError(f"Invalid parameters: `{key}` must be an integer >= {minimum}.")
    return number


def optional_number(args: Mapping[str, Any], key: str) -> float | None:
    value = args.get(key)
    if value is None:
        return None
    if isinstance(value, bool):
        raise ToolError(f"Invalid parameters: `{key}` must be a number.")
    if isinstance(value, int | float):
        return float(value)
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            pass
    raise ToolError(f"Invalid parameters: `{key}` must be a number.")


def optional_bool(args: Mapping[str, Any], key: str, *, default: bool = False) -> bool:
    value = args.get(key)
    if value is None:
        return default
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in {"true", "false"}:
        return value.lower() == "true"
    raise ToolError(f"Invalid parameters: `{key}` must be true or false.")


def optional_str_list(args: Mapping[str, Any], key: str) -> list[str]:
    value = args.get(key)
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise ToolError(f"Invalid parameters: `{key}` must be a list of strings.")
    return list(value)


def display_path(path: Path, workspace: Path) -> str:
    """``path`` relative to the workspace (POSIX style), or absolute when it lies outside."""
    try:
        relative = path.relative_to(workspace.resolve())
    except ValueError:
        return str(path)
    return relative.as_posix()


def folder_phrase(shown: str) -> str:
    """How a sentence names a displayed folder: "the workspace" for ".", else the path."""
    return "the workspace" if shown == "." else shown


def looks_binary(path: Path) -> bool:
    """True when the start of the file holds a NUL byte (how git and ripgrep spot binaries).

    Only for regular files (a FIFO would block): anything else is not looked into."""
    from cairn.fsutil import read_regular_bytes

    try:
        return b"\0" in read_regular_bytes(path, limit=BINARY_SNIFF_BYTES)
    except OSError:
        return False


async def check_regular_file(path: Path, shown: str, *, missing_ok: bool = False) -> bool:
    """True when ``path`` is a regular file, False when it is missing and ``missing_ok``.

    A folder, FIFO, device or socket is a :class:`ToolError` saying what it is: opening one
    would block the turn (a FIFO waits for a writer forever) or read without end.
    """
    from cairn.fsutil import file_kind

    try:
        info = await asyncio.to_thread(os.stat, path)
    except FileNotFoundError:
        if missing_ok:
            return False
        raise ToolError(f"File not found: {shown}") from None
    except OSError as exc:
        raise ToolError(f"Could not read {shown}: {exc.strerror or exc}") from None
    if stat.S_ISDIR(info.st_mode):
        raise ToolError(f"{shown} is a directory, not a file. Use list_directory to see it.")
    if not stat.S_ISREG(info.st_mode):
        raise ToolError(
            f"{shown} is {file_kind(info.st_mode)}, not a regular file; the file tools "
            "only read and write regular files."
        )
    return True
