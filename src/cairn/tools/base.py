"""The tool protocol: what every tool declares, receives and returns."""

from __future__ import annotations

import asyncio
import copy
import os
from collections.abc import Mapping, Sequence
from dataclasses import field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, Protocol, TypeAlias

from cairn.abort import AbortSignal
from cairn.content import FunctionCall, FunctionResponse, Image
from cairn.fsutil import atomic_write_text, read_regular_file
from cairn.values import Value
from cairn.vocabulary.events import EventSink
from cairn.vocabulary.interaction import Question, UserInteraction
from cairn.vocabulary.tool_calls import (
    ConfirmationKind,
    FileDiff,
    Location,
    SubagentReport,
    TodoItem,
    ToolKind,
)

if TYPE_CHECKING:
    from cairn.tools.ignore import IgnoreRules
    from cairn.tools.sandbox import SandboxPolicy

__all__ = [
    "MAX_TEXT_FILE_BYTES",
    "Access",
    "ApprovalSource",
    "CommandExit",
    "CommandRunner",
    "ConfirmationKind",
    "FileDiff",
    "FileSystem",
    "LocalFileSystem",
    "Location",
    "PathDenied",
    "PathOutsideWorkspace",
    "PathRules",
    "Question",
    "RunningCommand",
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


MAX_TEXT_FILE_BYTES = 64 << 20  # larger files are not read whole by the file tools

Access: TypeAlias = Literal["read", "write"]
# Why a call is running: nobody had to approve it (read-only), a permissions.allow rule or a
# hook allowed it, the user approved it, or the approval mode (yolo, auto-edit) did.
ApprovalSource: TypeAlias = Literal["unasked", "rule", "user", "mode"]


class PathOutsideWorkspace(ToolError):
    pass


class PathDenied(ToolError):
    """A ``permissions.deny`` rule covers the path."""


class PathRules(Protocol):
    """Deny rules on paths (``Read(...)``, ``Edit(...)``), asked about every path a tool touches."""

    def path_denial(self, path: Path, access: Access, workspace: Path, tool: str) -> str | None:
        """The deny rule covering ``path`` (absolute, resolved) for ``access``, or ``None``."""
        ...


class ToolResult(Value, frozen=False):
    """The outcome of one call: ``output`` for the model on success, or ``error``."""

    output: str | None = None
    error: str | None = None
    display: str | None = None  # a short human summary; defaults to output/error
    diff: FileDiff | None = None
    locations: list[Location] = field(default_factory=list)
    todos: list[TodoItem] | None = None
    media: tuple[Image, ...] = ()  # images for the model (an MCP tool's image content)
    subagent: SubagentReport | None = None  # an agent call's subagent at work, as shown

    @property
    def ok(self) -> bool:
        return self.error is None

    def noted(self, note: str) -> ToolResult:
        """A copy with ``note`` added to what the model sees (the output, or the error)."""
        noted = copy.copy(self)
        if self.ok:
            noted.output = (self.output or "") + note
        else:
            noted.error = (self.error or "") + note
        return noted

    def to_response(self, call: FunctionCall) -> FunctionResponse:
        if self.error is not None:
            return FunctionResponse(call.id, call.name, {"error": self.error}, self.media)
        return FunctionResponse(call.id, call.name, {"output": self.output or ""}, self.media)


class FileSystem(Protocol):
    """Text file access. Local by default; an editor (ACP) may serve its unsaved buffers."""

    async def read_text(self, path: Path) -> str: ...

    async def write_text(self, path: Path, content: str) -> None: ...


class LocalFileSystem:
    """The local disk, read and written in a worker thread (never blocking the event loop).

    Only regular files are read: a FIFO or a device raises ``NotRegularFile`` (an ``OSError``)
    instead of blocking, and a file over :data:`MAX_TEXT_FILE_BYTES` raises ``FileTooLarge``.
    """

    async def read_text(self, path: Path) -> str:
        # bytes, not read_text(): universal newlines would turn CRLF files into LF on write
        data = await asyncio.to_thread(read_regular_file, path, max_bytes=MAX_TEXT_FILE_BYTES)
        return data.decode("utf-8")

    async def write_text(self, path: Path, content: str) -> None:
        await asyncio.to_thread(atomic_write_text, path, content)


class CommandExit(Value):
    """How a command a :class:`CommandRunner` ran ended."""

    returncode: int | None  # None when a signal ended it
    signal: str | None = None  # e.g. "SIGKILL"


class RunningCommand(Protocol):
    """A command started by a :class:`CommandRunner`; the shell tool waits, kills, reads it."""

    @property
    def terminal_id(self) -> str | None:
        """The terminal people watch it in (shown with the tool call); None when there is none."""
        ...

    async def wait(self) -> CommandExit: ...

    async def kill(self) -> None: ...

    async def output(self) -> tuple[str, bool]:
        """What it printed so far, and whether the runner dropped the beginning of it."""
        ...

    async def release(self) -> None:
        """Free it (killing it if it still runs); called once, always."""
        ...


class CommandRunner(Protocol):
    """Where ``run_shell_command`` runs commands other than a local process group: the
    terminals an editor offers (ACP ``terminal/*``), so people watch the command live."""

    async def start(
        self, argv: Sequence[str], *, cwd: Path, env: Mapping[str, str]
    ) -> RunningCommand:
        """Start ``argv``; raises :class:`ToolError` saying why it could not."""
        ...


class ToolContext(Value, frozen=False):
    """What a running tool may use (copied with :func:`cairn.values.replace`)."""

    workspace: Path
    abort: AbortSignal
    fs: FileSystem = field(default_factory=LocalFileSystem)
    interaction: UserInteraction | None = None
    session_id: str = ""
    shell_timeout: float = 120.0
    search_timeout: float = 30.0  # seconds a grep_search may run before it is stopped
    # Roots a tool may write to when this is set (memory agents); None = the workspace.
    writable_roots: Sequence[Path] | None = None
    readable_roots: Sequence[Path] | None = None
    protected_subdirs: Sequence[str] = ()  # e.g. ("pinned",): never written under any root
    approval_mode: str = "default"  # the session's mode when the call is decided
    path_rules: PathRules | None = None  # deny rules; the scheduler sets its own
    tool_name: str = ""  # the tool being run (set by the scheduler per call)
    approval: ApprovalSource = "unasked"  # set by the scheduler per call
    # The environment commands run with; None: cairn's own, scrubbed of cairn's secrets.
    environment: Mapping[str, str] | None = None
    call_id: str = ""  # the call being run (set by the scheduler per call)
    # Where a tool reports what it does on the way (a subagent's steps); set per call.
    events: EventSink | None = None
    sandbox: SandboxPolicy | None = None  # how run_shell_command is fenced (tools/sandbox.py)
    ignore: IgnoreRules | None = None  # what the file tools skip (tools/ignore.py)
    # Where commands run; None: a local process group (an editor may offer its terminals).
    commands: CommandRunner | None = None
    # What cairn runs later outside any sandbox (hooks, stdio MCP servers): command lines with
    # their folders, whose scripts a call changes only with the user's approval (protected.py).
    run_later: Sequence[tuple[str, Path]] = ()

    def roots(self, *, write: bool = False) -> list[Path]:
        """The folders a tool may read (or write) in."""
        roots = self.writable_roots if write else self.readable_roots
        if roots is not None:
            return list(roots)
        return [self.workspace, *(self.writable_roots or ())]

    def resolve(self, raw: str, *, write: bool = False) -> Path:
        """An absolute path for a tool argument, refused when outside the allowed roots or
        covered by a deny rule. Symlinks are resolved first, so a link cannot lead out."""
        roots = self.roots(write=write)
        path = resolve_in_roots(raw, self.workspace, roots)
        denial = self.denial(path, write=write)
        if denial is not None:
            raise PathDenied(f"{raw}: {denial}")
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

    def denial(self, path: Path, *, write: bool = False) -> str | None:
        """The deny rule covering ``path`` (absolute, resolved) for this tool, or ``None``."""
        if self.path_rules is None:
            return None
        access: Access = "write" if write else "read"
        return self.path_rules.path_denial(path, access, self.workspace, self.tool_name)

    def may_read(self, path: Path) -> bool:
        """Whether a file a search came across may be shown: after resolving symlinks it lies
        inside the readable roots, and no deny rule covers it."""
        real = Path(os.path.realpath(path))
        inside = any(
            real == root or root in real.parents
            for root in (Path(os.path.realpath(r)) for r in self.roots())
        )
        return inside and self.denial(real) is None


def resolve_in_roots(raw: str, base: Path, roots: Sequence[Path]) -> Path:
    if not isinstance(raw, str) or not raw.strip():
        raise ToolError("a path is required")
    if "\x00" in raw:
        raise ToolError(f"{raw!r}: a path cannot contain a NUL byte")
    candidate = Path(os.path.expanduser(raw))  # ~nobody/x: unchanged, not an error
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

    kind: ToolKind

    @property
    def name(self) -> str:
        """The name the model calls it by (a :class:`ToolName` for the built-in tools)."""
        ...

    @property
    def description(self) -> str:
        """What the model is told the tool does (a tool may compute it, as ``agent`` does)."""
        ...

    @property
    def parameters(self) -> Mapping[str, Any]:
        """The JSON schema of the arguments object."""
        ...

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
