"""ToolMatcher: which PreToolUse hook groups apply to a tool name."""

from __future__ import annotations

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
