"""Tool names as other agents spell them, so their permission rules and hook matchers work here.

Claude Code calls cairn's ``run_shell_command`` ``Bash``, ``read_file`` ``Read`` and so on; Qwen
Code's older names (``replace``, ``search_file_content``) and display names (``Shell``,
``ReadFile``) are accepted too. A name that is no alias is its own canonical name (MCP tools,
``mcp__server__tool``, keep theirs).
"""

from __future__ import annotations

from collections.abc import Mapping
from enum import StrEnum

__all__ = [
    "CLAUDE_ALIASES",
    "QWEN_ALIASES",
    "TOOL_ALIASES",
    "ToolName",
    "aliases_of",
    "canonical_tool_name",
]


class ToolName(StrEnum):
    """The built-in tools' registered names: the one spelling every layer compares with."""

    SHELL = "run_shell_command"
    READ_FILE = "read_file"
    WRITE_FILE = "write_file"
    EDIT = "edit"
    GLOB = "glob"
    GREP = "grep_search"
    LIST_DIRECTORY = "list_directory"
    WEB_FETCH = "web_fetch"
    WEB_SEARCH = "web_search"
    TODO_WRITE = "todo_write"
    AGENT = "agent"
    SKILL = "skill"
    ASK_USER_QUESTION = "ask_user_question"


CLAUDE_ALIASES: Mapping[str, str] = {
    "Bash": ToolName.SHELL,
    "Read": ToolName.READ_FILE,
    "Write": ToolName.WRITE_FILE,
    "Edit": ToolName.EDIT,
    "MultiEdit": ToolName.EDIT,
    "Glob": ToolName.GLOB,
    "Grep": ToolName.GREP,
    "LS": ToolName.LIST_DIRECTORY,
    "WebFetch": ToolName.WEB_FETCH,
    "WebSearch": ToolName.WEB_SEARCH,
    "TodoWrite": ToolName.TODO_WRITE,
    "Task": ToolName.AGENT,
    "Agent": ToolName.AGENT,  # Task's name since Claude Code 2.1
    "Skill": ToolName.SKILL,
    "AskUserQuestion": ToolName.ASK_USER_QUESTION,
}
# Qwen Code's display and legacy names (its hooks see the registered names, cairn's).
QWEN_ALIASES: Mapping[str, str] = {
    "Shell": ToolName.SHELL,
    "ReadFile": ToolName.READ_FILE,
    "WriteFile": ToolName.WRITE_FILE,
    "ReadFolder": ToolName.LIST_DIRECTORY,
    "ListFiles": ToolName.LIST_DIRECTORY,
    "FindFiles": ToolName.GLOB,
    "SearchText": ToolName.GREP,
    "SearchFiles": ToolName.GREP,
    "replace": ToolName.EDIT,
    "search_file_content": ToolName.GREP,
    "task": ToolName.AGENT,
}
TOOL_ALIASES: Mapping[str, str] = {**CLAUDE_ALIASES, **QWEN_ALIASES}

_ALIASES_OF: dict[str, tuple[str, ...]] = {}
for _alias, _canonical in TOOL_ALIASES.items():
    _ALIASES_OF[_canonical] = (*_ALIASES_OF.get(_canonical, ()), _alias)


def canonical_tool_name(name: str) -> str:
    """The registered name for ``name`` (``Bash`` -> ``run_shell_command``)."""
    return TOOL_ALIASES.get(name, name)


def aliases_of(name: str) -> tuple[str, ...]:
    """The other names of the tool ``name`` (``run_shell_command`` -> ``Bash``, ``Shell``)."""
    return _ALIASES_OF.get(canonical_tool_name(name), ())
