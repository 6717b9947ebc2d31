"""What the prompt box offers to complete: slash commands and ``@path`` file mentions.

Pure functions over the text and the cursor offset, so they are tested without a terminal.
"""

from __future__ import annotations

import os
import re
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from cairn.session.commands import COMMANDS, hint_text
from cairn.vocabulary.events import CommandInfo

__all__ = [
    "BUILTIN_COMMANDS",
    "MAX_COMPLETIONS",
    "UI_COMMANDS",
    "Completion",
    "all_commands",
    "complete",
    "complete_command",
    "complete_mention",
    "escape_path",
]

MAX_COMPLETIONS = 20  # rows shown in the completion menu
_SKIPPED_NAMES = frozenset({".git", "__pycache__", "node_modules", ".venv", ".mypy_cache"})
_MENTION_TOKEN = re.compile(r"(?:^|(?<=\s))@((?:\\ |\S)*)$")


# Commands only the terminal UI has (the session's own are Session.commands()).
UI_COMMANDS: tuple[CommandInfo, ...] = (
    CommandInfo("resume", "Pick a recorded session to resume", "session id"),
    CommandInfo("settings", "Change settings without restarting"),
    CommandInfo("mcp", "Show the MCP servers, live: status, tools, errors"),
    CommandInfo("quit", "Leave cairn"),
    CommandInfo("exit", "Leave cairn"),
)
BUILTIN_COMMANDS = tuple(CommandInfo(c.name, c.description, c.hint) for c in COMMANDS)


@dataclass(frozen=True)
class Completion:
    """Replace ``text[start:end]`` with ``insert``; ``label`` and ``description`` are shown."""

    start: int
    end: int
    insert: str
    label: str
    description: str = ""


def all_commands(shared: Sequence[CommandInfo] = BUILTIN_COMMANDS) -> list[CommandInfo]:
    """The session's commands (built-ins by default), then the terminal UI's own; the UI's own
    version of a session command (``/mcp``) replaces it."""
    own = {c.name for c in UI_COMMANDS}
    return [*(c for c in shared if c.name not in own), *UI_COMMANDS]


def complete(
    text: str, cursor: int, cwd: Path, commands: Sequence[CommandInfo] = BUILTIN_COMMANDS
) -> list[Completion]:
    """Completions for the text before ``cursor``: a command name or a mention."""
    return complete_command(text, cursor, commands) or complete_mention(text, cursor, cwd)


def complete_command(
    text: str, cursor: int, commands: Sequence[CommandInfo] = BUILTIN_COMMANDS
) -> list[Completion]:
    """``/na`` at the start of the prompt (before any space) → the commands starting with it;
    a command named exactly so comes first, so Enter runs it (``/mcp``, not an MCP prompt's
    ``/mcp__server__prompt``)."""
    if not text.startswith("/") or cursor == 0:
        return []
    head = text[:cursor]
    if any(c.isspace() for c in head):
        return []
    typed = head[1:].lower()
    end = len(text.split(None, 1)[0]) if text.strip() else len(text)
    matching = [spec for spec in all_commands(commands) if spec.name.lower().startswith(typed)]
    matching.sort(key=lambda spec: spec.name.lower() != typed)  # stable: the exact one first
    return [
        Completion(
            0,
            end,
            f"/{spec.name}" + (" " if spec.hint else ""),
            f"/{spec.name}" + (f" {hint_text(spec.hint)}" if spec.hint else ""),
            spec.description,
        )
        for spec in matching
    ][:MAX_COMPLETIONS]



def complete_mention(text: str, cursor: int, cwd: Path) -> list[Completion]:
    """``@src/ma`` before the cursor → files and folders under ``cwd/src`` starting with ``ma``."""
    match = _MENTION_TOKEN.search(text[:cursor])
    if match is None:
        return []
    typed = match.group(1).replace("\\ ", " ")
    folder, _, prefix = typed.rpartition("/")
    base = cwd / folder if folder else cwd
    start = match.start(1)
    return [
        Completion(start, cursor, escape_path(path), "@" + path, "folder" if is_dir else "")
        for path, is_dir in _entries(base, folder, prefix)
    ]


def escape_path(path: str) -> str:
    return path.replace(" ", "\\ ")


def _entries(base: Path, folder: str, prefix: str) -> Sequence[tuple[str, bool]]:
    try:
        with os.scandir(base) as listing:
            entries = [(e.name, _is_dir(e)) for e in listing]
    except OSError:
        return []
    lowered = prefix.lower()
    found = [
        (name, is_dir)
        for name, is_dir in entries
        if name.lower().startswith(lowered)
        and name not in _SKIPPED_NAMES
        and (prefix.startswith(".") or not name.startswith("."))
    ]
    found.sort(key=lambda item: (not item[1], item[0].lower()))
    joined = f"{folder}/" if folder else ""
    return [(f"{joined}{name}{'/' if is_dir else ''}", is_dir) for name, is_dir in found][
        :MAX_COMPLETIONS
    ]


def _is_dir(entry: os.DirEntry[str]) -> bool:
    try:
        return entry.is_dir()
    except OSError:
        return False
