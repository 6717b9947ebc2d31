"""Command files: Claude Code's Markdown, Qwen Code's TOML, their names and their problems."""

from __future__ import annotations

import os
from pathlib import Path

from cairn.config.extension_folders import Folder
from cairn.extensions.commands import load_commands

from .helpers import write

CLAUDE_COMMIT = """\
---
allowed-tools: Bash(git add:*), Bash(git status:*), Bash(git commit:*)
argument-hint: [message]
description: Create a git commit
model: claude-3-5-haiku-20241022
---

## Context

- Current git status: !`git status`

## Your task

Based on the above changes, create a single git commit: $ARGUMENTS
"""


def _folder(tmp_path: Path, origin: str = "claude") -> Folder:
    return Folder(tmp_path / f".{origin}" / "commands", "project", origin)  # type: ignore[arg-type]


def test_a_claude_command_file_copied_as_is_is_read_with_its_front_matter(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    write(folder.path / "commit.md", CLAUDE_COMMIT)

    commands, warnings = load_commands(folder)

    assert warnings == []
    (command,) = commands
    assert command.name == "commit"
    assert command.description == "Create a git commit"
    assert command.argument_hint == "[message]"
    assert command.model == "claude-3-5-haiku-20241022"
    assert command.allowed_tools == (
        "Bash(git add:*)",
        "Bash(git status:*)",
        "Bash(git commit:*)",
    )
    assert command.dialect == "command"
    assert command.body.startswith("## Context")
    assert command.where == ".claude/commands/commit.md"


def test_sub_folders_namespace_commands(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "cairn")
    write(folder.path / "git" / "commit.md", "Commit it.")
    write(folder.path / "frontend" / "ui" / "component.md", "Make a component.")

    commands, _ = load_commands(folder)

    assert sorted(c.name for c in commands) == ["frontend:ui:component", "git:commit"]


def test_a_command_without_description_is_described_by_its_first_line(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "cairn")
    write(folder.path / "explain.md", "\n# Explain the selected code\n\nIn detail.")

    (command,), _ = load_commands(folder)

    assert command.description == "Explain the selected code"


def test_qwen_toml_and_markdown_commands_use_qwen_syntax(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "qwen")
    write(
        folder.path / "review.toml",
        'description = "Review code"\nprompt = """Review {{args}}."""\n',
    )
    write(folder.path / "plan.md", "---\ndescription: Plan\n---\nPlan {{args}}")

    commands, warnings = load_commands(folder)

    assert warnings == []
    by_name = {c.name: c for c in commands}
    assert by_name["review"].description == "Review code"
    assert by_name["review"].body == "Review {{args}}."
    assert {c.dialect for c in commands} == {"qwen"}


def test_a_toml_file_in_cairns_folder_is_read_in_qwen_syntax(tmp_path: Path) -> None:
    folder = _folder(tmp_path, "cairn")
    write(folder.path / "fix.toml", 'prompt = "Fix {{args}}"\n')

    (command,), _ = load_commands(folder)

    assert command.dialect == "qwen"


def test_bad_files_are_skipped_each_with_one_warning_naming_it(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    write(folder.path / "good.md", "Fine.")
    write(folder.path / "broken.md", "---\ndescription: [never closed\n  - a: b: c\n---\nX")
    write(folder.path / "open.md", "---\ndescription: x\n")
    write(folder.path / "bad.toml", "prompt = \n")
    write(folder.path / "noprompt.toml", 'description = "no prompt"\n')
    write(folder.path / "9lives.md", "Starts with a digit.")
    (folder.path / "binary.md").write_bytes(b"\xff\xfe not utf-8")
    os.mkfifo(folder.path / "fifo.md")

    commands, warnings = load_commands(folder)

    assert [c.name for c in commands] == ["good"]
    assert len(warnings) == 7
    for name in (
        "broken.md",
        "open.md",
        "bad.toml",
        "noprompt.toml",
        "9lives.md",
        "binary.md",
        "fifo.md",
    ):
        (warning,) = [w for w in warnings if f".claude/commands/{name} is skipped" in w]
        assert warning.endswith(".")
    assert any("not UTF-8" in w for w in warnings)
    assert any("not a regular file" in w for w in warnings)


def test_a_missing_folder_has_no_commands_and_no_warnings(tmp_path: Path) -> None:
    assert load_commands(_folder(tmp_path)) == ([], [])


def test_hidden_files_and_other_suffixes_are_ignored(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    write(folder.path / ".draft.md", "Hidden.")
    write(folder.path / "notes.txt", "Not a command.")
    write(folder.path / ".git" / "x.md", "Inside a hidden folder.")

    assert load_commands(folder) == ([], [])


def test_a_folder_linked_into_itself_is_searched_once(tmp_path: Path) -> None:
    folder = _folder(tmp_path)
    write(folder.path / "a.md", "A")
    (folder.path / "loop").symlink_to(folder.path)

    commands, _ = load_commands(folder)

    assert "a" in [c.name for c in commands]
    assert len(commands) <= 2  # a, and at most loop:a before the loop is noticed
