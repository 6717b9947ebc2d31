"""The stat walk of a memory root and the single-file stat."""

from __future__ import annotations

import os
from pathlib import Path

from cairn.memory.store.scan import is_memory_name, list_names, stat_file, stat_key, walk_root


def touch(path: Path, text: str = "x") -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, "utf-8")
    return path


def test_walk_lists_every_memory_file_with_its_stat_key(tmp_path: Path) -> None:
    a = touch(tmp_path / "user" / "a.md")
    b = touch(tmp_path / "project" / "deep" / "b.md")
    walk = walk_root(str(tmp_path))
    assert walk.keys == {"user/a.md": stat_key(a.stat()), "project/deep/b.md": stat_key(b.stat())}
    assert (walk.symlinks, walk.warnings) == (set(), [])


def test_walk_ignores_the_index_dot_entries_and_other_files(tmp_path: Path) -> None:
    touch(tmp_path / "MEMORY.md")
    touch(tmp_path / ".trash" / "old.md")
    touch(tmp_path / "user" / ".tmp.md")
    touch(tmp_path / "user" / "notes.txt")
    touch(tmp_path / "user" / "kept.md")
    assert list(walk_root(str(tmp_path)).keys) == ["user/kept.md"]


def test_a_symlinked_file_inside_the_root_is_listed_with_its_targets_stat(tmp_path: Path) -> None:
    target = touch(tmp_path / "user" / "real.md", "longer text")
    (tmp_path / "pinned").mkdir()
    (tmp_path / "pinned" / "alias.md").symlink_to(target)
    walk = walk_root(str(tmp_path))
    assert walk.symlinks == {"pinned/alias.md"}
    assert walk.keys["pinned/alias.md"] == stat_key(target.stat())


def test_a_symlinked_folder_leading_out_of_the_root_is_warned_about(tmp_path: Path) -> None:
    touch(tmp_path / "outside" / "secret.md")
    root = tmp_path / "root"
    root.mkdir()
    (root / "escape").symlink_to(tmp_path / "outside")
    walk = walk_root(str(root))
    assert walk.keys == {}
    assert walk.warnings == [
        f"{root / 'escape'}: folder skipped (symlink leading out of the memory root)"
    ]


def test_a_symlinked_folder_inside_the_root_is_not_walked_twice(tmp_path: Path) -> None:
    touch(tmp_path / "user" / "a.md")
    (tmp_path / "alias").symlink_to(tmp_path / "user")
    walk = walk_root(str(tmp_path))
    assert (list(walk.keys), walk.warnings) == (["user/a.md"], [])


def test_a_missing_root_walks_to_one_warning(tmp_path: Path) -> None:
    walk = walk_root(str(tmp_path / "missing"))
    assert walk.keys == {}
    assert len(walk.warnings) == 1 and "folder skipped" in walk.warnings[0]


def test_stat_file_tells_regular_files_symlinks_and_the_rest_apart(tmp_path: Path) -> None:
    real = touch(tmp_path / "user" / "real.md")
    (tmp_path / "user" / "link.md").symlink_to(real)
    (tmp_path / "user" / "dir.md").mkdir()
    assert stat_file(str(tmp_path), "user/real.md") == (os.lstat(real), False)
    found = stat_file(str(tmp_path), "user/link.md")
    assert found is not None and found[1] is True and stat_key(found[0]) == stat_key(real.stat())
    assert stat_file(str(tmp_path), "user/dir.md") is None
    assert stat_file(str(tmp_path), "user/missing.md") is None


def test_memory_names_are_markdown_not_hidden_not_the_index() -> None:
    assert is_memory_name("uv.md")
    assert not is_memory_name("MEMORY.md")
    assert not is_memory_name(".draft.md")
    assert not is_memory_name("notes.txt")


def test_listing_names_finds_what_the_walk_finds_without_a_stat_of_each(tmp_path: Path) -> None:
    """Issue #28: `cairn memory list` finds added and removed files by name alone; a folder
    named like a memory is still entered (the folder's link count gives it away)."""
    for relative in ("a.md", "feedback/b.md", "deep/er/c.md", "odd.md/d.md", "deep/MEMORY.md",
                     "MEMORY.md", ".trash/e.md", "notes.txt", "deep/.tmp.md"):  # fmt: skip
        path = tmp_path / relative
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text("x")
    (tmp_path / "link.md").symlink_to(tmp_path / "a.md")
    names, warnings = list_names(str(tmp_path))
    assert names == set(walk_root(str(tmp_path)).keys) == {
        "a.md", "feedback/b.md", "deep/er/c.md", "odd.md/d.md", "link.md",
    }  # fmt: skip
    assert warnings == []
    missing = tmp_path / "gone"
    assert list_names(str(missing)) == (set(), [f"{missing}: folder skipped (unreadable: "
                                                 "No such file or directory)"])  # fmt: skip
