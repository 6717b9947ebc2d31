"""cairn's own configuration, and the files that make programs run by themselves: a tool call
that would change them needs the user's explicit approval, named as a settings change.

Without this, the model could give itself more permission: in ``auto-edit`` mode (edits run
unasked) it could write ``.cairn/settings.json`` with ``permissions.allow: ["Bash"]`` or a hook,
or ``.git/config`` with a ``core.fsmonitor`` program that the next "read-only" ``git status``
runs. What counts (:meth:`ProtectedPaths.describe`):

- the project's ``.cairn/`` folder (settings, commands, skills, agents), except its
  ``memory/`` folder, and ``.mcp.json``;
- the folders of other agents whose files cairn reads (``.claude/``, ``.qwen/``, ``.agents/``);
- everything under ``$CAIRN_HOME``, except the memory folders;
- every ``.git`` folder (its config and hooks run programs);
- the scripts the configured hooks and stdio MCP servers run (outside any sandbox).

Such a call is confirmed in every approval mode but ``yolo`` (``auto-edit``, ``allow`` rules,
hooks and "allow always" do not cover it) and refused where nobody can answer. A shell command
is checked on the paths it names; what a program writes by itself (``git checkout``, ``npm
install``, a script) cannot be seen before it runs, which docs/permissions.md says.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from cairn.vocabulary.tool_names import ToolName

__all__ = ["PROJECT_ENTRIES", "ProtectedPaths", "command_scripts", "git_folders", "settings_change"]

_PROJECT_FOLDERS = {
    ".cairn": "cairn's project configuration",
    ".claude": "agent configuration cairn reads",
    ".qwen": "agent configuration cairn reads",
    ".agents": "agent configuration cairn reads",
}
_PROJECT_FILES = {".mcp.json": "the project's MCP servers"}
# What a project root holds that runs or is trusted later: the shell sandbox keeps each read-only
# (and a read-only stand-in where one is absent, so a command cannot create it).
PROJECT_ENTRIES = (".git", *_PROJECT_FOLDERS, *_PROJECT_FILES)
_MEMORY_FOLDER = "memory"  # <project>/.cairn/memory holds memories (CAIRN_MEMORY_LOCAL=1)
_HOME_MEMORY = re.compile(r"(?:memories|projects/[^/]+/memory)(?:/|$)")
_VARIABLE = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*))")
_RAW_MARKERS = (".cairn", ".mcp.json", ".claude", ".qwen", ".agents", ".git/", ".git ")


@dataclass(frozen=True)
class ProtectedPaths:
    """The protected paths of one workspace (see the module docs)."""

    roots: tuple[Path, ...]  # the project root and the workspace, resolved
    cairn_home: Path
    exempt: tuple[Path, ...] = ()  # memory roots a tool context may write
    scripts: tuple[Path, ...] = ()  # what hooks and stdio MCP servers run

    @classmethod
    def of(
        cls,
        workspace: Path,
        *,
        exempt: Iterable[Path] = (),
        hook_commands: Iterable[str] = (),
        run_later: Iterable[tuple[str, Path]] = (),
    ) -> ProtectedPaths:
        """``hook_commands`` run in ``workspace``; ``run_later``: more command lines cairn runs
        outside the sandbox, each with its folder (the session's hooks and stdio MCP servers,
        as the sandbox reads them: :func:`cairn.session.workspace.run_outside`)."""
        from cairn.config.paths import cairn_home, project_root

        roots = tuple(dict.fromkeys((_real(project_root(workspace)), _real(workspace))))
        commands = [*((command, roots[-1]) for command in hook_commands), *run_later]
        scripts = tuple(command_scripts(commands))
        return cls(roots, _real(cairn_home()), tuple(_real(p) for p in exempt), scripts)

    def describe(self, path: Path) -> str | None:
        """What ``path`` is, when it is protected ("cairn's project configuration (...)")."""
        if "\x00" in str(path):
            return None  # no file has such a name: the tool refuses it
        real = _real(path)
        if any(real == e or e in real.parents for e in self.exempt):
            return None
        if real in self.scripts:
            return f"a script a configured hook or MCP server runs outside the sandbox ({real})"
        home = _relative(real, self.cairn_home)
        if home is not None:
            if _HOME_MEMORY.match(home):
                return None
            return f"cairn's own configuration and state ({self.cairn_home / home})"
        for root in self.roots:
            inside = _relative(real, root)
            if inside is None:
                continue
            # lower-cased: on a case-insensitive file system .Cairn is .cairn
            first, _, rest = inside.lower().partition("/")
            if first == ".cairn" and rest.split("/", 1)[0] == _MEMORY_FOLDER:
                return None
            if first in _PROJECT_FOLDERS:
                return f"{_PROJECT_FOLDERS[first]} ({inside})"
            if inside.lower() in _PROJECT_FILES:
                return f"{_PROJECT_FILES[inside.lower()]} ({inside})"
        if any(part.lower() == ".git" for part in real.parts):
            return f"git's configuration and hooks ({real})"
        return None

    def in_command(
        self, command: str, cwd: Path, changeable: Callable[[Path], bool] | None = None
    ) -> str | None:
        """The first protected path a shell command names (its words and redirections, those
        of nested ``bash -c`` strings included), or ``None``. ``changeable``: whether the
        command can change a path at all (a sandbox keeps some read-only); those are left out.
        """
        from cairn.tools.shell_resolve import resolve

        line = resolve(command)
        for simple in line.commands:
            words = [*simple.words, *simple.assignments, *(r.target for r in simple.redirections)]
            for word in words:
                for candidate in _word_paths(word.value, cwd):
                    path = candidate if candidate.is_absolute() else cwd / candidate
                    found = self.describe(path)
                    if found is not None and (changeable is None or changeable(path)):
                        return found
        if line.unresolved or not line.commands:
            return self._raw_mention(command)
        return None

    def _raw_mention(self, command: str) -> str | None:
        """For text that cannot be read as commands: any mention of a protected name."""
        mentions = [m for m in _RAW_MARKERS if m in command]
        if str(self.cairn_home) in command:
            mentions.append(str(self.cairn_home))
        if mentions:
            return f"a command mentioning {mentions[0].strip()} that cannot be read in full"
        return None


def settings_change(
    tool_name: str,
    args: Mapping[str, Any],
    paths: ProtectedPaths,
    resolve_write: Any,
    cwd: Path,
    *,
    shell_can_change: Callable[[Path], bool] | None = None,
) -> str | None:
    """What protected configuration this call would change, or ``None``.

    ``resolve_write`` turns a tool's path argument into an absolute path (the tool context's
    ``resolve(raw, write=True)``); a path it refuses is not a change this check is about.
    ``shell_can_change``: what a shell command can change at all (its sandbox's
    :meth:`~cairn.tools.sandbox.SandboxPolicy.can_change`): a path it keeps read-only is no
    change to confirm (nor to report as made).
    """
    if tool_name in (ToolName.WRITE_FILE, ToolName.EDIT):
        raw = args.get("file_path")
        if not isinstance(raw, str):
            return None
        try:
            target = resolve_write(raw)
        except Exception:  # refused for other reasons (outside the roots): not our concern
            return None
        return paths.describe(target)
    if tool_name == ToolName.SHELL:
        command = args.get("command")
        if not isinstance(command, str):
            return None
        return paths.in_command(command, cwd, shell_can_change)
    return None


def _real(path: Path) -> Path:
    return Path(os.path.realpath(path))


def _relative(path: Path, root: Path) -> str | None:
    if path == root:
        return ""
    if root in path.parents:
        return path.relative_to(root).as_posix()
    return None


def _word_paths(value: str, cwd: Path) -> list[Path]:
    """The paths a word may name: itself, the value of ``--opt=VALUE`` or ``NAME=VALUE``, with
    ``~`` and variables expanded as the command's shell would (``$PWD`` is its folder)."""
    found = [value]
    if "=" in value:
        found.append(value.split("=", 1)[1])
    variables = {**os.environ, "PWD": str(cwd)}
    paths: list[Path] = []
    for text in found:
        if not text:
            continue
        text = _VARIABLE.sub(lambda m: variables.get(m.group(1) or m.group(2), m.group(0)), text)
        paths.append(Path(os.path.expanduser(text)))
    return paths


