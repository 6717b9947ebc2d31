"""Skill folders in Anthropic's SKILL.md format."""

from __future__ import annotations

from pathlib import Path

from cairn.config.extension_folders import Folder
from cairn.extensions.skills import load_skills

from .helpers import write

PDF_SKILL = """\
---
name: pdf
description: Extract text and tables from PDF files, fill forms, merge documents. \
Use when working with PDF files.
license: Proprietary. LICENSE.txt has complete terms
---

# PDF Processing Guide

For advanced features, see reference.md.
"""


def test_an_anthropic_skill_folder_copied_as_is_is_read(tmp_path: Path) -> None:
    folder = Folder(tmp_path / ".claude" / "skills", "project", "claude")
    write(folder.path / "pdf" / "SKILL.md", PDF_SKILL)
    write(folder.path / "pdf" / "reference.md", "More.")
    write(folder.path / "pdf" / "scripts" / "fill_form.py", "print('x')")

    (skill,), warnings = load_skills(folder)

    assert warnings == []
    assert skill.name == "pdf"
    assert skill.description.startswith("Extract text and tables")
    assert skill.body.startswith("# PDF Processing Guide")
    assert skill.model_invocable and skill.user_invocable
    assert skill.other_files() == ["reference.md", "scripts/fill_form.py"]
    assert skill.where == ".claude/skills/pdf/SKILL.md"


def test_invocation_keys_and_the_listing_cap(tmp_path: Path) -> None:
    folder = Folder(tmp_path / "skills", "user", "cairn")
    write(
        folder.path / "deploy" / "SKILL.md",
        "---\ndescription: Deploy\ndisable-model-invocation: true\nwhen_to_use: on request\n"
        "arguments: env version\n---\nDeploy $env",
    )
    write(
        folder.path / "legacy" / "SKILL.md",
        "---\ndescription: " + "x" * 2000 + "\nuser-invocable: no\n---\nOld system.",
    )

    skills, _ = load_skills(folder)
    by_name = {s.name: s for s in skills}

    assert not by_name["deploy"].model_invocable
    assert by_name["deploy"].arguments == ("env", "version")
    assert by_name["deploy"].listing == "Deploy on request"
    assert not by_name["legacy"].user_invocable
    assert len(by_name["legacy"].listing) == 1536


def test_folders_without_skill_md_are_not_skills_and_bad_ones_warn(tmp_path: Path) -> None:
    folder = Folder(tmp_path / "skills", "project", "cairn")
    write(folder.path / "notes" / "README.md", "not a skill")
    write(folder.path / "empty" / "SKILL.md", "---\nname: empty\n---\n")
    write(folder.path / "bad name" / "SKILL.md", "---\ndescription: x\n---\nbody")

    skills, warnings = load_skills(folder)

    assert skills == []
    assert len(warnings) == 2
    assert any(
        ".cairn/skills/empty/SKILL.md is skipped: it has no `description`" in w for w in warnings
    )
    assert any(".cairn/skills/bad name/SKILL.md is skipped" in w for w in warnings)
