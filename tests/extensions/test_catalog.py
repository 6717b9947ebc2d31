"""The catalog: precedence between folders, the built-in agent, reading again on change."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cairn.extensions.catalog import Catalog

from .helpers import write


@pytest.fixture
def catalog(tmp_path: Path) -> Catalog:
    return Catalog(
        project_root=tmp_path / "project", cairn_home=tmp_path / "cairn", home=tmp_path / "home"
    )


def test_cairns_folders_win_and_yours_win_over_the_projects(
    catalog: Catalog, tmp_path: Path
) -> None:
    project, cairn, home = tmp_path / "project", tmp_path / "cairn", tmp_path / "home"
    write(project / ".claude" / "commands" / "deploy.md", "claude project")
    write(home / ".claude" / "commands" / "deploy.md", "claude user")
    write(project / ".cairn" / "commands" / "deploy.md", "cairn project")
    write(project / ".qwen" / "commands" / "review.toml", 'prompt = "qwen review"')
    write(project / ".claude" / "commands" / "review.md", "claude review")
    write(cairn / "commands" / "mine.md", "cairn user")
    write(project / ".cairn" / "commands" / "mine.md", "cairn project mine")

    assert catalog.refresh() is True
    bodies = {c.name: c.body for c in catalog.state.commands}

    assert bodies == {"deploy": "cairn project", "review": "claude review", "mine": "cairn user"}


def test_imports_can_be_turned_off(tmp_path: Path) -> None:
    write(tmp_path / "project" / ".claude" / "commands" / "x.md", "X")
    write(
        tmp_path / "project" / ".claude" / "agents" / "a.md", "---\nname: a\ndescription: d\n---\nP"
    )
    catalog = Catalog(
        project_root=tmp_path / "project",
        cairn_home=tmp_path / "cairn",
        home=None,
        command_imports=(),
        agent_imports=(),
    )
    catalog.refresh()

    assert catalog.state.commands == ()
    assert [a.name for a in catalog.state.agents] == ["general-purpose"]


def test_the_general_purpose_agent_is_built_in_and_a_file_can_replace_it(
    catalog: Catalog, tmp_path: Path
) -> None:
    catalog.refresh()
    assert catalog.state.agent("general-purpose") is not None
    assert catalog.state.agent("general-purpose").path is None  # type: ignore[union-attr]

    write(
        tmp_path / "project" / ".cairn" / "agents" / "gp.md",
        "---\nname: general-purpose\ndescription: mine\n---\nMy prompt.",
    )
    assert catalog.refresh() is True
    assert catalog.state.agent("general-purpose").description == "mine"  # type: ignore[union-attr]


def test_added_changed_and_removed_files_are_noticed(catalog: Catalog, tmp_path: Path) -> None:
    folder = tmp_path / "project" / ".cairn" / "commands"
    assert catalog.refresh() is False  # nothing there: the empty state stands
    path = write(folder / "a.md", "one")
    assert catalog.refresh() is True
    assert catalog.refresh() is False
    path.write_text("two, longer")
    assert catalog.refresh() is True
    assert catalog.state.commands[0].body == "two, longer"
    write(folder / "sub" / "b.md", "B")
    assert catalog.refresh() is True
    assert {c.name for c in catalog.state.commands} == {"a", "sub:b"}
    os.remove(path)
    assert catalog.refresh() is True
    assert [c.name for c in catalog.state.commands] == ["sub:b"]


def test_each_warning_is_given_once(catalog: Catalog, tmp_path: Path) -> None:
    write(tmp_path / "project" / ".cairn" / "commands" / "bad.md", "---\nnever closed")
    catalog.refresh()
    (warning,) = catalog.take_warnings()
    assert warning.startswith(".cairn/commands/bad.md is skipped")
    write(tmp_path / "project" / ".cairn" / "commands" / "good.md", "fine")
    catalog.refresh()
    assert catalog.take_warnings() == []
