"""The database's own search, which serves Recall on a machine whose index is still warming up:
stemmed words, best first, only live memories of the searching namespace, never an error."""

from __future__ import annotations

import socket
import threading

import pytest

from cairn.config.settings import Settings
from cairn.memory.forget.selection import ForgetPlan, list_forget_candidates
from cairn.memory.manager import MemoryManager
from cairn.memory.store.postgres.search import tsquery_text

from ... import polling
from ..postgres_helpers import SilentDatabase, postgres_dsn, postgres_server
from .test_backend_contract import DEPLOY, write
from .test_postgres_backend import Machine, machine

__all__ = ["machine", "postgres_dsn", "postgres_server"]  # fixtures

pytestmark = pytest.mark.timeout(120)

CACHE = (
    "---\nname: Redis cache keys\ndescription: cache keys expire after an hour\n"
    "type: project\n---\n\nThe deploy script flushes them.\n"
)
SECRET = (
    "---\nname: Billing secrets rotation\ndescription: rotate the billing secrets monthly\n"
    "type: project\n---\n\nAsk the finance team first.\n"
)


def found(manager: MemoryManager, query: str) -> list[str]:
    search = manager.backend.warm_up_search()
    assert search is not None
    return [doc.title for doc, _text in search.search(query, 8)]


def test_stemmed_words_find_a_memory_and_the_title_ranks_above_the_body(
    machine: Machine,
) -> None:
    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    write(alice, "project/cache.md", CACHE)

    fresh = machine("fresh")  # an empty mirror: only the database can answer

    assert found(fresh, "Deploying it?") == ["Deploy with make", "Redis cache keys"]
    assert found(fresh, "when do cache keys expire") == ["Redis cache keys"]
    assert found(fresh, "the and of") == []  # stop words only: no query at all


def test_a_two_letter_word_finds_a_memory(machine: Machine) -> None:
    """"uv", "db" and "CI" are words of a query (the reference's three-letter rule dropped them)."""
    alice = machine("alice")
    write(alice, "project/uv.md", "---\nname: Use uv\ndescription: install with uv sync\n"
                                  "type: project\n---\n\nNever pip.\n")  # fmt: skip
    write(alice, "project/cache.md", CACHE)

    assert found(machine("fresh"), "uv?") == ["Use uv"]


def test_a_found_memory_is_where_the_mirror_will_hold_it_with_its_text(machine: Machine) -> None:
    """Recall's surfaced-path dedupe must see one memory as one, before and after the warm-up."""
    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    fresh = machine("fresh")
    search = fresh.backend.warm_up_search()
    assert search is not None

    [(doc, text)] = search.search("deploy", 8)

    assert fresh.roots.project is not None
    assert doc.path == fresh.roots.project / "project" / "deploy.md"
    assert (doc.relative_path, doc.scope, doc.description) == (
        "project/deploy.md", "project", "how the billing service is deployed",
    )  # fmt: skip
    assert text == DEPLOY


def test_a_forgotten_memory_is_never_found(machine: Machine) -> None:
    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    write(alice, "project/secrets.md", SECRET)
    secret = [c for c in list_forget_candidates(alice.docs()) if c.title.startswith("Billing")]
    assert alice.apply_forget(ForgetPlan("secrets", secret, "heuristic")).ok

    fresh = machine("fresh")

    assert found(fresh, "billing secrets rotation") == ["Deploy with make"]


def test_another_namespace_is_never_searched(machine: Machine) -> None:
    write(machine("alice", namespace="globex"), "project/deploy.md", DEPLOY)
    write(machine("bob", namespace="team"), "project/cache.md", CACHE)

    assert found(machine("fresh", namespace="team"), "deploy cache") == ["Redis cache keys"]


def test_an_edited_memory_is_found_by_its_new_words_only(machine: Machine) -> None:
    alice = machine("alice")
    write(alice, "project/deploy.md", DEPLOY)
    write(alice, "project/deploy.md", DEPLOY.replace("make release", "the kubernetes pipeline"))

    fresh = machine("fresh")

    assert found(fresh, "kubernetes") == ["Deploy with make"]
    assert found(fresh, "release") == []


