"""Completion of slash commands and @path mentions, without a terminal."""

from __future__ import annotations

from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st

from cairn.session.commands import COMMANDS
from cairn.ui.completion import (
    BUILTIN_COMMANDS,
    UI_COMMANDS,
    all_commands,
    complete,
    complete_command,
    complete_mention,
)
from cairn.vocabulary.events import CommandInfo


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    (tmp_path / "src" / "cairn").mkdir(parents=True)
    (tmp_path / "src" / "main.py").write_text("")
    (tmp_path / "src" / "map data.txt").write_text("")
    (tmp_path / "README.md").write_text("")
    (tmp_path / ".env").write_text("")
    (tmp_path / ".git").mkdir()
    return tmp_path


def labels(completions) -> list[str]:
    return [c.label for c in completions]


def test_every_shared_and_ui_command_is_offered():
    names = {c.name for c in all_commands()}

    assert {c.name for c in COMMANDS} <= names
    assert {"resume", "settings", "quit"} <= {c.name for c in UI_COMMANDS}


def test_slash_prefix_offers_matching_commands_with_their_argument_hint():
    found = complete_command("/re", 3)

    assert labels(found) == [
        "/recap",
        "/remember <text>",
        "/rewind <N [mode]>",
        "/resume <session id>",
    ]
    assert found[1].insert == "/remember "  # a command with an argument gets a space
    assert found[0].insert == "/recap"


def test_an_exact_command_comes_before_longer_ones_it_begins():
    """Issue #30: `/mcp` + Enter ran an MCP prompt (`/mcp__srv__review`), listed first."""
    commands = [CommandInfo("mcp__srv__review", "an MCP prompt", "path"), *BUILTIN_COMMANDS]

    assert labels(complete_command("/mcp", 4, commands))[:2] == ["/mcp", "/mcp__srv__review <path>"]


def test_a_hint_in_its_own_brackets_is_shown_as_written():
    """Issue #30: Claude Code's `argument-hint: [pr-number] [priority]` showed as
    `<[pr-number] [priority]>`."""
    commands = [CommandInfo("review-pr", "Review a PR", "[pr-number] [priority]")]

    assert labels(complete_command("/review", 7, commands)) == ["/review-pr [pr-number] [priority]"]


def test_commands_are_not_offered_after_the_first_space():
    assert complete_command("/remember some", 14) == []


def test_commands_are_not_offered_inside_a_sentence():
    assert complete_command("see /re", 7) == []


def test_mention_lists_the_folder_dirs_first_hidden_and_vcs_skipped(tree):
    found = complete_mention("read @", 6, tree)

    assert labels(found) == ["@src/", "@README.md"]


def test_mention_completes_inside_a_subfolder(tree):
    found = complete_mention("look at @src/ma please", 15, tree)

    assert labels(found) == ["@src/main.py", "@src/map data.txt"]
    assert found[1].insert == "src/map\\ data.txt"  # spaces escaped
    assert (found[0].start, found[0].end) == (9, 15)


def test_hidden_files_are_offered_when_asked_for(tree):
    assert labels(complete_mention("@.e", 3, tree)) == ["@.env"]


def test_an_at_sign_inside_a_word_is_not_a_mention(tree):
    assert complete_mention("me@ex", 5, tree) == []


def test_a_missing_folder_offers_nothing(tree):
    assert complete_mention("@nowhere/x", 10, tree) == []


@given(st.text(max_size=40), st.integers(min_value=0, max_value=40))
def test_any_text_and_cursor_never_raise(text, cursor):
    complete(text, min(cursor, len(text)), Path("/nonexistent-cairn-dir"))
