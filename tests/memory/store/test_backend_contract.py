"""The memory backends' one contract, run against each: files, and a real PostgreSQL.

A "machine" is a memory manager with its own cairn home. With files, two processes share one
memory when they share the folder (the same home); with PostgreSQL, when they share the
database and the namespace (each machine has its own home and mirror). Either way: what one
writes, the other reads, byte for byte, with its index, audit trail and trash.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.memory.forget.selection import ForgetPlan, list_forget_candidates
from cairn.memory.manager import MemoryManager
from cairn.memory.store.locks import hold_roots

from ...polling import eventually
from ..memory_helpers import NOW
from ..postgres_helpers import ON_POSTGRES, postgres_dsn, postgres_server

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = pytest.mark.timeout(120)

DEPLOY = (
    "---\nname: Deploy with make\ndescription: how the billing service is deployed\n"
    "type: project\n---\n\nRun `make release` (FACT-2718).\r\nThen tag it.\n"
)  # CRLF inside on purpose: bytes, not text, are what round-trips


Machine = Callable[[str], MemoryManager]


@pytest.fixture(params=["files", ON_POSTGRES])
def machine(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Machine]:
    """``machine(name)``: a memory manager on one project (see the module docstring)."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    memory: dict[str, Any] = {"enableManagedAutoMemory": True}
    if request.param == "postgres":
        dsn = request.getfixturevalue("postgres_dsn")
        memory.update(
            backend="postgres", postgres={"dsn": dsn, "namespace": "team", "pollSeconds": 0.2}
        )
    settings = Settings.model_validate({"memory": memory})
    made: list[MemoryManager] = []

    def make(name: str) -> MemoryManager:
        home = tmp_path / (f"home-{name}" if request.param == "postgres" else "home")
        manager = MemoryManager(
            project, settings=settings, environ={"CAIRN_HOME": str(home)}, clock=lambda: NOW
        )
        assert manager.backend.name == request.param, manager.backend_error
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()


def write(manager: MemoryManager, relative: str, content: str) -> Path:
    """Write a memory the way every memory writer does: in a locked section, index rebuilt."""
    root = manager.roots.project
    assert root is not None
    path = root / relative
    with hold_roots(list(manager.root_map().values())):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_bytes(content.encode())
        manager.store.rebuild_index_files()
    return path


def titles(manager: MemoryManager) -> list[str]:
    return sorted(doc.title for doc in manager.docs())


def test_a_memory_written_by_one_machine_is_read_by_the_other_byte_for_byte(
    machine: Machine,
) -> None:
    alice, bob = machine("alice"), machine("bob")
    assert titles(bob) == []

    write(alice, "project/deploy.md", DEPLOY)

    assert eventually(lambda: titles(bob) == ["Deploy with make"])
    [doc] = bob.docs()
    assert doc.path.read_bytes() == DEPLOY.encode()
    assert bob.search("how do we deploy billing")[0].doc.title == "Deploy with make"
    assert eventually(lambda: "deploy.md" in bob.system_prompt_section())


def test_the_index_and_the_audit_trail_travel_with_the_memory(machine: Machine) -> None:
    alice, bob = machine("alice"), machine("bob")
    write(alice, "project/deploy.md", DEPLOY)
    plan = ForgetPlan("deploy", list_forget_candidates(alice.docs()), "heuristic")

    report = alice.apply_forget(plan, session_id="s1")

    assert report.ok
    assert eventually(lambda: titles(bob) == [])
    assert eventually(lambda: [e.operation for e in bob.history()[0]] == ["forget"])
    restored = bob.restore_last_forget(session_id="s2")  # the other machine's trash
    assert restored.ok, restored.message
    assert eventually(lambda: titles(alice) == ["Deploy with make"])
    assert eventually(lambda: [e.operation for e in alice.history()[0]] == ["restore", "forget"])
    [doc] = alice.docs()
    assert doc.path.read_bytes() == DEPLOY.encode()


def test_state_files_are_shared(machine: Machine) -> None:
    from cairn.memory.background.meta import read_meta, record_dream

    alice, bob = machine("alice"), machine("bob")
    with hold_roots(list(alice.root_map().values())):
        record_dream(alice.roots.state_dir, session_id="s1", touched_topics=["project"], now=NOW)

    def bob_knows() -> bool:
        bob.refresh()
        return read_meta(bob.roots.state_dir, now=NOW).get("lastDreamSessionId") == "s1"

    assert eventually(bob_knows)


def test_a_failed_write_section_leaves_the_previous_state(machine: Machine) -> None:
    alice, bob = machine("alice"), machine("bob")
    write(alice, "project/deploy.md", DEPLOY)
    root = alice.roots.project
    assert root is not None

    with pytest.raises(RuntimeError, match="disk full"), hold_roots([root]):
        (root / "project" / "deploy.md").write_text("half a change")
        (root / "project" / "new.md").write_text(DEPLOY.replace("Deploy", "New"))
        raise RuntimeError("disk full")

    if alice.backend.name == "postgres":  # the database never saw it; the mirror is restored
        assert eventually(lambda: (root / "project" / "deploy.md").read_bytes() == DEPLOY.encode())
        assert eventually(lambda: not (root / "project" / "new.md").exists())
        bob.backend.pull_now()  # what bob's feed does, now that alice's section has failed
        assert titles(bob) == ["Deploy with make"]


