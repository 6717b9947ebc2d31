"""The command, skill and agent files shown in docs/commands.md, docs/skills.md and
docs/agents.md, read as written."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from cairn.extensions.catalog import Catalog
from cairn.extensions.templates import expand_template

from .helpers import write

DOCS = Path(__file__).resolve().parents[2] / "docs"
_EXAMPLE = re.compile(
    r"<!-- (?P<kind>[\w-]+): (?P<arg>[^>]*?) -->\n```\w*\n(?P<body>.*?)^```", re.M | re.S
)


def examples(page: str, kind: str) -> list[tuple[str, str]]:
    text = (DOCS / page).read_text(encoding="utf-8")
    return [(m["arg"], m["body"]) for m in _EXAMPLE.finditer(text) if m["kind"] == kind]


def catalog_of(tmp_path: Path, files: list[tuple[str, str]]) -> Catalog:
    project = tmp_path / "project"
    for where, body in files:
        write(project / where, body)
    catalog = Catalog(project_root=project, cairn_home=tmp_path / "cairn", home=tmp_path / "home")
    catalog.refresh()
    return catalog


def test_the_pages_show_files() -> None:
    assert len(examples("commands.md", "command-file")) == 2
    assert len(examples("skills.md", "skill-file")) == 1


def test_every_documented_command_file_is_a_command_of_its_name(tmp_path: Path) -> None:
    files = examples("commands.md", "command-file")
    catalog = catalog_of(tmp_path, files)

    assert catalog.state.warnings == ()
    assert sorted(c.name for c in catalog.state.commands) == ["explain", "git:commit"]
    commit = next(c for c in catalog.state.commands if c.name == "git:commit")
    assert commit.allowed_tools == ("Bash(git add:*)", "Bash(git status:*)", "Bash(git commit:*)")
    assert (commit.description, commit.argument_hint) == ("Create a git commit", "[message]")


@pytest.mark.parametrize(("line", "sent"), examples("commands.md", "command-sent"))
def test_the_documented_prompt_is_what_the_command_sends(
    tmp_path: Path, line: str, sent: str
) -> None:
    name, args = line.lstrip("/").split(" ", 1)
    catalog = catalog_of(tmp_path, examples("commands.md", "command-file"))
    command = next(c for c in catalog.state.commands if c.name == name)

    expansion = expand_template(command.body, args, dialect=command.dialect)
    outputs = [f"(the output of {step.command})" for step in expansion.steps]

    assert expansion.text(outputs) == sent.rstrip("\n")


def test_the_documented_skill_is_read_with_its_description(tmp_path: Path) -> None:
    catalog = catalog_of(tmp_path, examples("skills.md", "skill-file"))

    assert catalog.state.warnings == ()
    (skill,) = catalog.state.skills
    assert skill.name == "changelog"
    assert skill.listing.startswith("Keep CHANGELOG.md in the Keep a Changelog format.")


def test_the_documented_agent_is_read_with_its_tools(tmp_path: Path) -> None:
    (example,) = examples("agents.md", "agent-file")
    catalog = catalog_of(tmp_path, [example])

    assert catalog.state.warnings == ()
    reviewer = catalog.state.agent("reviewer")
    assert reviewer is not None
    assert reviewer.tools == ("Read", "Grep", "Glob", "Bash")
    assert reviewer.model is None  # inherit
    assert reviewer.system_prompt.startswith("You review code changes.")
