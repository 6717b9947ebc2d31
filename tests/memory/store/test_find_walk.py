"""The stat walk by GNU find and the check against what the last check saw (seen.py): the same
changes found as by the Python walk, odd file names included, and nothing trusted that could
hide an edit."""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from cairn.memory.paths import MemoryRoots
from cairn.memory.store.find_walk import find_walk, listing_keys
from cairn.memory.store.memory_store import MemoryStore
from cairn.memory.store.parse import render_memory_file
from cairn.memory.store.scan import walk_root
from cairn.memory.store.seen import listing_changes, read_seen, seen_path
from cairn.memory.store.watch import open_watcher

from .test_memory_store import project, roots

__all__ = ["roots"]  # a fixture

pytestmark = pytest.mark.skipif(shutil.which("find") is None, reason="needs find")

ODD_NAMES = [
    b"with space.md",
    b"with\ttab.md",
    b"with\nnewline.md",
    b"latin-1 \xe9t\xe9.md",  # not UTF-8
    b"\xff\xfe.md",
    b"d quoted.md",  # looks like a folder's record after a NUL
    b"l 1 2 3.md",
]


def write(root: Path, relative: str, body: str = "body", *, name: str = "") -> Path:
    path = root / relative
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(render_memory_file(name or path.stem, "", "project", body), "utf-8")
    return path


def write_bytes_name(folder: Path, name: bytes, body: str) -> None:
    fd = os.open(os.path.join(os.fsencode(folder), name), os.O_WRONLY | os.O_CREAT, 0o644)
    with os.fdopen(fd, "w", encoding="utf-8") as handle:
        handle.write(render_memory_file("odd", "", "project", body))


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    """A root with what the walk treats specially: odd names, the index file, dot names, a
    FIFO, a folder named like a memory, symlinks in and out, a nested folder."""
    root = tmp_path / "root"
    write(root, "project/a.md")
    write(root, "top.md")
    write(root, "MEMORY.md")
    write(root, "project/MEMORY.md")
    write(root, ".hidden.md")
    write(root, ".trash/old/gone.md")
    write(root, "project/nested/deep.md")
    (root / "feedback").mkdir()
    for name in ODD_NAMES:
        write_bytes_name(root / "feedback", name, "odd")
    os.mkfifo(root / "feedback" / "pipe.md")
    (root / "feedback" / "folder.md").mkdir()
    (root / "feedback" / "notes.txt").write_text("not a memory")
    (root / "feedback" / "link.md").symlink_to(root / "project" / "a.md")
    (root / "feedback" / "dangling.md").symlink_to(root / "nowhere.md")
    outside = tmp_path / "outside"
    outside.mkdir()
    (root / "feedback" / "out").symlink_to(outside)
    return root


def find_keys(root: Path) -> tuple[dict, set[str], list[str]]:
    found = find_walk(str(root), None)
    assert found is not None and found.listing is not None
    keys = listing_keys(found.listing)
    assert keys is not None
    return {**keys, **found.keys}, found.symlinks, found.warnings


def test_find_sees_every_file_the_python_walk_sees_with_the_same_stat_keys(tree: Path) -> None:
    walked = walk_root(str(tree))
    keys, symlinks, warnings = find_keys(tree)
    assert keys == walked.keys
    assert (symlinks, warnings) == (walked.symlinks, walked.warnings)
    assert "feedback/with\nnewline.md" in keys
    assert os.fsdecode(b"feedback/\xff\xfe.md") in keys


def test_a_file_edited_in_place_to_the_same_size_and_mtime_gets_another_record(
    tree: Path,
) -> None:
    path = tree / "project" / "a.md"
    before = find_walk(str(tree), None)
    info = path.stat()
    text = path.read_text("utf-8")
    path.write_text(text.replace("body", "BODY"), "utf-8")  # same size
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))  # and the same mtime
    after = find_walk(str(tree), None)
    assert before is not None and after is not None
    assert before.listing is not None and after.listing is not None
    changes = listing_changes(before.listing, after.listing)
    assert changes == {"project/a.md": walk_root(str(tree)).keys["project/a.md"]}