def test_a_database_that_never_answers_gives_no_result_and_no_error(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server that accepts and then says nothing: the search gives up at the connect timeout
    the DSN names (2 s here; cairn's own, an hour here, is only the default) with no result and
    no error. Regression: cairn's 10 s overrode the DSN's ``connect_timeout``."""
    import cairn.memory.store.postgres.backend as backend

    monkeypatch.setattr(backend, "CONNECT_TIMEOUT_SECONDS", 3600)
    silent = SilentDatabase()
    dsn = f"postgresql://nobody@127.0.0.1:{silent.port}/memory?connect_timeout=2"
    manager = _manager(dsn, tmp_path)
    results: list[list[object]] = []
    try:
        search = manager.backend.warm_up_search()
        assert search is not None
        searching = threading.Thread(
            target=lambda: results.append(search.search("deploy", 8)), daemon=True
        )
        searching.start()
        searching.join(polling.DEADLINE_SECONDS)  # a hang guard: the default is an hour here

        assert results == [[]]
        assert silent.accepted  # it did connect, and gave up waiting for an answer
    finally:
        silent.close()
        manager.close()


def test_a_database_that_refuses_gives_no_result_and_no_error(tmp_path: object) -> None:
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]  # bound, never listening: connections are refused
        manager = _manager(f"postgresql://nobody@127.0.0.1:{port}/memory", tmp_path)
        try:
            search = manager.backend.warm_up_search()
            assert search is not None
            search.prepare()
            assert search.search("deploy", 8) == []
        finally:
            manager.close()


def test_a_search_waiting_for_a_stalled_preparation_ends_when_the_search_is_closed(
    tmp_path: object, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Regression: Recall's search, in a thread a closing process waits for, kept waiting for
    the preparation still opening its connection to a database that does not answer after the
    search was closed: up to 2 s (an hour here, as long as the connect may take), so the exit
    waited too. Now it ends at ``close()`` with no result."""
    import cairn.memory.store.postgres.backend as backend
    import cairn.memory.store.postgres.search as database_search

    monkeypatch.setattr(backend, "CONNECT_TIMEOUT_SECONDS", 3600)
    monkeypatch.setattr(database_search, "_WAIT_S", 3600)
    silent = SilentDatabase()
    manager = _manager(f"postgresql://nobody@127.0.0.1:{silent.port}/memory", tmp_path)
    search = manager.backend.warm_up_search()
    assert search is not None
    results: list[list[object]] = []
    preparing = threading.Thread(target=search.prepare, daemon=True)
    searching = threading.Thread(target=lambda: results.append(search.search("deploy", 8)))
    try:
        preparing.start()
        assert polling.eventually(lambda: bool(silent.accepted))  # stalled in its connect
        searching.start()  # waits for the preparation

        search.close()
        searching.join(polling.DEADLINE_SECONDS)  # (a hang guard: an hour before)

        assert not searching.is_alive()
        assert results == [[]]
    finally:
        silent.close()  # the preparation's connect ends
        manager.close()
        searching.join()


def _manager(dsn: str, tmp_path: object) -> MemoryManager:
    from pathlib import Path

    project = Path(str(tmp_path)) / "project"
    (project / ".git").mkdir(parents=True, exist_ok=True)
    settings = Settings.model_validate(
        {"memory": {"backend": "postgres", "postgres": {"dsn": dsn, "namespace": "team"}}}
    )
    environ = {"CAIRN_HOME": str(Path(str(tmp_path)) / "home")}
    return MemoryManager(project, settings=settings, environ=environ)


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ("How do we deploy the billing service?", "'deploy' | 'billing' | 'service'"),
        ("Is it uv or pip on CI?", "'uv' | 'pip' | 'ci'"),
        ("it's O'Brien's (test) & !x | y", "'brien' | 'test'"),
        ("部署流程", "'部署':* | '署流':* | '流程':*"),
        ("", ""),
    ],
)
def test_a_query_becomes_or_ed_words_with_no_tsquery_syntax(query: str, expected: str) -> None:
    assert tsquery_text(query) == expected
