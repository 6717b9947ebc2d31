"""The tool protocol: what every tool declares, receives and returns."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from cairn.abort import AbortSignal
from cairn.content import FunctionCall, FunctionResponse, Image
from cairn.vocabulary.interaction import Question, UserInteraction
from cairn.vocabulary.tool_calls import ConfirmationKind, FileDiff, Location, TodoItem, ToolKind

__all__ = [
    "ConfirmationKind",
    "FileDiff",
    "FileSystem",
    "LocalFileSystem",
    "Location",
    "PathOutsideWorkspace",
    "Question",
    "TodoItem",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolKind",
    "ToolResult",
    "UserInteraction",
    "resolve_in_roots",
]


class ToolError(Exception):
    """A tool failed in a way the model should be told about (becomes ``{"error": ...}``)."""


class PathOutsideWorkspace(ToolError):
    pass


@dataclass
class ToolResult:
    """The outcome of one call: ``output`` for the model on success, or ``error``."""

    output: str | None = None
    error: str | None = None
    display: str | None = None  # a short human summary; defaults to output/error
    diff: FileDiff | None = None
    locations: list[Location] = field(default_factory=list)
    todos: list[TodoItem] | None = None
    media: tuple[Image, ...] = ()  # images for the model (an MCP tool's image content)

    @property
    def ok(self) -> bool:
        return self.error is None

    def to_response(self, call: FunctionCall) -> FunctionResponse:
        if self.error is not None:
            return FunctionResponse(call.id, call.name, {"error": self.error}, self.media)
        return FunctionResponse(call.id, call.name, {"output": self.output or ""}, self.media)


class FileSystem(Protocol):
    """Text file access. Local by default; an editor (ACP) may serve its unsaved buffers."""

    async def read_text(self, path: Path) -> str: ...

    async def write_text(self, path: Path, content: str) -> None: ...


class LocalFileSystem:
    async def read_text(self, path: Path) -> str:
        # bytes, not read_text(): universal newlines would turn CRLF files into LF on write
        return path.read_bytes().decode("utf-8")

    async def write_text(self, path: Path, content: str) -> None:
        from cairn.fsutil import atomic_write_text

        atomic_write_text(path, content)


@dataclass
class ToolContext:
    """What a running tool may use."""

    workspace: Path
    abort: AbortSignal
    fs: FileSystem = field(default_factory=LocalFileSystem)
    interaction: UserInteraction | None = None
    session_id: str = ""
    shell_timeout: float = 120.0
    # Roots a tool may write to when this is set (memory agents); None = the workspace.
    writable_roots: Sequence[Path] | None = None
    readable_roots: Sequence[Path] | None = None
    protected_subdirs: Sequence[str] = ()  # e.g. ("pinned",): never written under any root
    approval_mode: str = "default"  # the session's mode when the call is decided

    def resolve(self, raw: str, *, write: bool = False) -> Path:
        """An absolute path for a tool argument, refused when outside the allowed roots."""
        roots = self.writable_roots if write else self.readable_roots
        if roots is None:
            roots = (
                [self.workspace]
                if self.writable_roots is None
                else [
                    self.workspace,
                    *self.writable_roots,
                ]
            )
        path = resolve_in_roots(raw, self.workspace, roots)
        if write and self.protected_subdirs:
            for root in roots:
                try:
                    relative = path.relative_to(root.resolve())
                except ValueError:
                    continue
                if relative.parts and relative.parts[0] in self.protected_subdirs:
                    raise PathOutsideWorkspace(
                        f"{raw}: files under {relative.parts[0]}/ are protected and read-only"
                    )
        return path


def resolve_in_roots(raw: str, base: Path, roots: Sequence[Path]) -> Path:
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("a path is required")
    candidate = Path(raw).expanduser()
    if not candidate.is_absolute():
        candidate = base / candidate
    resolved = candidate.resolve()
    for root in roots:
        real_root = root.resolve()
        if resolved == real_root or real_root in resolved.parents:
            return resolved
    names = ", ".join(str(r) for r in roots)
    raise PathOutsideWorkspace(f"{raw}: path is outside the allowed directories ({names})")


class Tool(Protocol):
    """A tool the model can call."""

    name: str
    description: str
    parameters: Mapping[str, Any]  # JSON schema of the arguments object
    kind: ToolKind

    def title(self, args: Mapping[str, Any]) -> str:
        """A one-line description of this call for people ("Read src/app.py")."""
        ...

    def confirmation(self, args: Mapping[str, Any], ctx: ToolContext) -> ConfirmationKind | None:
        """``None`` if this call is safe to run unasked, else how it must be confirmed."""
        ...

    def locations(self, args: Mapping[str, Any], ctx: ToolContext) -> list[Location]: ...

    async def preview(self, args: Mapping[str, Any], ctx: ToolContext) -> FileDiff | None:
        """The change this call would make, shown when asking for approval (edits only)."""
        ...

    async def execute(self, args: Mapping[str, Any], ctx: ToolContext) -> ToolResult: ...