def test_a_folder_below_the_watched_ones_is_left_to_the_python_walk(tree: Path) -> None:
    """Its watch would begin after find listed it: a change meanwhile would be missed."""
    watcher = open_watcher()
    if watcher is None:
        pytest.skip("no inotify here")
    try:
        assert find_walk(str(tree), watcher) is None
        shutil.rmtree(tree / "project" / "nested")
        (tree / "feedback" / "folder.md").rmdir()  # a folder too
        assert find_walk(str(tree), watcher) is not None
    finally:
        watcher.close()


def test_without_find_on_the_path_the_python_walk_is_used(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty"))
    assert find_walk(str(tree), None) is None


def test_a_find_that_prints_times_another_way_is_not_trusted(
    tree: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Whole seconds would hide an edit within the same second."""
    fake = tmp_path / "bin" / "find"
    fake.parent.mkdir()
    record = "1 2 1700000000.0000000000 1700000000.0000000000 top.md"
    fake.write_text(f"#!/bin/sh\nprintf '{record}\\0'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("PATH", f"{fake.parent}{os.pathsep}{os.environ['PATH']}")
    assert find_walk(str(tree), None) is None


def test_an_unreadable_folder_is_left_to_the_python_walk(tree: Path) -> None:
    if os.geteuid() == 0:
        pytest.skip("root reads every folder")
    (tree / "project").chmod(0)
    try:
        assert find_walk(str(tree), None) is None
    finally:
        (tree / "project").chmod(0o755)


# --- the store's check against what the last check saw ------------------------------------


@pytest.fixture
def cache(roots: MemoryRoots, tmp_path: Path) -> Iterator[Path]:
    """A saved index of three memories, and the file of a check made on it."""
    for name in ("a", "b", "c"):
        write(project(roots), f"project/{name}.md", f"{name} ledger")
    folder = tmp_path / "cache"
    for _ in range(2):  # the first saves the index, the second checks it (and keeps the file)
        store = MemoryStore(roots, cache_dir=folder)
        store.refresh()
        store.save()
        store.close()
    assert read_seen(folder / "project.bin", str(project(roots))) is not None
    yield folder


def checked(roots: MemoryRoots, cache: Path) -> tuple[MemoryStore, int]:
    store = MemoryStore(roots, cache_dir=cache)
    return store, store.refresh().reparsed


def test_an_unchanged_memory_is_not_read_again(roots: MemoryRoots, cache: Path) -> None:
    store, reparsed = checked(roots, cache)
    assert reparsed == 0
    assert len(store.rank("ledger", limit=5)) == 3


def test_an_edit_in_place_with_the_same_size_and_mtime_is_seen_by_the_next_check(
    roots: MemoryRoots, cache: Path
) -> None:
    path = project(roots) / "project" / "b.md"
    info = path.stat()
    path.write_text(path.read_text("utf-8").replace("b ledger", "b zephyr"), "utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    assert path.stat().st_size == info.st_size
    store, reparsed = checked(roots, cache)
    assert reparsed == 1
    assert [hit.doc.relative_path for hit in store.rank("zephyr", limit=5)] == ["project/b.md"]


def test_memories_added_and_removed_outside_cairn_are_seen_by_every_later_check(
    roots: MemoryRoots, cache: Path
) -> None:
    (project(roots) / "project" / "a.md").unlink()
    write(project(roots), "feedback/new.md", "quokka")
    for _ in range(2):  # the second against the file the first kept (not saved in the index)
        store, reparsed = checked(roots, cache)
        assert reparsed == 1
        assert [hit.doc.relative_path for hit in store.rank("quokka", limit=5)] == [
            "feedback/new.md"
        ]
        assert store.get(project(roots) / "project" / "a.md") is None


def test_a_write_saved_by_another_process_after_the_check_is_seen(
    roots: MemoryRoots, cache: Path
) -> None:
    """Journal entries past the ones the check's file knows name memories to look at."""
    writer = MemoryStore(roots, cache_dir=cache)
    writer.refresh()
    write(project(roots), "project/a.md", "a wombat and more")
    writer.refresh()
    writer.save()  # a journal entry
    writer.close()
    path = project(roots) / "project" / "c.md"
    info = path.stat()
    path.write_text(path.read_text("utf-8").replace("c ledger", "c numbat"), "utf-8")
    os.utime(path, ns=(info.st_atime_ns, info.st_mtime_ns))
    store, reparsed = checked(roots, cache)
    assert reparsed == 1  # c.md; a.md is read from the journal
    assert [hit.doc.relative_path for hit in store.rank("wombat", limit=5)] == ["project/a.md"]
    assert [hit.doc.relative_path for hit in store.rank("numbat", limit=5)] == ["project/c.md"]


@pytest.mark.parametrize("damage", [b"", b"cairn-recall-seen\nxxxx", b"\0" * 64])
def test_a_damaged_file_of_the_last_check_means_a_full_comparison(
    roots: MemoryRoots, cache: Path, damage: bytes
) -> None:
    path = project(roots) / "project" / "b.md"
    path.write_text(path.read_text("utf-8").replace("b ledger", "b zephyr"), "utf-8")
    seen_path(cache / "project.bin").write_bytes(damage)
    store, reparsed = checked(roots, cache)
    assert reparsed == 1
    assert [hit.doc.relative_path for hit in store.rank("zephyr", limit=5)] == ["project/b.md"]
    assert read_seen(cache / "project.bin", str(project(roots))) is not None


def _record(relative: str, key: tuple[int, int, int, int]) -> bytes:
    mtime, size, inode, ctime = key
    stamp = [f"{ns // 10**9}.{ns % 10**9:09d}0" for ns in (mtime, ctime)]
    return f"{inode} {size} {stamp[0]} {stamp[1]} {relative}".encode() + b"\0"


_KEYS = st.tuples(*[st.integers(0, 2**40)] * 4)
_FILES = st.dictionaries(st.sampled_from([f"t/m{n}.md" for n in range(40)]), _KEYS, max_size=40)


@settings(max_examples=200, deadline=None)
@given(old=_FILES, new=_FILES, data=st.data())
def test_the_changes_between_two_outputs_are_exactly_the_files_that_differ(
    old: dict, new: dict, data: st.DataObject
) -> None:
    """Whatever the order of either output (places or sets), a file is reported when and only
    when its record differs, with its new stat key (None: gone)."""
    if data.draw(st.booleans()):  # mostly the same order, as find gives an unchanged folder
        order = sorted(new, key=lambda relative: (relative not in old, relative))
    else:
        order = data.draw(st.permutations(sorted(new)))
    before = b"".join(_record(relative, key) for relative, key in sorted(old.items()))
    after = b"".join(_record(relative, new[relative]) for relative in order)
    changes = listing_changes(before, after)
    assert changes is not None
    for relative in {*old, *new}:
        if relative in changes:
            assert changes[relative] == new.get(relative)
        else:
            assert old.get(relative) == new.get(relative)


def test_a_file_added_at_the_front_of_a_long_output_is_the_only_change() -> None:
    """Every later record shifted by one place: compared as sets, not reported as changed."""
    files = {f"t/m{n:05d}.md": (n, n, n, n) for n in range(3000)}
    before = b"".join(_record(relative, key) for relative, key in files.items())
    after = _record("t/new.md", (7, 7, 7, 7)) + before
    assert listing_changes(before, after) == {"t/new.md": (7, 7, 7, 7)}
    assert listing_changes(after, before) == {"t/new.md": None}