def command_scripts(commands: Iterable[tuple[str, Path]]) -> list[Path]:
    """The existing files the words of command lines name (each line with the folder it runs
    in: a hook's ``./ci/notify.sh``, a stdio MCP server's ``python tools/server.py``), real
    paths: changing one changes what the command runs."""
    from cairn.tools.shell_parse import split_commands

    found: list[Path] = []
    for command, cwd in commands:
        for simple in split_commands(command) or ():
            for word in simple.words:
                text = word.value.replace("$CAIRN_PROJECT_DIR", str(cwd))
                text = text.replace("$CLAUDE_PROJECT_DIR", str(cwd))
                if not text or text.startswith("-") or "\x00" in text:
                    continue
                candidate = Path(os.path.expanduser(text))
                candidate = candidate if candidate.is_absolute() else cwd / candidate
                try:
                    if candidate.is_file():
                        found.append(_real(candidate))
                except OSError:
                    continue
    return list(dict.fromkeys(found))


def git_folders(root: Path) -> list[Path]:
    """The git folders the work tree at ``root`` uses: ``root/.git``, or the folder a ``.git``
    file names ("gitdir: ...", a linked worktree or submodule) and its common folder."""
    dot_git = root / ".git"
    if not dot_git.is_file() or dot_git.is_symlink():
        return [dot_git] if os.path.lexists(dot_git) else []
    try:
        line = dot_git.read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return [dot_git]
    if not line.startswith("gitdir:"):
        return [dot_git]
    git_dir = Path(os.path.realpath(root / line.removeprefix("gitdir:").strip()))
    found = [dot_git, git_dir]
    try:
        common = (git_dir / "commondir").read_text(encoding="utf-8").strip()
    except (OSError, UnicodeDecodeError):
        return found
    if common:
        found.append(Path(os.path.realpath(git_dir / common)))
    return found
