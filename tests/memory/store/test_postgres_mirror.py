"""The PostgreSQL backend's mirror at any size (issue #28): a write sends what it changed (found
by the mirror's watcher, not a walk of every file), the sync state is saved as a journal, the
audit trail travels line by line; and damaged local state is pulled again, losing nothing."""

from __future__ import annotations

from pathlib import Path

import psycopg
import pytest

from cairn.memory.manager import MemoryManager
from cairn.memory.store.locks import hold_roots

from ...polling import eventually
from ..postgres_helpers import postgres_dsn, postgres_server
from .test_backend_contract import DEPLOY, titles, write
from .test_postgres_backend import Machine, machine

__all__ = ["machine", "postgres_dsn", "postgres_server"]  # fixtures

pytestmark = pytest.mark.timeout(120)


def memory(n: int) -> str:
    return f"---\nname: Fact {n}\ndescription: fact number {n}\ntype: project\n---\n\nFact {n}.\n"


def rows(dsn: str, query: str) -> list[tuple[object, ...]]:
    with psycopg.connect(dsn) as connection:
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        return connection.execute(query).fetchall()


def stored(dsn: str, path: str) -> bytes | None:
    with psycopg.connect(dsn) as connection:
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        query = "SELECT content FROM cairn_memory_docs WHERE path = %s"
        found = connection.execute(query, (path,)).fetchall()
    return bytes(found[0][0]) if found and found[0][0] is not None else None  # type: ignore[arg-type]


def test_a_write_stores_only_the_files_it_changed(machine: Machine, postgres_dsn: str) -> None:
    alice = machine("alice")
    for n in range(5):
        write(alice, f"project/fact-{n}.md", memory(n))

    write(alice, "project/new.md", memory(99))

    newest = (
        "SELECT path FROM cairn_memory_docs WHERE seq = (SELECT max(seq) FROM cairn_memory_docs)"
    )
    assert rows(postgres_dsn, newest) == [("project/new.md",)]
    assert stored(postgres_dsn, "project/new.md") == memory(99).encode()


def test_a_mirror_file_edited_by_hand_reaches_the_database_with_the_next_write(
    machine: Machine, postgres_dsn: str
) -> None:
    """Edited outside any write section (by hand, by a tool): the mirror's watcher reported
    it, and the next section stores it, as the walk of every file did."""
    alice = machine("alice")
    path = write(alice, "project/deploy.md", DEPLOY)
    write(alice, "project/fact-1.md", memory(1))
    edited = DEPLOY.replace("FACT-2718", "FACT-3141")

    path.write_text(edited)  # no section, no lock
    (path.parent / "fact-1.md").unlink()
    write(alice, "project/fact-2.md", memory(2))

    assert stored(postgres_dsn, "project/deploy.md") == edited.encode()
    assert stored(postgres_dsn, "project/fact-1.md") is None  # its tombstone
    bob = machine("bob")
    assert eventually(lambda: titles(bob) == ["Deploy with make", "Fact 2"])


def test_a_change_made_while_no_cairn_ran_is_found_by_the_next_process(
    machine: Machine, postgres_dsn: str
) -> None:
    first = machine("alice")
    path = write(first, "project/deploy.md", DEPLOY)
    first.close()
    edited = DEPLOY.replace("FACT-2718", "FACT-1618")
    path.write_text(edited)

    again = machine("alice")  # the same home: its mirror and sync state
    write(again, "project/fact-1.md", memory(1))

    assert stored(postgres_dsn, "project/deploy.md") == edited.encode()


def _sync_files(manager: MemoryManager) -> tuple[Path, Path]:
    shard = manager.backend.shards[0]  # type: ignore[attr-defined]
    return shard.sync_path, shard.sync_path.with_suffix(".jnl")


def test_a_new_process_starts_from_the_saved_sync_state_and_pulls_nothing_again(
    machine: Machine,
) -> None:
    alice = machine("alice")
    for n in range(4):
        write(alice, f"project/fact-{n}.md", memory(n))
    snapshot, journal = _sync_files(alice)
    size = snapshot.stat().st_size
    write(alice, "project/fact-4.md", memory(4))
    assert snapshot.stat().st_size == size  # a write appends to the journal instead
    assert journal.stat().st_size > 0
    alice.close()

    again = machine("alice")
    assert again.backend.pull_now() == []  # type: ignore[attr-defined]
    assert titles(again) == [f"Fact {n}" for n in range(5)]


@pytest.mark.parametrize("damage", ["torn journal", "foreign snapshot", "garbage snapshot"])
def test_damaged_sync_state_is_pulled_again_and_loses_nothing(
    machine: Machine, postgres_dsn: str, damage: str
) -> None:
    alice = machine("alice")
    for n in range(3):
        write(alice, f"project/fact-{n}.md", memory(n))
    alice.close()
    snapshot, journal = _sync_files(alice)
    if damage == "torn journal":
        data = journal.read_bytes()
        journal.write_bytes(data[:-5])
    elif damage == "foreign snapshot":  # another version's layout
        snapshot.write_text('{"version": 99, "entries": []}')
    else:
        snapshot.write_bytes(b"cairn-mirror-sync\n0123\n\x00\xff not json")

    again = machine("alice")
    write(again, "project/fact-3.md", memory(3))

    assert titles(again) == [f"Fact {n}" for n in range(4)]
    for n in range(4):
        assert stored(postgres_dsn, f"project/fact-{n}.md") == memory(n).encode()
    bob = machine("bob")
    assert eventually(lambda: titles(bob) == [f"Fact {n}" for n in range(4)])


def test_the_audit_trail_travels_line_for_line_appended_or_rewritten(
    machine: Machine, postgres_dsn: str
) -> None:
    alice, bob = machine("alice"), machine("bob")
    root = alice.roots.project
    assert root is not None
    for n in range(3):
        write(alice, f"project/fact-{n}.md", memory(n))
    history = root / ".history.jsonl"
    with hold_roots(list(alice.root_map().values())):
        history.write_bytes(b'{"line": 1}\n{"line": 2}\n')
    with hold_roots(list(alice.root_map().values())):
        history.write_bytes(b'{"line": 1}\n{"line": 2}\n{"line": 3}\n')
    bob_history = bob.roots.project / ".history.jsonl"  # type: ignore[operator]

    assert titles(bob) == ["Fact 0", "Fact 1", "Fact 2"]  # bob reads (and follows) the memory
    assert eventually(
        lambda: bob_history.is_file() and bob_history.read_bytes() == history.read_bytes()
    )
    lines = rows(postgres_dsn, "SELECT line_no, line FROM cairn_memory_history ORDER BY line_no")
    assert [(n, bytes(line)) for n, line in lines] == [  # type: ignore[arg-type]
        (0, b'{"line": 1}\n'), (1, b'{"line": 2}\n'), (2, b'{"line": 3}\n')
    ]  # fmt: skip
    with hold_roots(list(alice.root_map().values())):  # rewritten: a trimmed trail
        history.write_bytes(b'{"line": 0}\n{"line": 3}\n{"line": 4}\n{"line": 5}\n')
    assert eventually(lambda: bob_history.read_bytes() == history.read_bytes())
