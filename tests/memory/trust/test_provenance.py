"""Provenance: stamped into every memory a writer saves, read back as written."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml
from hypothesis import given
from hypothesis import strategies as st

from cairn.memory.store.parse import parse_memory_text
from cairn.memory.trust.evidence import Evidence
from cairn.memory.trust.provenance import (
    Author,
    TaskStatusRefused,
    entry_check,
    provenance_of_text,
    stamp,
)

from ...git_helpers import git, make_repository
from ..memory_helpers import NOW

MEMORY = """---
name: Tests run with make check
description: The test suite runs with `make check`
type: project
evidence: [Makefile, notes.txt]
verified_by: make check
---

Run the tests with `make check`, not pytest directly.
"""


@pytest.fixture
def workspace(tmp_path: Path) -> Path:
    repo = make_repository(tmp_path / "repo", {"Makefile": "check:\n\tpytest -q\n"})
    (repo / "notes.txt").write_text("untracked notes\n")
    return repo


@pytest.fixture
def memory_root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    (root / "project").mkdir(parents=True)
    return root


def author(workspace: Path, memory_root: Path, by: str = "extract") -> Author:
    return Author(by, "s-1", 4, workspace, memory_root, lambda: NOW)  # type: ignore[arg-type]


def front_matter(text: str) -> dict[str, object]:
    return yaml.safe_load(text.split("---\n")[1])


def test_a_memory_gets_who_when_and_its_evidence_hashed(workspace: Path, memory_root: Path) -> None:
    path = memory_root / "project" / "tests.md"
    stamped = stamp(MEMORY, previous=None, author=author(workspace, memory_root), path=path)

    fields = front_matter(stamped.content)
    assert "evidence" not in fields and "verified_by" not in fields  # moved into provenance
    block = fields["provenance"]
    assert block["by"] == "extract" and block["session"] == "s-1" and block["turn"] == 4
    assert block["at"].isoformat() == "2025-06-15T15:06:40+00:00"
    makefile, notes = block["evidence"]
    assert makefile["path"] == "Makefile"
    assert makefile["git"] == git(workspace, "hash-object", "--no-filters", "Makefile").strip()
    assert notes["path"] == "notes.txt" and "sha256" in notes  # untracked: no git hash
    assert block["verified_by"] == "make check"
    assert stamped.notes == ()
    provenance = provenance_of_text(stamped.content)
    assert provenance is not None and provenance.problems == ()
    assert [e.path for e in provenance.evidence] == ["Makefile", "notes.txt"]


def test_readers_that_know_only_name_description_and_type_read_it_as_before(
    workspace: Path, memory_root: Path
) -> None:
    """Qwen Code and Claude Code read the front matter as YAML (older Qwen Code: `key: value`
    lines); the one extra key changes neither reading of name, description and type."""
    import re

    path = memory_root / "project" / "tests.md"
    text = stamp(MEMORY, previous=None, author=author(workspace, memory_root), path=path).content
    fields = front_matter(text)
    assert (fields["name"], fields["type"]) == ("Tests run with make check", "project")
    lines = {m[1]: m[2] for m in re.finditer(r"^(name|description|type):\s*(.+)$", text, re.M)}
    assert lines == {
        "name": "Tests run with make check",
        "description": "The test suite runs with `make check`",
        "type": "project",
    }
    doc = parse_memory_text(text, path=path, relative_path="p.md", scope="project", mtime=0, size=0)
    assert not hasattr(doc, "reason") and doc.body.startswith("Run the tests")  # type: ignore[union-attr]


def test_a_rewrite_keeps_the_evidence_recorded_when_the_fact_was_learned(
    workspace: Path, memory_root: Path
) -> None:
    path = memory_root / "project" / "tests.md"
    first = stamp(MEMORY, previous=None, author=author(workspace, memory_root), path=path).content
    (workspace / "Makefile").write_text("check:\n\ttox\n")  # the fact may be stale now
    rewrite = MEMORY.replace("evidence: [Makefile, notes.txt]\n", "").replace(
        "not pytest directly.", "not pytest directly.\n\nWhy: CI runs the same."
    )

    again = stamp(
        rewrite, previous=first, author=author(workspace, memory_root, "dream"), path=path
    )

    old = provenance_of_text(first)
    new = provenance_of_text(again.content)
    assert old is not None and new is not None
    assert new.evidence == old.evidence and new.by == "dream"  # hashes kept: still stale


def test_listing_a_file_again_records_its_current_content(
    workspace: Path, memory_root: Path
) -> None:
    path = memory_root / "project" / "tests.md"
    first = stamp(MEMORY, previous=None, author=author(workspace, memory_root), path=path).content
    (workspace / "Makefile").write_text("check:\n\ttox\n")
    relisted = first.replace("provenance:", "evidence: [Makefile]\nprovenance:")

    again = stamp(relisted, previous=first, author=author(workspace, memory_root), path=path)

    new = provenance_of_text(again.content)
    assert new is not None
    [makefile] = [e for e in new.evidence if e.path == "Makefile"]
    assert makefile.digest == git(workspace, "hash-object", "--no-filters", "Makefile").strip()
    assert [e.path for e in new.evidence] == ["Makefile", "notes.txt"]


def test_evidence_that_cannot_be_recorded_is_dropped_with_the_reason(
    workspace: Path, memory_root: Path, tmp_path: Path
) -> None:
    (tmp_path / "outside.txt").write_text("x")
    (workspace / "link.txt").symlink_to(tmp_path / "outside.txt")
    text = MEMORY.replace(
        "[Makefile, notes.txt]", "[../outside.txt, link.txt, missing.py, /etc/hostname]"
    )
    path = memory_root / "project" / "tests.md"

    stamped = stamp(text, previous=None, author=author(workspace, memory_root), path=path)

    provenance = provenance_of_text(stamped.content)
    assert provenance is not None and provenance.evidence == ()
    assert sorted(stamped.notes) == [
        "../outside.txt was not recorded as evidence: ../outside.txt is outside the workspace",
        "/etc/hostname was not recorded as evidence: /etc/hostname is outside the workspace",
        "link.txt was not recorded as evidence: link.txt is a symlink",
        "missing.py was not recorded as evidence: no such file in the workspace",
    ]


def test_user_memory_records_no_evidence(
    workspace: Path, memory_root: Path, tmp_path: Path
) -> None:
    path = tmp_path / "user-memory" / "feedback" / "x.md"
    stamped = stamp(MEMORY, previous=None, author=author(workspace, memory_root), path=path)
    provenance = provenance_of_text(stamped.content)
    assert provenance is not None and provenance.evidence == () and provenance.by == "extract"
    assert stamped.notes == (
        "evidence is recorded for project memories only; the paths were dropped",
    )


def test_an_entry_edited_by_hand_cannot_be_verified(workspace: Path, memory_root: Path) -> None:
    path = memory_root / "project" / "tests.md"
    text = stamp(MEMORY, previous=None, author=author(workspace, memory_root), path=path).content
    provenance = provenance_of_text(text)
    assert provenance is not None
    wrong = text.replace(provenance.evidence[0].digest, "f" * 40)

    edited = provenance_of_text(wrong)

    assert edited is not None and [e.path for e in edited.evidence] == ["notes.txt"]
    assert edited.problems == ("Makefile: the entry was edited by hand",)


def test_an_entry_copied_verbatim_into_another_memory_stays_valid() -> None:
    entry = Evidence("src/app.py", "git", "a" * 40, 6)
    text = (
        "---\nname: m\ndescription: d\ntype: project\nprovenance:\n  by: dream\n  evidence:\n"
        f"    - path: src/app.py\n      git: {'a' * 40}\n      size: 6\n"
        f'      check: "{entry_check(entry)}"\n---\n\nbody\n'
    )
    provenance = provenance_of_text(text)
    assert provenance is not None and provenance.evidence == (entry,) and provenance.problems == ()


@pytest.mark.parametrize(
    "fact",
    ["All tests pass now.", "The migration is done.", "CI is green", "PR 42 has been merged"],
)
def test_task_status_without_evidence_is_refused(
    workspace: Path, memory_root: Path, fact: str
) -> None:
    text = f"---\nname: Status\ndescription: {fact}\ntype: project\n---\n\n{fact}\n"
    with pytest.raises(TaskStatusRefused, match="task status"):
        stamp(text, previous=None, author=author(workspace, memory_root), path=memory_root / "p.md")


def test_task_status_tied_to_evidence_is_kept(workspace: Path, memory_root: Path) -> None:
    text = (
        "---\nname: Status\ndescription: The tests pass\ntype: project\n"
        "evidence: [Makefile]\n---\n\nok\n"
    )
    stamped = stamp(
        text, previous=None, author=author(workspace, memory_root), path=memory_root / "p.md"
    )
    assert "provenance:" in stamped.content


def test_a_preference_that_mentions_passing_tests_is_not_task_status(
    workspace: Path, memory_root: Path
) -> None:
    text = (
        "---\nname: Run tests first\ndescription: Run the tests before every commit\n"
        "type: feedback\n---\n\nMake sure tests pass before committing.\n"
    )
    stamp(text, previous=None, author=author(workspace, memory_root), path=memory_root / "p.md")


@given(st.text(max_size=300))
def test_any_front_matter_is_read_without_an_exception(text: str) -> None:
    provenance_of_text(f"---\nname: x\ntype: project\nprovenance:\n  {text}\n---\n\nbody\n")
    provenance_of_text(f"---\n{text}\n---\n")


def test_a_digest_of_digits_only_stays_a_string(workspace: Path, memory_root: Path) -> None:
    entry = Evidence("a.txt", "git", "1234567890" * 4, 1)
    text = (
        "---\nname: m\ndescription: d\ntype: project\nprovenance:\n  evidence:\n"
        f'    - path: a.txt\n      git: "{entry.digest}"\n      size: 1\n'
        f'      check: "{entry_check(entry)}"\n---\n\nbody\n'
    )
    path = memory_root / "project" / "m.md"

    again = stamp(text, previous=None, author=author(workspace, memory_root), path=path)

    provenance = provenance_of_text(again.content)
    assert provenance is not None and provenance.evidence == (entry,)


@pytest.mark.parametrize(
    "names", [["Makefile"], ["src/a b.py", "docs/ünï.md"], ["x: y.txt", "#hash.txt", "123"]]
)
def test_the_fast_reading_of_a_written_block_is_the_yaml_reading(
    workspace: Path, memory_root: Path, names: list[str]
) -> None:
    from cairn.memory.trust import provenance as module

    for name in names:
        (workspace / name).parent.mkdir(parents=True, exist_ok=True)
        (workspace / name).write_text(f"content of {name}\n")
    listed = ", ".join(json.dumps(name) for name in names)
    text = MEMORY.replace("[Makefile, notes.txt]", f"[{listed}]").replace(
        "verified_by: make check\n", 'verified_by: "make \\"check\\" --fast: yes #1"\n'
    )
    path = memory_root / "project" / "m.md"
    stamped = stamp(text, previous=None, author=author(workspace, memory_root), path=path).content
    front = stamped.split("---\n")[1]

    fast = module._written_block(front)

    assert fast is not None
    assert module.parse_provenance(fast) == module.parse_provenance(module._load(front))
    assert [e.path for e in module.parse_provenance(fast).evidence] == names  # type: ignore[union-attr]
