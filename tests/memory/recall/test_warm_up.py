"""Recall while a fresh machine's index warms up: the database answers the fast phase, the
memories already surfaced stay out, and once the warm-up is over the local index answers."""

from __future__ import annotations

import asyncio
from collections.abc import Set as AbstractSet
from pathlib import Path

import pytest

from cairn.abort import AbortController
from cairn.config.settings import Settings
from cairn.memory.manager import MemoryManager
from cairn.memory.recall.query import RecallResult
from cairn.memory.store.locks import hold_local_roots

from ...polling import eventually_async
from ..postgres_helpers import SilentDatabase, postgres_dsn, postgres_server
from ..store.test_backend_contract import DEPLOY, write
from ..store.test_postgres_backend import Machine, machine

__all__ = ["machine", "postgres_dsn", "postgres_server"]  # fixtures

pytestmark = pytest.mark.timeout(120)

RELEASE = (
    "---\nname: Release checklist\ndescription: what to check before we deploy a release\n"
    "type: project\n---\n\nTag it, then deploy.\n"
)


async def recall(
    manager: MemoryManager, query: str, excluded: AbstractSet[str] = frozenset()
) -> tuple[RecallResult, list[RecallResult]]:
    """The result, and what was published as the fast result."""
    fast: list[RecallResult] = []
    result = await manager.recall(
        query, provider=None, excluded=excluded, recent_tools=(),
        abort=AbortController().signal, on_fast_result=fast.append,
    )  # fmt: skip
    return result, fast


async def test_the_database_answers_while_the_warm_up_waits_and_the_local_index_after(
    machine: Machine,
) -> None:
    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    write(alice, "project/release.md", RELEASE)
    fresh = machine("fresh")
    root = fresh.roots.project
    assert root is not None

    with hold_local_roots([root]):  # the warm-up's pull waits for this lock: so does its index
        warm_up = fresh.warm_up.start(search=True)
        result, fast = await recall(fresh, "how do we deploy a release")
        surfaced = {str(root / "project" / "release.md")}
        again, _ = await recall(fresh, "how do we deploy a release", excluded=surfaced)
        assert fresh.warm_up.running

    assert [doc.title for doc in result.docs] == ["Release checklist", "Deploy with make"]
    assert fast == [result]  # published as the fast result
    assert result.docs[0].path == root / "project" / "release.md"  # where the mirror keeps it
    assert "Tag it, then deploy." in result.prompt
    assert [doc.title for doc in again.docs] == ["Deploy with make"]
    await warm_up
    assert fresh.warm_up.search is None  # from now on the local index answers
    local, _ = await recall(fresh, "how do we deploy a release", excluded=surfaced)
    assert [doc.title for doc in local.docs] == ["Deploy with make"]
    assert fresh.store.count() == 2


async def test_with_files_recall_waits_for_the_warm_up_instead(tmp_path: object) -> None:
    """The file backend has nothing that answers sooner than its own index."""
    from pathlib import Path

    from cairn.config.settings import Settings

    project = Path(str(tmp_path)) / "project"
    (project / ".git").mkdir(parents=True)
    settings = Settings.model_validate({"memory": {"minAvailableMemoryMb": 0}})
    manager = MemoryManager(project, settings=settings, environ={"CAIRN_HOME": str(tmp_path)})
    try:
        write(manager, "project/deploy.md", DEPLOY)
        manager.warm_up.start(search=True)
        assert manager.warm_up.search is None
        result, fast = await recall(manager, "deploy")
        assert not manager.warm_up.running  # recall waited for it
        assert [doc.title for doc in result.docs] == ["Deploy with make"] == [
            doc.title for doc in fast[0].docs
        ]
    finally:
        manager.close()


async def test_stop_cancels_a_warm_up_still_opening_its_search_and_close_does_not_wait(
    tmp_path: Path,
) -> None:
    """Regression: ``WarmUp.stop()`` cancelled only a warm-up holding for the first prompt's
    search, so shutdown waited for one still getting that search ready (opening a connection
    to a database that does not answer takes the connect timeout, 10 s), and then for its pull
    from the same database. Now both the warm-up and the manager's close end while that
    connection is still waiting."""
    silent = SilentDatabase()
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    dsn = f"postgresql://cairn@127.0.0.1:{silent.port}/memory"
    settings = Settings.model_validate(
        {"memory": {"backend": "postgres", "postgres": {"dsn": dsn, "namespace": "team"}}}
    )
    manager = MemoryManager(project, settings=settings, environ={"CAIRN_HOME": str(tmp_path)})
    try:
        warm_up = manager.warm_up.start(search=True)
        assert await eventually_async(lambda: bool(silent.accepted))  # its search connects

        manager.warm_up.stop()
        await eventually_async(lambda: warm_up.done() or bool(silent.closed))

        assert warm_up.cancelled()
        manager.close()
        assert not silent.closed  # both ended before the connection gave up
    finally:
        silent.close()


async def test_stop_gives_up_a_pull_still_connecting_and_close_does_not_wait(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: a warm-up whose catch-up pull was opening its connection to a database that
    does not answer (here without a search to prepare first) kept shutdown for the connect
    timeout, 10 s (an hour here, longer than the test waits). Now the warm-up ends at
    ``stop()`` and the manager's close does not wait either; nothing is pulled or indexed."""
    import cairn.memory.store.postgres.backend as backend

    monkeypatch.setattr(backend, "CONNECT_TIMEOUT_SECONDS", 3600)
    silent = SilentDatabase()
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    dsn = f"postgresql://cairn@127.0.0.1:{silent.port}/memory"
    settings = Settings.model_validate(
        {"memory": {"backend": "postgres", "postgres": {"dsn": dsn, "namespace": "team"}}}
    )
    manager = MemoryManager(project, settings=settings, environ={"CAIRN_HOME": str(tmp_path)})
    try:
        warm_up = manager.warm_up.start(search=False)  # straight to its pull
        assert await eventually_async(lambda: bool(silent.accepted))  # the pull connects

        manager.warm_up.stop()

        assert await eventually_async(warm_up.done)  # (at the connect timeout before)
        assert warm_up.result() is None  # nothing indexed
        manager.close()
        assert not silent.closed  # its connection was left waiting, not waited for
    finally:
        silent.close()


async def test_a_write_section_and_the_warm_ups_pull_in_one_process_take_turns(
    machine: Machine,
) -> None:
    """An extraction's write (a section on the event loop) holds the mirror's lock while the
    warm-up's pull (a thread of the same process) waits for it: neither waits for the other
    to finish first, so the section commits, then the pull runs and the index has both."""
    from cairn.memory.store.locks import LOCK_WAIT_SECONDS, hold_roots_async

    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    fresh = machine("fresh")
    root = fresh.roots.project
    assert root is not None

    async with hold_roots_async(fresh.root_paths()):  # caught up, locked, one transaction
        warm_up = fresh.warm_up.start(search=False)
        (root / "project").mkdir(parents=True, exist_ok=True)
        (root / "project" / "release.md").write_text(RELEASE)
    report = await asyncio.wait_for(warm_up, 2 * LOCK_WAIT_SECONDS)  # a hang guard

    assert report is not None and report.docs == 2
    committed = ["Deploy with make", "Release checklist"]  # alice's feed pulls the commit
    assert await eventually_async(lambda: sorted(doc.title for doc in alice.docs()) == committed)
