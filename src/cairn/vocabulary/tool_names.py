"""Tool names as other agents spell them, so their permission rules and hook matchers work here.

Claude Code calls cairn's ``run_shell_command`` ``Bash``, ``read_file`` ``Read`` and so on; Qwen
Code's older names (``replace``, ``search_file_content``) and display names (``Shell``,
``ReadFile``) are accepted too. A name that is no alias is its own canonical name (MCP tools,
``mcp__server__tool``, keep theirs).
"""

from __future__ import annotations

from collections.abc import Mapping

__all__ = ["TOOL_ALIASES", "aliases_of", "canonical_tool_name"]

TOOL_ALIASES: Mapping[str, str] = {
    # Claude Code
    "Bash": "run_shell_command",
    "Read": "read_file",
    "Write": "write_file",
    "Edit": "edit",
    "MultiEdit": "edit",
    "Glob": "glob",
    "Grep": "grep_search",
    "LS": "list_directory",
    "WebFetch": "web_fetch",
    "WebSearch": "web_search",
    "TodoWrite": "todo_write",
    "Task": "agent",
    "Skill": "skill",
    "AskUserQuestion": "ask_user_question",
    # Qwen Code's display and legacy names
    "Shell": "run_shell_command",
    "ReadFile": "read_file",
    "WriteFile": "write_file",
    "ReadFolder": "list_directory",
    "FindFiles": "glob",
    "SearchText": "grep_search",
    "replace": "edit",
    "search_file_content": "grep_search",
    "task": "agent",
}

_ALIASES_OF: dict[str, tuple[str, ...]] = {}
for _alias, _canonical in TOOL_ALIASES.items():
    _ALIASES_OF[_canonical] = (*_ALIASES_OF.get(_canonical, ()), _alias)


def canonical_tool_name(name: str) -> str:
    """The registered name for ``name`` (``Bash`` -> ``run_shell_command``)."""
    return TOOL_ALIASES.get(name, name)


def aliases_of(name: str) -> tuple[str, ...]:
    """The other names of the tool ``name`` (``run_shell_command`` -> ``Bash``, ``Shell``)."""
    return _ALIASES_OF.get(canonical_tool_name(name), ())
