"""`migrate`: a whole memory moved between the file backend and a real PostgreSQL, and back."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from cairn.config.settings import Settings
from cairn.memory.background.meta import read_meta, record_dream
from cairn.memory.forget.selection import ForgetPlan, list_forget_candidates
from cairn.memory.manager import MemoryManager
from cairn.memory.store.backend import MemoryBackendError
from cairn.memory.store.locks import hold_roots
from cairn.memory.store.transfer import TransferError, migrate

from ..memory_helpers import NOW
from ..postgres_helpers import postgres_dsn, postgres_server
from .test_backend_contract import DEPLOY, titles, write

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = pytest.mark.timeout(120)

TABS = "---\nname: Tabs\ndescription: indent with tabs\ntype: feedback\n---\n\nTabs.\n"


class Project:
    """One project; ``manager(backend, home)`` opens its memory on a machine (a cairn home)."""

    def __init__(self, tmp_path: Path, dsn: str) -> None:
        self.tmp_path = tmp_path
        self.root = tmp_path / "project"
        (self.root / ".git").mkdir(parents=True)
        self.dsn = dsn
        self.made: list[MemoryManager] = []

    def environ(self, home: str) -> dict[str, str]:
        return {"CAIRN_HOME": str(self.tmp_path / home), "CAIRN_MEMORY_DSN": self.dsn}

    def settings(self, backend: str) -> Settings:
        memory: dict[str, Any] = {"backend": backend, "postgres": {"namespace": "team"}}
        return Settings.model_validate({"memory": memory})

    def manager(self, backend: str, home: str) -> MemoryManager:
        manager = MemoryManager(
            self.root,
            settings=self.settings(backend),
            environ=self.environ(home),
            clock=lambda: NOW,
        )
        assert manager.backend.name == backend, manager.backend_error
        self.made.append(manager)
        return manager

    def migrate(self, to: str, home: str) -> Any:
        return migrate(self.settings("files"), self.root, to=to, environ=self.environ(home))  # type: ignore[arg-type]


@pytest.fixture
def project(tmp_path: Path, postgres_dsn: str) -> Iterator[Project]:
    made = Project(tmp_path, postgres_dsn)
    yield made
    for manager in made.made:
        manager.close()


def _history(manager: MemoryManager) -> list[tuple[str, list[str]]]:
    return [(entry.operation, entry.files) for entry in manager.history()[0]]


def _memory_with_a_past(manager: MemoryManager) -> None:
    """Two memories, one forgotten (in the trash, in the audit trail), a Dream recorded."""
    write(manager, "project/deploy.md", DEPLOY)
    write(manager, "feedback/tabs.md", TABS)
    tabs = [c for c in list_forget_candidates(manager.docs()) if c.title == "Tabs"]
    plan = ForgetPlan("tabs", tabs, "heuristic")
    assert manager.apply_forget(plan, session_id="s1").ok
    with hold_roots(list(manager.root_map().values())):
        record_dream(manager.roots.state_dir, session_id="s1", touched_topics=["project"], now=NOW)


def test_files_migrated_to_postgres_are_the_same_memory_on_another_machine(
    project: Project,
) -> None:
    files = project.manager("files", "laptop")
    _memory_with_a_past(files)

    report = project.migrate("postgres", "laptop")

    assert report.written == ["project:project/deploy.md"]
    assert report.files >= 5  # memory, MEMORY.md, audit trail, trash (file + manifest), meta
    shared = project.manager("postgres", "server")
    assert titles(shared) == ["Deploy with make"]
    [doc] = shared.docs()
    assert doc.path.read_bytes() == DEPLOY.encode()
    assert _history(shared) == _history(files)
    assert read_meta(shared.roots.state_dir, now=NOW)["lastDreamSessionId"] == "s1"
    assert (shared.roots.project / "MEMORY.md").read_bytes() == (  # type: ignore[operator]
        files.roots.project / "MEMORY.md"  # type: ignore[operator]
    ).read_bytes()
    assert shared.restore_last_forget(session_id="s2").ok  # the trash came along
    assert titles(shared) == ["Deploy with make", "Tabs"]


def test_postgres_migrated_to_files_is_the_same_memory(project: Project) -> None:
    database = project.manager("postgres", "server")
    _memory_with_a_past(database)

    report = project.migrate("files", "laptop")

    assert report.written == ["project:project/deploy.md"]
    files = project.manager("files", "laptop")
    assert titles(files) == ["Deploy with make"]
    assert [d.path.read_bytes() for d in files.docs()] == [DEPLOY.encode()]
    assert _history(files) == _history(database)
    assert read_meta(files.roots.state_dir, now=NOW)["lastDreamSessionId"] == "s1"
    assert files.restore_last_forget().ok


def test_a_migration_into_a_memory_that_holds_memories_is_refused_and_changes_nothing(
    project: Project,
) -> None:
    files = project.manager("files", "laptop")
    write(files, "project/deploy.md", DEPLOY)
    database = project.manager("postgres", "server")
    write(database, "feedback/tabs.md", TABS)

    with pytest.raises(TransferError, match="already holds 1 project memory"):
        project.migrate("postgres", "laptop")
    with pytest.raises(TransferError, match="already holds 1 project memory"):
        project.migrate("files", "laptop")

    assert titles(project.manager("postgres", "other")) == ["Tabs"]
    assert titles(files) == ["Deploy with make"]


def test_a_migration_to_an_unreachable_database_is_a_clear_error(tmp_path: Path) -> None:
    root = tmp_path / "project"
    root.mkdir()
    environ = {"CAIRN_HOME": str(tmp_path / "home")}
    settings = Settings.model_validate(
        {"memory": {"postgres": {"dsn": "postgresql://nobody@127.0.0.1:1/none"}}}
    )

    with pytest.raises(MemoryBackendError, match="cannot reach the memory database"):
        migrate(settings, root, to="postgres", environ=environ)
    with pytest.raises(MemoryBackendError, match="no database is configured"):
        migrate(Settings(), root, to="postgres", environ=environ)


def _tree(root: Path) -> dict[str, bytes]:
    return {
        p.relative_to(root).as_posix(): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and not p.name.endswith((".lock", ".tmp", ".sync.json"))
        and "recall-index" not in p.relative_to(root).parts  # a cache, rebuilt from the files
    }  # fmt: skip


def test_files_to_postgres_to_files_round_trips_byte_for_byte(project: Project) -> None:
    files = project.manager("files", "laptop")
    _memory_with_a_past(files)
    write(files, "reference/links.md", TABS.replace("Tabs", "Links").replace("\n", "\r\n"))
    before = _tree(files.roots.state_dir)  # the memory root, its trail and trash, the state

    project.migrate("postgres", "laptop")
    project.migrate("files", "desktop")

    after = _tree(project.manager("files", "desktop").roots.state_dir)
    assert after == before
