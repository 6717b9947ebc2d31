"""Hooks from Claude Code's settings files, read as Claude Code reads them.

The project's ``.claude/settings.json`` and ``.claude/settings.local.json``
(``claudeHooks.project``, on by default; they need the folder trusted, as
``.cairn/settings.json`` does: :mod:`cairn.config.trust` lists them with the same function) and
``~/.claude/settings.json`` (``claudeHooks.user``, off by default). Only their ``hooks`` are
read; every group gets ``"toolNames": "claude"``, so its hooks see Claude Code's tool names and
arguments.

These files are Claude Code's, not cairn's: what cairn cannot run is skipped with a warning
naming it (an event cairn does not have, an ``http``, ``agent`` or ``mcp_tool`` hook, a
PowerShell or exec-form hook, an invalid entry), never a reason not to start. A file that is not
valid JSON is skipped whole, with a warning. ``disableAllHooks: true`` in one of them turns off
that file's hooks.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from cairn.values import Value

__all__ = [
    "CLAUDE_PROJECT_FILES",
    "USER_SOURCE",
    "ClaudeHooks",
    "project_claude_hooks",
    "read_claude_hooks",
    "user_claude_hooks",
]

CLAUDE_PROJECT_FILES = (".claude/settings.json", ".claude/settings.local.json")
USER_SOURCE = "~/.claude/settings.json"
# Claude Code's handler types cairn has no runner for.
_UNSUPPORTED_TYPES = frozenset({"http", "agent", "mcp_tool"})
# A handler's keys cairn reads (the rest of Claude Code's, `statusMessage` and `once`, change
# nothing cairn does).
_KEPT_KEYS = ("type", "command", "prompt", "model", "timeout", "async", "if", "statusMessage")


class ClaudeHooks(Value):
    """The hooks of one Claude Code settings file, in cairn's ``hooks`` shape."""

    source: str  # as people see it: ".claude/settings.json", "~/.claude/settings.json"
    path: Path
    hooks: dict[str, list[dict[str, Any]]]  # event -> groups, each with "toolNames": "claude"
    warnings: tuple[str, ...] = ()

    def commands(self) -> list[tuple[str, str, dict[str, Any]]]:
        """``(event, what it runs, its group)`` of each hook: the command, or the prompt."""
        found = []
        for event, groups in self.hooks.items():
            for group in groups:
                for hook in group["hooks"]:
                    text = hook.get("command") if hook.get("type", "command") == "command" else None
                    found.append((event, text or f"prompt: {hook.get('prompt', '')}", group))
        return found


def project_claude_hooks(root: Path) -> list[ClaudeHooks]:
    """The hooks of ``root``'s Claude Code project files that exist, in settings order. At the
    home folder ``.claude/settings.json`` is the user's file (:func:`user_claude_hooks`)."""
    home = _home()
    found = []
    for relative in CLAUDE_PROJECT_FILES:
        path = root / relative
        if home is not None and path.absolute() == (home / ".claude" / "settings.json"):
            continue
        hooks = read_claude_hooks(path, relative)
        if hooks is not None:
            found.append(hooks)
    return found


def user_claude_hooks() -> ClaudeHooks | None:
    """The hooks of ``~/.claude/settings.json``, if it exists."""
    home = _home()
    if home is None:
        return None
    return read_claude_hooks(home / ".claude" / "settings.json", USER_SOURCE)


def read_claude_hooks(path: Path, source: str) -> ClaudeHooks | None:
    """``path``'s hooks; ``None`` when there is no such file."""
    from cairn.config.loader import SettingsError, read_settings_file

    if not os.path.lexists(path):
        return None
    try:
        raw = read_settings_file(path)
    except SettingsError as exc:
        problem = str(exc).splitlines()[0]
        return ClaudeHooks(source, path, {}, (f"{problem}; its hooks are not run",))
    if raw.get("disableAllHooks") is True:
        return ClaudeHooks(source, path, {})
    section = raw.get("hooks")
    if section is None:
        return ClaudeHooks(source, path, {})
    warnings: list[str] = []
    if not isinstance(section, Mapping):
        return ClaudeHooks(source, path, {}, (f"{source}: `hooks` is not an object; ignored",))
    hooks: dict[str, list[dict[str, Any]]] = {}
    unknown: list[str] = []
    events = _events()
    for event, groups in section.items():
        if event not in events:
            unknown.append(str(event))
            continue
        kept = _groups(source, event, groups, warnings)
        if kept:
            hooks[event] = kept
    if unknown:
        warnings.insert(
            0,
            f"{source}: cairn has no {', '.join(unknown)} event; those hooks are not run "
            "(docs/hooks.md)",
        )
    return ClaudeHooks(source, path, hooks, tuple(warnings))


def _events() -> frozenset[str]:
    from cairn.config.settings import HooksSettings

    return frozenset(info.alias or name for name, info in HooksSettings.model_fields.items())


def _groups(source: str, event: str, groups: Any, warnings: list[str]) -> list[dict[str, Any]]:
    where = f"{source}: hooks.{event}"
    if not isinstance(groups, list):
        warnings.append(f"{where} is not a list; ignored")
        return []
    kept = []
    for index, group in enumerate(groups):
        at = f"{where}[{index}]"
        if not isinstance(group, Mapping) or not isinstance(group.get("hooks", []), list):
            warnings.append(f"{at} is not a matcher group with a list of hooks; ignored")
            continue
        matcher = group.get("matcher", "")
        if not isinstance(matcher, str):
            warnings.append(f"{at}.matcher is not a string; the group is ignored")
            continue
        handlers = [
            cleaned
            for number, handler in enumerate(group.get("hooks", []))
            if (cleaned := _handler(f"{at}.hooks[{number}]", handler, warnings)) is not None
        ]
        if handlers:
            kept.append({"matcher": matcher, "toolNames": "claude", "hooks": handlers})
    return kept


def _handler(at: str, handler: Any, warnings: list[str]) -> dict[str, Any] | None:
    from cairn.config.loader import ValidationError, describe_validation_error
    from cairn.config.settings import HookCommand

    if not isinstance(handler, Mapping):
        warnings.append(f"{at} is not an object; skipped")
        return None
    kind = handler.get("type", "command")
    if kind in _UNSUPPORTED_TYPES:
        warnings.append(f"{at}: cairn does not run `{kind}` hooks; skipped")
        return None
    shell = handler.get("shell", "bash")
    if shell != "bash":
        warnings.append(f"{at}: cairn runs hooks with bash, not {shell!r}; skipped")
        return None
    if "args" in handler:
        warnings.append(f"{at}: cairn does not run exec-form hooks (`args`); skipped")
        return None
    cleaned = {key: handler[key] for key in _KEPT_KEYS if key in handler}
    if handler.get("asyncRewake") is True:
        cleaned["async"] = True  # runs in the background; cairn does not wake the agent
    try:
        HookCommand.model_validate(cleaned, by_name=False)
    except ValidationError as exc:
        problem = describe_validation_error(exc, at, "", data=cleaned).splitlines()[0]
        warnings.append(f"{problem}; skipped")
        return None
    return cleaned


def _home() -> Path | None:
    try:
        return Path.home()
    except RuntimeError:
        return None
