"""The saved index trusted by its folders' stat (``cairn memory search|show|forget``, issue #28):
what the folders' check finds and keeps (``<scope>.dirs``), and what it leaves to a full check."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from cairn.memory.paths import MemoryRoots
from cairn.memory.store import folders
from cairn.memory.store.memory_store import MemoryStore

from .test_memory_store import project, write


@pytest.fixture
def roots(tmp_path: Path) -> MemoryRoots:
    return MemoryRoots(
        project=tmp_path / "base" / "projects" / "p" / "memory",
        user=tmp_path / "base" / "memories",
        state_dir=tmp_path / "base" / "projects" / "p",
    )


@pytest.fixture
def settled(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folders count as settled at once (not two seconds after their last change)."""
    monkeypatch.setattr(folders, "_SETTLE_NS", 0)


def _saved(roots: MemoryRoots) -> Path:
    """A saved index of what is on disk now; the project's index file."""
    store = MemoryStore(roots)
    store.refresh()
    store.save()
    store.close()
    return roots.state_dir / "recall-index" / "project.bin"


def _titles(roots: MemoryRoots, query: str) -> list[str]:
    """What a new process trusting the saved index ranks for ``query``."""
    store = MemoryStore(roots, trust_saved=True, check_postings=False)
    try:
        return [hit.doc.title for hit in store.rank(query, limit=9)]
    finally:
        store.close()


@pytest.mark.usefixtures("settled")
def test_a_kept_check_lists_only_the_folders_that_changed(roots: MemoryRoots) -> None:
    write(project(roots), "project/a.md", name="Ledger a", body="ledger")
    write(project(roots), "feedback/b.md", name="Ledger b", body="ledger")
    index = _saved(roots)
    assert sorted(_titles(roots, "ledger")) == ["Ledger a", "Ledger b"]
    kept = folders.read_folders(index, str(project(roots)))
    assert kept is not None and set(kept.keys) == {"", "project", "feedback"}
    write(project(roots), "feedback/c.md", name="Ledger c", body="ledger")
    scan = folders.scan_folders(str(project(roots)), kept.keys)
    assert set(scan.listed) == {"feedback"}  # the project folder's stat was enough
    assert "Ledger c" in _titles(roots, "ledger")


@pytest.mark.usefixtures("settled")
def test_a_removed_folder_drops_its_memories_and_a_new_nested_one_is_read(
    roots: MemoryRoots,
) -> None:
    write(project(roots), "project/a.md", name="Ledger a", body="ledger")
    write(project(roots), "feedback/b.md", name="Ledger b", body="ledger")
    _saved(roots)
    assert len(_titles(roots, "ledger")) == 2
    shutil.rmtree(project(roots) / "feedback")
    write(project(roots), "project/deep/er/c.md", name="Ledger c", body="ledger")
    assert sorted(_titles(roots, "ledger")) == ["Ledger a", "Ledger c"]


@pytest.mark.parametrize("damage", [b"", b"cairn-recall-dirs\n\0\0\0\0garbage"])
def test_a_damaged_folders_file_costs_one_listing_and_is_written_again(
    roots: MemoryRoots, damage: bytes, settled: None
) -> None:
    write(project(roots), "project/a.md", name="Ledger a", body="ledger")
    index = _saved(roots)
    _titles(roots, "ledger")
    index.with_suffix(".dirs").write_bytes(damage)
    write(project(roots), "project/b.md", name="Ledger b", body="ledger")
    assert sorted(_titles(roots, "ledger")) == ["Ledger a", "Ledger b"]
    assert folders.read_folders(index, str(project(roots))) is not None


def test_a_folder_changed_in_the_last_two_seconds_is_not_kept(roots: MemoryRoots) -> None:
    """A change in the same tick of the file system's clock as the check's stat would leave
    the folder's times as they were: such a folder is listed again by the next check."""
    write(project(roots), "project/a.md", name="Ledger a", body="ledger")
    index = _saved(roots)
    _titles(roots, "ledger")
    kept = folders.read_folders(index, str(project(roots)))
    assert kept is not None and "project" not in kept.keys and "" not in kept.keys


@pytest.mark.usefixtures("settled")
def test_files_in_the_root_itself_are_checked_when_it_changes(roots: MemoryRoots) -> None:
    write(project(roots), "top.md", name="Ledger top", body="ledger")
    write(project(roots), "project/a.md", name="Ledger a", body="ledger")
    _saved(roots)
    assert len(_titles(roots, "ledger")) == 2
    (project(roots) / "top.md").unlink()
    write(project(roots), "also.md", name="Ledger also", body="ledger")
    assert sorted(_titles(roots, "ledger")) == ["Ledger a", "Ledger also"]
