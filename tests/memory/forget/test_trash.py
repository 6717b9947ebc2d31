"""Forget's trash: forgotten files move to the trash, and the last forget comes back."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from cairn.memory.forget.trash import MANIFEST_NAME, TRASH_FOLDER
from cairn.memory.manager import MemoryManager
from cairn.memory.telemetry import FORGET_EVENT

from ..memory_helpers import (
    NOW,
    Events,
    ScriptedModel,
    write_memory,
)
from .forget_helpers import manager, root, selected_ids, write_legacy


@pytest.fixture
def events() -> Iterator[Events]:
    recorder = Events()
    yield recorder
    recorder.close()


__all__ = ["manager", "root"]  # fixtures


async def test_a_forgotten_file_moves_to_the_trash_and_leaves_the_index(
    manager: MemoryManager, root: Path, events: Events
) -> None:
    path = write_memory(root, "uv", title="Use uv", description="Use uv")
    write_memory(root, "keep", title="Keep me", description="Keep")
    manager.reindex()
    original = path.read_bytes()
    report = manager.apply_forget(await manager.select_forget("use uv", provider=None))
    assert report.ok and report.entries == 1
    assert report.files == ["project:project/uv.md"]
    assert not path.exists()
    (trash,) = report.trash
    assert trash.parent == root / TRASH_FOLDER
    assert (trash / "project" / "uv.md").read_bytes() == original
    manifest = json.loads((trash / MANIFEST_NAME).read_text())
    assert manifest["files"] == [
        {"relative_path": "project/uv.md", "action": "deleted", "entries": ["Use uv"]}
    ]
    index = (root / "MEMORY.md").read_text()
    assert "Use uv" not in index and "Keep me" in index
    assert [doc.title for doc in manager.docs()] == ["Keep me"]
    (event,) = events.named(FORGET_EVENT)
    assert event == {"action": "forget", "strategy": "heuristic", "entries": 1, "files": 1}


async def test_forgetting_some_entries_of_a_legacy_file_rewrites_the_rest(
    manager: MemoryManager, root: Path
) -> None:
    path = write_legacy(root)
    original = path.read_bytes()
    plan = await manager.select_forget(
        "x", provider=ScriptedModel(selected_ids(["project:feedback.md:1"]))
    )
    report = manager.apply_forget(plan)
    assert report.ok and report.entries == 1
    text = path.read_text()
    assert text.startswith(
        "---\nname: Feedback\ndescription: collected feedback\ntype: feedback\n---\n\n"
    )
    assert "pytest" not in text
    assert "Use uv, never pip\n\nWhy: the lock file is uv.lock\n\nKeep commits small" in text
    assert (report.trash[0] / "feedback.md").read_bytes() == original


async def test_forgetting_every_entry_of_a_legacy_file_moves_it(
    manager: MemoryManager, root: Path
) -> None:
    path = write_legacy(root)
    ids = [f"project:feedback.md:{i}" for i in range(3)]
    report = manager.apply_forget(
        await manager.select_forget("x", provider=ScriptedModel(selected_ids(ids)))
    )
    assert report.entries == 3 and not path.exists()


async def test_restore_brings_back_the_forgotten_file_and_index_line(
    manager: MemoryManager, root: Path, events: Events
) -> None:
    path = write_memory(root, "uv", title="Use uv", description="Use uv")
    original = path.read_bytes()
    forgot = manager.apply_forget(await manager.select_forget("use uv", provider=None))
    report = manager.restore_last_forget()
    assert report.ok and report.entries == 1 and report.files == ["project:project/uv.md"]
    assert path.read_bytes() == original
    assert not forgot.trash[0].exists()
    assert "Use uv" in (root / "MEMORY.md").read_text()
    assert [e["action"] for e in events.named(FORGET_EVENT)] == ["forget", "restore"]


async def test_restore_puts_back_the_original_of_a_rewritten_file(
    manager: MemoryManager, root: Path
) -> None:
    path = write_legacy(root)
    original = path.read_bytes()
    plan = await manager.select_forget(
        "x", provider=ScriptedModel(selected_ids(["project:feedback.md:0"]))
    )
    manager.apply_forget(plan)
    assert manager.restore_last_forget().ok
    assert path.read_bytes() == original


async def test_restore_refuses_to_overwrite_a_file_that_exists_again(
    manager: MemoryManager, root: Path
) -> None:
    path = write_memory(root, "uv", description="Use uv")
    manager.apply_forget(await manager.select_forget("use uv", provider=None))
    write_memory(root, "uv", description="A new uv memory")
    report = manager.restore_last_forget()
    assert not report.ok
    assert "project:project/uv.md exists again" in report.message
    assert "A new uv memory" in path.read_text()
    assert any((root / TRASH_FOLDER).iterdir())


async def test_restore_refuses_when_a_rewritten_file_changed_since(
    manager: MemoryManager, root: Path
) -> None:
    path = write_legacy(root)
    plan = await manager.select_forget(
        "x", provider=ScriptedModel(selected_ids(["project:feedback.md:0"]))
    )
    manager.apply_forget(plan)
    path.write_text(path.read_text() + "\n- A new entry\n")
    report = manager.restore_last_forget()
    assert not report.ok and "was changed after the forget" in report.message
    assert "A new entry" in path.read_text()


def test_restore_with_nothing_forgotten_says_so(manager: MemoryManager) -> None:
    report = manager.restore_last_forget()
    assert not report.ok and report.message.startswith("Nothing to restore")


async def test_restore_brings_back_only_the_last_forget(manager: MemoryManager, root: Path) -> None:
    first = write_memory(root, "uv", description="Use uv")
    second = write_memory(root, "pip", description="Never pip")
    manager.apply_forget(await manager.select_forget("use uv", provider=None))
    manager.clock = lambda: NOW + 60
    manager.apply_forget(await manager.select_forget("never pip", provider=None))
    assert manager.restore_last_forget().ok
    assert second.exists() and not first.exists()
    assert manager.restore_last_forget().ok
    assert first.exists()


async def test_a_forget_across_both_scopes_is_restored_together(
    manager: MemoryManager, root: Path
) -> None:
    project = write_memory(root, "uv", description="Use uv here")
    user = write_memory(manager.roots.user, "uv", type="user", description="Use uv everywhere")
    report = manager.apply_forget(await manager.select_forget("use uv", provider=None))
    assert sorted(report.files) == ["project:project/uv.md", "user:user/uv.md"]
    assert len(report.trash) == 2
    assert manager.restore_last_forget().entries == 2
    assert project.exists() and user.exists()


def test_the_trash_is_never_read_as_memory(manager: MemoryManager, root: Path) -> None:
    trashed = root / TRASH_FOLDER / "20250101T000000000000Z" / "project"
    write_memory(trashed.parent, "gone", description="forgotten")
    assert manager.docs() == []


async def test_a_file_rewritten_between_the_plan_and_its_application_is_not_removed(
    manager: MemoryManager, root: Path
) -> None:
    """Issue #28: a forget confirmed on a terminal may be applied minutes after its plan; a
    whole file rewritten meanwhile is left where it is (the plan no longer says what it
    holds), and the message says so."""
    path = write_memory(root, "uv", title="Use uv", description="Use uv")
    manager.reindex()
    plan = await manager.select_forget("use uv", provider=None)
    path.write_text(path.read_text().replace("description: Use uv", "description: Use uv, pipx"))
    report = manager.apply_forget(plan)
    assert not report.ok and report.entries == 0
    assert "project:project/uv.md: changed since the plan; not removed" in report.message
    assert "pipx" in path.read_text()
