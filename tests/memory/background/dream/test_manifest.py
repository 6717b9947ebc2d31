"""Dream's operations manifest, rule by rule."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from cairn.memory.background.dream.manifest import (
    OPERATIONS_FILE_NAME,
    AppliedManifest,
    DreamOperations,
    ManifestRejected,
    apply_manifest,
    memory_digests,
    validate_manifest,
)
from cairn.memory.forget.trash import TRASH_FOLDER

from ...task_helpers import (
    NOW,
    new_project,
    write_memory,
)

__all__ = ["new_project"]

pytestmark = pytest.mark.timeout(30)

SESSION = "11111111-2222-3333-4444-555555555555"
DREAM_EVENT = "memory.dream"


# --- manifest validation, rule by rule -----------------------------------------------------


@pytest.fixture
def root(tmp_path: Path) -> Path:
    root = tmp_path / "memory"
    for name in ("a", "b", "c", "t", "u"):
        write_memory(root, f"feedback/{name}.md", name.upper())
    write_memory(root, "pinned/p.md", "P")
    (root / "feedback" / "broken.md").write_text("no front matter\n")
    return root


def rejected(data: Any, root: Path) -> str:
    with pytest.raises(ManifestRejected) as caught:
        validate_manifest(data, root)
    return str(caught.value)


def test_a_valid_manifest_lists_its_deletions(root: Path) -> None:
    data = {
        "version": 1,
        "delete": ["feedback/a.md", "feedback/b.md", "feedback/c.md"],
        "operations": [
            {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/t.md"},
            {"type": "split", "source": "feedback/b.md",
             "targets": ["feedback/t.md", "feedback/u.md"]},
        ],
    }  # fmt: skip
    operations = validate_manifest(data, root)
    assert operations.delete == ["feedback/a.md", "feedback/b.md", "feedback/c.md"]
    assert (operations.deduped, operations.split) == (1, 1)


@pytest.mark.parametrize(
    ("path", "why"),
    [
        ("/etc/passwd.md", "relative POSIX"),
        ("feedback\\a.md", "relative POSIX"),
        ("feedback/../feedback/a.md", "'..'"),
        ("feedback//a.md", "empty"),
        ("feedback/a.txt", ".md"),
        ("MEMORY.md", "generated"),
        ("pinned/p.md", "protected"),
        ("feedback/missing.md", "no such"),
    ],
)
def test_each_path_rule_rejects_the_whole_manifest(root: Path, path: str, why: str) -> None:
    assert why in rejected({"version": 1, "delete": ["feedback/a.md", path]}, root)


def test_a_symlinked_segment_is_rejected(root: Path) -> None:
    (root / "alias").symlink_to(root / "feedback")
    assert "symlink" in rejected({"delete": ["alias/a.md"]}, root)


def test_a_path_resolving_outside_the_root_is_rejected(root: Path, tmp_path: Path) -> None:
    (tmp_path / "elsewhere").mkdir()
    write_memory(tmp_path / "elsewhere", "feedback/x.md", "X")
    (root / "project").symlink_to(tmp_path / "elsewhere" / "feedback")
    assert "symlink" in rejected({"delete": ["project/x.md"]}, root)


def test_a_duplicate_delete_is_rejected(root: Path) -> None:
    assert "twice" in rejected({"delete": ["feedback/a.md", "feedback/a.md"]}, root)


def test_a_dedupe_target_must_exist_be_valid_and_survive(root: Path) -> None:
    def dedupe(target: str, delete: list[str]) -> str:
        operation = {"type": "dedupe", "sources": ["feedback/a.md"], "target": target}
        return rejected({"delete": delete, "operations": [operation]}, root)

    assert "no such" in dedupe("feedback/nope.md", ["feedback/a.md"])
    assert "not a valid memory" in dedupe("feedback/broken.md", ["feedback/a.md"])
    assert "is deleted" in dedupe("feedback/t.md", ["feedback/a.md", "feedback/t.md"])


def test_a_dedupe_source_must_be_deleted_and_differ_from_the_target(root: Path) -> None:
    not_deleted = {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/t.md"}
    assert "must also be in delete" in rejected({"operations": [not_deleted]}, root)
    itself = {"type": "dedupe", "sources": ["feedback/t.md"], "target": "feedback/t.md"}
    assert "also the target" in rejected({"delete": [], "operations": [itself]}, root)


def test_a_source_claimed_by_two_operations_is_rejected(root: Path) -> None:
    one = {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/t.md"}
    two = {"type": "dedupe", "sources": ["feedback/a.md"], "target": "feedback/u.md"}
    data = {"delete": ["feedback/a.md"], "operations": [one, two]}
    assert "two operations" in rejected(data, root)


def test_split_targets_must_be_two_unique_surviving_memories(root: Path) -> None:
    def split(targets: list[str], delete: list[str] | None = None) -> str:
        operation = {"type": "split", "source": "feedback/a.md", "targets": targets}
        return rejected({"delete": delete or ["feedback/a.md"], "operations": [operation]}, root)

    assert "at least two" in split(["feedback/t.md"])
    assert "twice" in split(["feedback/t.md", "feedback/t.md"])
    both = ["feedback/a.md", "feedback/b.md"]
    assert "is deleted" in split(["feedback/t.md", "feedback/b.md"], both)
    assert "no such" in split(["feedback/t.md", "feedback/new.md"])
    assert "also a target" in split(["feedback/a.md", "feedback/t.md"])


def test_unknown_operations_shapes_and_versions_are_rejected(root: Path) -> None:
    assert "unknown operation" in rejected({"operations": [{"type": "rename"}]}, root)
    assert "JSON object" in rejected(["feedback/a.md"], root)
    assert "version" in rejected({"version": 2}, root)
    assert "must be a list" in rejected({"delete": "feedback/a.md"}, root)


def test_applying_a_valid_manifest_deletes_its_files_and_removes_it(root: Path) -> None:
    manifest = {"version": 1, "delete": ["feedback/c.md"]}
    (root / OPERATIONS_FILE_NAME).write_text(json.dumps(manifest))

    original = (root / "feedback" / "c.md").read_bytes()

    applied = apply_manifest(root, expected=memory_digests(root), now=NOW)

    assert applied.error is None and applied.operations.delete == ["feedback/c.md"]
    assert not (root / "feedback" / "c.md").exists()
    assert not (root / OPERATIONS_FILE_NAME).exists()
    [trashed] = (root / TRASH_FOLDER).glob("*/feedback/c.md")  # restorable, never unlinked
    assert trashed.read_bytes() == original


def test_a_deletion_of_a_file_changed_since_the_dreamer_read_it_is_kept(root: Path) -> None:
    """Regression (#18): Dream deleted a memory another process had just added a fact to."""
    expected = memory_digests(root)
    changed = root / "feedback" / "c.md"
    changed.write_text(changed.read_text() + "\nA fact saved meanwhile.\n")
    (root / "feedback" / "new.md").write_text((root / "feedback" / "a.md").read_text())
    manifest = {"version": 1, "delete": ["feedback/a.md", "feedback/c.md", "feedback/new.md"]}
    (root / OPERATIONS_FILE_NAME).write_text(json.dumps(manifest))

    applied = apply_manifest(root, expected=expected, now=NOW)

    assert applied.operations.delete == ["feedback/a.md"]
    assert applied.kept == ["feedback/c.md", "feedback/new.md"]
    assert "A fact saved meanwhile." in changed.read_text()
    assert (root / "feedback" / "new.md").exists()  # appeared after the dreamer looked


def test_a_manifest_that_is_not_json_is_rejected_and_removed(root: Path) -> None:
    (root / OPERATIONS_FILE_NAME).write_text("delete everything")

    applied = apply_manifest(root, expected=memory_digests(root), now=NOW)

    assert applied.operations.delete == []
    assert applied.error is not None and "not valid JSON" in applied.error
    assert not (root / OPERATIONS_FILE_NAME).exists()
    assert (root / "feedback" / "a.md").exists()


def test_no_manifest_means_no_deletions(root: Path) -> None:
    assert apply_manifest(root, expected={}, now=NOW) == AppliedManifest(DreamOperations())