def test_dream_lock_is_exclusive_across_machines_and_released(machine: Machine) -> None:
    alice, bob = machine("alice"), machine("bob")
    first, second = alice.backend.dream_lock(), bob.backend.dream_lock()

    assert first.try_acquire(time.time())
    assert not second.try_acquire(time.time())
    assert second.holder(time.time(), clean=False) is not None
    first.release()
    assert second.try_acquire(time.time())
    second.release()


def test_concurrent_writers_on_two_machines_lose_nothing(machine: Machine) -> None:
    alice, bob = machine("alice"), machine("bob")

    async def writes(manager: MemoryManager, who: str) -> None:
        for n in range(10):
            await asyncio.to_thread(
                write, manager, f"project/{who}-{n}.md", DEPLOY.replace("Deploy", f"{who} {n}")
            )

    async def both() -> None:
        await asyncio.gather(writes(alice, "alice"), writes(bob, "bob"))

    asyncio.run(both())

    expected = sorted(
        [f"alice {n} with make" for n in range(10)] + [f"bob {n} with make" for n in range(10)]
    )
    assert eventually(lambda: titles(alice) == expected and titles(bob) == expected)
    assert eventually(
        lambda: len((alice.roots.project / "MEMORY.md").read_text().splitlines()) == 20
    )  # type: ignore[operator]


def test_an_export_edited_and_imported_on_one_machine_is_the_memory_on_the_other(
    machine: Machine, tmp_path: Path
) -> None:
    alice, bob = machine("alice"), machine("bob")
    write(alice, "project/deploy.md", DEPLOY)
    write(alice, "project/old.md", DEPLOY.replace("Deploy with make", "Old way"))
    assert eventually(lambda: len(titles(bob)) == 2)

    folder = tmp_path / "exported"
    exported = bob.export(folder)

    assert sorted(exported.written) == ["project:project/deploy.md", "project:project/old.md"]
    assert (folder / "project/project/deploy.md").read_bytes() == DEPLOY.encode()
    assert "deploy.md" in (folder / "project/MEMORY.md").read_text()
    edited = DEPLOY.replace("make release", "make ship")
    (folder / "project/project/deploy.md").write_text(edited)
    (folder / "project/project/old.md").unlink()
    (folder / "project/feedback").mkdir()
    (folder / "project/feedback/tabs.md").write_text(
        "---\nname: Tabs\ndescription: indent with tabs\ntype: feedback\n---\n\nTabs.\n"
    )
    (folder / "project/feedback/broken.md").write_text("no front matter at all\n")

    imported = bob.import_folder(folder, session_id="s1")

    assert sorted(imported.written) == [
        "project:feedback/tabs.md",
        "project:project/deploy.md",
    ]
    assert imported.removed == ["project:project/old.md"]
    [skipped] = imported.skipped
    assert skipped.startswith("project:feedback/broken.md: ")
    assert eventually(lambda: titles(alice) == ["Deploy with make", "Tabs"])
    assert eventually(
        lambda: (alice.roots.project / "project/deploy.md").read_bytes() == edited.encode()  # type: ignore[operator]
    )
    assert eventually(lambda: [e.operation for e in alice.history()[0]][:1] == ["import"])
    assert eventually(lambda: "tabs.md" in alice.system_prompt_section())
    assert alice.restore_last_forget(session_id="s2").ok  # the memory the import removed
    assert eventually(lambda: "Old way" in titles(bob))


def test_an_import_of_an_unchanged_export_changes_nothing(machine: Machine, tmp_path: Path) -> None:
    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    alice.export(tmp_path / "exported")

    report = alice.import_folder(tmp_path / "exported")

    assert (report.written, report.removed, report.skipped) == ([], [], [])
    assert alice.history()[0] == []


def test_a_forgotten_fact_stays_forgotten_on_the_other_machine(machine: Machine) -> None:
    from cairn.memory.forget.tombstones import read_tombstones

    alice, bob = machine("alice"), machine("bob")
    write(alice, "project/deploy.md", DEPLOY)
    plan = ForgetPlan("deploy", list_forget_candidates(alice.docs()), "heuristic")
    alice_root, bob_root = alice.roots.project, bob.roots.project
    assert alice_root is not None and bob_root is not None

    assert alice.apply_forget(plan, session_id="s1").ok

    def bob_has_the_tombstone() -> bool:
        bob.refresh()
        return [t.title for t in read_tombstones(bob_root)] == ["Deploy with make"]

    assert eventually(bob_has_the_tombstone)
    assert bob.restore_last_forget(session_id="s2").ok  # restore removes it everywhere

    def alice_has_none() -> bool:
        alice.refresh()
        return read_tombstones(alice_root) == []

    assert eventually(alice_has_none)


def test_a_memorys_versions_travel_with_it(machine: Machine) -> None:
    from cairn.memory.trust.versions import read_versions

    alice, bob = machine("alice"), machine("bob")
    write(alice, "project/deploy.md", DEPLOY)
    plan = ForgetPlan("deploy", list_forget_candidates(alice.docs()), "heuristic")
    assert alice.apply_forget(plan, session_id="s1").ok
    bob_root = bob.roots.project
    assert bob_root is not None

    def bob_has_the_versions() -> bool:
        bob.refresh()
        return [v.operation for v in read_versions(bob_root, "project/deploy.md")] == [
            "earlier", "forget",
        ]  # fmt: skip

    assert eventually(bob_has_the_versions)
    [(_, _, versions)] = bob.versions("project:project/deploy.md")
    assert versions[0].content == DEPLOY  # byte for byte, its CRLF included
