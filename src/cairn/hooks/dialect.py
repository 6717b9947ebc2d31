"""Which names a hook sees: Claude Code's (``Bash``, ``file_path`` absolute) or cairn's own.

A hook written for Claude Code compares ``tool_name`` with ``"Bash"`` and reads
``tool_input.command``; one written for cairn (or Qwen Code, whose tool names cairn's are)
compares with ``"run_shell_command"``. :func:`tool_event` gives a tool event's fields as the hook's
dialect names them, and :func:`tool_arguments` turns an ``updatedInput`` written in that
dialect back into the arguments cairn's tool takes.

What differs for Claude Code: the tool names (:data:`CLAUDE_TOOL_NAMES`; MCP tools keep
``mcp__server__tool``), the path of ``Read``, ``Write``, ``Edit`` and ``LS`` (absolute, as Claude
Code gives it), ``Read``'s ``offset`` (1-based, cairn's is 0-based), ``Bash``'s ``timeout``
(milliseconds, cairn's are seconds), the permission modes (``acceptEdits``,
``bypassPermissions``) and ``tool_response`` (Claude Code's ``filePath``, ``success``,
``stdout`` beside cairn's ``output``).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any, Literal, TypeAlias

from cairn.vocabulary.tool_names import QWEN_ALIASES, ToolName, canonical_tool_name

__all__ = [
    "CLAUDE_PERMISSION_MODES",
    "CLAUDE_TOOL_NAMES",
    "Dialect",
    "claude_tool_name",
    "names_only_cairn_tools",
    "permission_mode",
    "tool_arguments",
    "tool_event",
]

Dialect: TypeAlias = Literal["claude", "cairn"]

# cairn's built-in tools as Claude Code names them in ``tool_name``.
CLAUDE_TOOL_NAMES: Mapping[str, str] = {
    ToolName.SHELL: "Bash",
    ToolName.READ_FILE: "Read",
    ToolName.WRITE_FILE: "Write",
    ToolName.EDIT: "Edit",
    ToolName.GLOB: "Glob",
    ToolName.GREP: "Grep",
    ToolName.LIST_DIRECTORY: "LS",
    ToolName.WEB_FETCH: "WebFetch",
    ToolName.WEB_SEARCH: "WebSearch",
    ToolName.TODO_WRITE: "TodoWrite",
    ToolName.AGENT: "Task",
    ToolName.SKILL: "Skill",
    ToolName.ASK_USER_QUESTION: "AskUserQuestion",
}
# cairn's approval modes as Claude Code's ``permission_mode`` names them.
CLAUDE_PERMISSION_MODES: Mapping[str, str] = {
    "default": "default",
    "plan": "plan",
    "auto-edit": "acceptEdits",
    "yolo": "bypassPermissions",
}
# The argument holding a path Claude Code gives as an absolute path, by tool.
_ABSOLUTE_PATHS: Mapping[str, str] = {
    ToolName.READ_FILE: "file_path",
    ToolName.WRITE_FILE: "file_path",
    ToolName.EDIT: "file_path",
    ToolName.LIST_DIRECTORY: "path",
}
_FILE_TOOLS = frozenset({ToolName.READ_FILE, ToolName.WRITE_FILE, ToolName.EDIT})
_MS_PER_SECOND = 1000


def claude_tool_name(name: str) -> str:
    """``run_shell_command`` -> ``Bash``; an MCP tool or one Claude Code lacks keeps its name."""
    return CLAUDE_TOOL_NAMES.get(canonical_tool_name(name), name)


def permission_mode(mode: str, dialect: Dialect) -> str:
    """cairn's approval ``mode`` as ``dialect`` names it in ``permission_mode``."""
    return CLAUDE_PERMISSION_MODES.get(mode, mode) if dialect == "claude" else mode


def tool_event(
    dialect: Dialect,
    tool_name: str,
    tool_input: Mapping[str, Any],
    cwd: str,
    tool_response: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """``tool_name``, ``tool_input`` (and ``tool_response``) of a tool event for ``dialect``."""
    fields: dict[str, Any] = {"tool_name": tool_name, "tool_input": dict(tool_input)}
    if tool_response is not None:
        fields["tool_response"] = dict(tool_response)
    if dialect == "cairn":
        return fields
    tool = canonical_tool_name(tool_name)
    fields["tool_name"] = claude_tool_name(tool_name)
    fields["tool_input"] = _claude_input(tool, tool_input, cwd)
    if tool_response is not None:
        fields["tool_response"] = _claude_response(tool, fields["tool_input"], tool_response)
    return fields


def tool_arguments(dialect: Dialect, tool_name: str, updated: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments cairn's tool ``tool_name`` runs with, from a hook's ``updatedInput``."""
    arguments = dict(updated)
    if dialect == "cairn":
        return arguments
    tool = canonical_tool_name(tool_name)
    if tool == ToolName.SHELL and _is_number(arguments.get("timeout")):
        arguments["timeout"] = arguments["timeout"] / _MS_PER_SECOND
    if tool == ToolName.READ_FILE and _is_int(arguments.get("offset")):
        arguments["offset"] = max(arguments["offset"] - 1, 0)
    return arguments


def names_only_cairn_tools(matcher: str) -> bool:
    """Does ``matcher`` name tools, all of them by cairn's or Qwen Code's names? ``"Bash"``,
    ``".*"`` and ``"mcp__github__.*"`` do not; ``"run_shell_command"``, ``"edit|write_file"``
    and ``"Shell"`` do."""
    entries = [entry.strip() for entry in matcher.split("|")]
    if not entries or not all(entries):
        return False
    return all(entry in CLAUDE_TOOL_NAMES or entry in QWEN_ALIASES for entry in entries)


def _claude_input(tool: str, tool_input: Mapping[str, Any], cwd: str) -> dict[str, Any]:
    claude = dict(tool_input)
    key = _ABSOLUTE_PATHS.get(tool)
    path = claude.get(key) if key is not None else None
    if key is not None and isinstance(path, str) and path.strip() and "\x00" not in path:
        claude[key] = os.path.normpath(os.path.join(cwd, os.path.expanduser(path)))
    if tool == ToolName.SHELL and _is_number(claude.get("timeout")):
        claude["timeout"] = round(claude["timeout"] * _MS_PER_SECOND)
    if tool == ToolName.READ_FILE and _is_int(claude.get("offset")):
        claude["offset"] = claude["offset"] + 1
    return claude


def _claude_response(
    tool: str, claude_input: Mapping[str, Any], response: Mapping[str, Any]
) -> dict[str, Any]:
    """cairn's response (``output``), with the fields Claude Code's hooks commonly read."""
    claude = dict(response)
    output = response.get("output")
    if tool in _FILE_TOOLS:
        claude.setdefault("filePath", claude_input.get("file_path"))
        claude.setdefault("success", "error" not in response)
    elif tool == ToolName.SHELL and isinstance(output, str):
        claude.setdefault("stdout", output)
        claude.setdefault("stderr", "")
        claude.setdefault("interrupted", False)
    return claude


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)
