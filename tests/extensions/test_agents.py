"""Agent definition files in Claude Code's format (and Qwen Code's keys)."""

from __future__ import annotations

from pathlib import Path

from cairn.config.extension_folders import Folder
from cairn.extensions.agents import load_agents

from .helpers import write

CODE_REVIEWER = """\
---
name: code-reviewer
description: Expert code review specialist. Use immediately after writing or modifying code.
tools: Read, Grep, Glob, Bash
model: inherit
---

You are a senior code reviewer ensuring high standards of code quality and security.
"""


def test_a_claude_agent_file_copied_as_is_is_read(tmp_path: Path) -> None:
    folder = Folder(tmp_path / ".claude" / "agents", "project", "claude")
    write(folder.path / "review" / "code-reviewer.md", CODE_REVIEWER)

    (agent,), warnings = load_agents(folder)

    assert warnings == []
    assert agent.name == "code-reviewer"
    assert agent.tools == ("Read", "Grep", "Glob", "Bash")
    assert agent.model is None  # inherit
    assert agent.system_prompt.startswith("You are a senior code reviewer")
    assert agent.where == ".claude/agents/review/code-reviewer.md"


def test_qwen_model_and_run_config_are_read(tmp_path: Path) -> None:
    folder = Folder(tmp_path / ".qwen" / "agents", "project", "qwen")
    write(
        folder.path / "tester.md",
        "---\nname: tester\ndescription: Writes tests\ntools:\n  - read_file\n  - write_file\n"
        "modelConfig:\n  model: qwen3-coder-plus\nrunConfig:\n  max_turns: 7\n---\nWrite tests.",
    )

    (agent,), _ = load_agents(folder)

    assert agent.tools == ("read_file", "write_file")
    assert agent.model == "qwen3-coder-plus"
    assert agent.max_turns == 7


def test_notes_without_a_name_are_skipped_quietly_and_broken_agents_warn(tmp_path: Path) -> None:
    folder = Folder(tmp_path / "agents", "user", "cairn")
    write(folder.path / "README.md", "# My agents\nNotes.")
    write(folder.path / "nodesc.md", "---\nname: nodesc\n---\nPrompt.")
    write(folder.path / "noprompt.md", "---\nname: noprompt\ndescription: x\n---\n")
    write(folder.path / "turns.md", "---\nname: turns\ndescription: x\nmaxTurns: 0\n---\nP")
    write(folder.path / "colon.md", "---\nname: my:agent\ndescription: x\n---\nP")

    agents, warnings = load_agents(folder)

    assert agents == []
    assert len(warnings) == 4
    assert all(w.startswith("$CAIRN_HOME/agents/") for w in warnings)


def test_claude_model_aliases_mean_the_parents_model_or_the_fast_one(tmp_path: Path) -> None:
    folder = Folder(tmp_path / "agents", "project", "claude")
    for name, model in (("a", "sonnet"), ("b", "haiku"), ("c", "inherit"), ("d", "qwen3-coder")):
        write(
            folder.path / f"{name}.md", f"---\nname: {name}\ndescription: d\nmodel: {model}\n---\nP"
        )

    agents, _ = load_agents(folder)

    assert {a.name: a.model for a in agents} == {
        "a": None,
        "b": "fast",
        "c": None,
        "d": "qwen3-coder",
    }
