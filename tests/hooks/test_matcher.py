"""ToolMatcher: which PreToolUse hook groups apply to a tool name."""

from __future__ import annotations

import re

import pytest

from cairn.hooks import ToolMatcher


@pytest.mark.parametrize("pattern", ["", "*", ".*", "  *  "])
def test_match_all_patterns_match_every_tool(pattern):
    assert ToolMatcher.compile(pattern).matches("anything_at_all")


@pytest.mark.parametrize(
    ("pattern", "tool", "expected"),
    [
        ("edit", "edit", True),
        ("edit", "write_file", False),
        ("edit|write_file", "write_file", True),
        ("edit | write_file", "write_file", True),
        ("edit|write_file", "read_file", False),
        ("^read_", "read_file", True),
        ("^read_", "spread_file", False),
        ("file", "read_file", True),
        ("^run_shell_command$", "run_shell_command", True),
        ("^(edit|glob)$", "glob", True),
    ],
)
def test_matcher_against_tool_names(pattern, tool, expected):
    assert ToolMatcher.compile(pattern).matches(tool) is expected


def test_invalid_regex_never_matches_and_says_why():
    matcher = ToolMatcher.compile("*_file")

    assert not matcher.matches("read_file")
    assert not matcher.matches("*_file")
    assert matcher.error is not None
    assert "*_file" in matcher.error


@pytest.mark.parametrize(
    ("pattern", "tool", "expected"),
    [
        ("Bash", "run_shell_command", True),
        ("Read", "read_file", True),
        ("Write", "write_file", True),
        ("Edit", "edit", True),
        ("MultiEdit", "edit", True),
        ("Glob", "glob", True),
        ("Grep", "grep_search", True),
        ("LS", "list_directory", True),
        ("WebFetch", "web_fetch", True),
        ("TodoWrite", "todo_write", True),
        ("Edit|Write", "write_file", True),
        ("Edit|Write", "edit", True),
        ("Edit|Write", "read_file", False),
        ("Write", "todo_write", False),
        ("Read", "ask_user_question", False),
        ("Notebook.*|Bash", "run_shell_command", True),
        ("Shell", "run_shell_command", True),
        ("Bash", "read_file", False),
        ("bash", "run_shell_command", False),
    ],
)
def test_claude_code_tool_names_are_aliases(pattern, tool, expected):
    """#16: a `"matcher": "Bash"` hook never fired (cairn's tool is run_shell_command).

    As in Claude Code, another agent's name matches exactly or by whole regex match, so
    "Write" is not TodoWrite; cairn's own names keep the reference's searched match."""
    assert ToolMatcher.compile(pattern).matches(tool) is expected


def test_the_tool_names_docs_hooks_lists_are_the_aliases():
    """docs/hooks.md names Claude Code's tool names next to cairn's; they must be aliases."""
    from pathlib import Path

    from cairn.vocabulary.tool_names import TOOL_ALIASES

    doc = (Path(__file__).resolve().parents[2] / "docs" / "hooks.md").read_text()
    listing = doc.split("Tool names in `tool_name`", 1)[1].split("\n\n", 1)[0]
    pairs = re.findall(r"`([a-z_]+)` \(([^)]*)\)", listing)

    assert len(pairs) >= 8
    for name, aliases in pairs:
        for alias in re.findall(r"`([A-Za-z]+)`", aliases):
            assert TOOL_ALIASES[alias] == name
