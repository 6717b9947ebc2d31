"""Where a session's tool calls work, and what they run with: the session's folder and the
extra ones an editor added (``additionalDirectories``), its file system and terminals (an
editor's, or local ones), the environment commands and hooks get (cairn's, without its
secrets), the shell sandbox and the ignore rules."""

from __future__ import annotations

import shlex
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from cairn.agent.prompt import startup_context
from cairn.config.context_files import ContextFile, collect_context_files
from cairn.debug_log import get_logger
from cairn.tools.base import CommandRunner, FileSystem, LocalFileSystem, ToolContext
from cairn.vocabulary.events import Notice

if TYPE_CHECKING:
    from cairn.abort import AbortSignal
    from cairn.config.settings import Settings
    from cairn.content import Content
    from cairn.mcp.config import ServerConfig
    from cairn.session.runtime import Runtime
    from cairn.session.turn import Carryover
    from cairn.tools.ignore import IgnoreRules
    from cairn.tools.sandbox import RunLater, SandboxPolicy
    from cairn.vocabulary.interaction import UserInteraction

__all__ = ["SessionWorkspace", "run_outside"]

_log = get_logger("SESSION")


class SessionWorkspace:
    def __init__(
        self,
        *,
        cwd: Path,
        project_root: Path,
        settings: Settings,
        environment: dict[str, str],
        sandbox: Callable[[], SandboxPolicy | None],
        extra_roots: Sequence[Path] = (),
        fs: FileSystem | None = None,
        command_runner: CommandRunner | None = None,
        run_later: Callable[[], Sequence[RunLater]] = tuple,
    ) -> None:
        self.cwd = cwd.resolve()
        self.project_root = project_root
        self.settings = settings
        self.environment = environment  # of commands and hooks
        self._exports: dict[str, str | None] = {}  # SessionStart hooks' CLAUDE_ENV_FILE
        self._sandbox = sandbox  # how shell commands are fenced (the runtime's policy)
        self.extra_roots = tuple(root.resolve() for root in extra_roots)
        self.fs: FileSystem = fs or LocalFileSystem()
        self.command_runner = command_runner  # an editor's terminals; None: run locally
        self._run_later = run_later  # what cairn runs outside the sandbox (run_outside)
        self._warned: set[str] = set()  # about context files: each said once a session

    @classmethod
    def of(
        cls,
        runtime: Runtime,
        cwd: Path,
        extra_roots: Sequence[Path],
        fs: FileSystem | None,
        command_runner: CommandRunner | None,
        run_later: Callable[[], Sequence[RunLater]],
    ) -> SessionWorkspace:
        """A session's workspace in ``runtime``: its settings, sandbox and environment;
        ``run_later``: what cairn runs outside the sandbox (:func:`run_outside`)."""
        folder = cwd.resolve()
        return cls(
            cwd=cwd,
            project_root=runtime.project_root,
            settings=runtime.settings,
            environment=runtime.command_environment(),  # without cairn's secrets
            sandbox=lambda: runtime.sandbox_policy(folder, run_later=run_later),
            extra_roots=extra_roots,
            fs=fs,
            command_runner=command_runner,
            run_later=run_later,
        )

    def context_files(self, names: str | list[str], carry: Carryover) -> list[ContextFile]:
        """The context files (``AGENTS.md``, ``CAIRN.md`` ...) the system prompt carries; one
        refused or unreadable (a link leading outside the project, a FIFO) is logged and said
        to the user once, as a notice when the next turn starts."""
        files, warnings = collect_context_files(self.cwd, names)
        for warning in warnings:
            _log.warning(warning)
            if warning not in self._warned:
                self._warned.add(warning)
                carry.add_notice(Notice("warning", warning, "context"))
        return files

    def tool_context(
        self,
        abort: AbortSignal,
        *,
        interaction: UserInteraction,
        session_id: str,
        readable: Sequence[Path] = (),
    ) -> ToolContext:
        """A call's context; ``readable``: more folders it may read (of skills loaded)."""
        roots = [self.cwd, *self.extra_roots]
        return ToolContext(
            workspace=self.cwd,
            abort=abort,
            fs=self.fs,
            interaction=interaction,
            session_id=session_id,
            shell_timeout=self.settings.tools.shell_timeout_seconds,
            environment=self.shell_environment(),
            readable_roots=[*roots, *readable] if readable or self.extra_roots else None,
            writable_roots=roots if self.extra_roots else None,
            sandbox=self._sandbox(),
            ignore=self._ignore_rules(),
            commands=self.command_runner,
            run_later=tuple(self._run_later()),
        )

    def export(self, change: Mapping[str, str | None]) -> None:
        """Shell commands get ``change`` on top of :attr:`environment` from now on (``None``:
        unset), instead of what the last ``SessionStart`` hooks exported; hooks do not."""
        self._exports = dict(change)

    def shell_environment(self) -> dict[str, str]:
        """What a shell command runs with: :attr:`environment` and the hooks' exports."""
        if not self._exports:
            return self.environment
        environment = dict(self.environment)
        for name, value in self._exports.items():
            if value is None:
                environment.pop(name, None)
            else:
                environment[name] = value
        return environment

    def startup_context(self) -> list[Content]:
        """What the conversation starts with: the folders and their files at a glance
        (``model.skipStartupContext``: nothing)."""
        if self.settings.model.skip_startup_context:
            return []
        return startup_context(self.cwd, extra_dirs=self.extra_roots)

    def _ignore_rules(self) -> IgnoreRules | None:
        filtering = self.settings.context.file_filtering
        if not (filtering.respect_git_ignore or filtering.respect_cairn_ignore):
            return None
        from cairn.tools.ignore import IgnoreRules

        return IgnoreRules(
            self.project_root,
            gitignore=filtering.respect_git_ignore,
            cairnignore=filtering.respect_cairn_ignore,
        )


def run_outside(
    cwd: Path, hook_commands: Sequence[str], servers: Sequence[ServerConfig]
) -> list[RunLater]:
    """What cairn runs outside the sandbox, with its folder: hooks and stdio MCP servers
    (the files they name stay read-only in the sandbox)."""
    found = [(command, cwd) for command in hook_commands]
    for server in servers:
        if server.transport == "stdio" and server.command:
            folder = cwd / server.cwd if server.cwd else cwd
            found.append((shlex.join([server.command, *server.args]), folder))
    return found
