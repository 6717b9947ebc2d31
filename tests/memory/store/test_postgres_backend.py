"""What only the PostgreSQL backend promises: change notification with a bounded poll behind it,
and namespaces kept apart by the database itself (row-level security)."""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from psycopg import sql
from psycopg.conninfo import make_conninfo

from cairn.config.settings import Settings
from cairn.database.keepalive import KEEPALIVE_PARAMETERS
from cairn.memory.manager import MemoryManager
from cairn.memory.store.locks import LOCK_WAIT_SECONDS, hold_roots, root_lock_path
from cairn.memory.store.postgres.schema import SCHEMA_VERSION, TABLES

from ...polling import eventually
from ..memory_helpers import NOW
from ..postgres_helpers import postgres_dsn, postgres_server, socket_keepalive
from .test_backend_contract import DEPLOY, titles, write

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = pytest.mark.timeout(120)

Machine = Callable[..., MemoryManager]


@pytest.fixture
def machine(postgres_dsn: str, tmp_path: Path) -> Iterator[Machine]:
    """``machine(name, namespace="team", poll=0.2, tenant=None)``: a manager with its own home
    (of a daemon ``tenant``, when given); ``refused``: the backend must refuse the namespace;
    ``dsn``: another DSN for the same database."""
    project = tmp_path / "project"
    (project / ".git").mkdir(parents=True)
    made: list[MemoryManager] = []

    def make(
        name: str,
        *,
        namespace: str = "team",
        poll: float = 0.2,
        tenant: str | None = None,
        refused: bool = False,
        dsn: str = postgres_dsn,
    ) -> MemoryManager:
        postgres: dict[str, Any] = {"dsn": dsn, "namespace": namespace}
        postgres["pollSeconds"] = poll
        settings = Settings.model_validate(
            {"memory": {"backend": "postgres", "postgres": postgres}}
        )
        environ = {"CAIRN_HOME": str(tmp_path / f"home-{name}")}
        manager = MemoryManager(
            project, settings=settings, environ=environ, clock=lambda: NOW, tenant=tenant
        )
        assert (manager.backend.name == "files") == refused, manager.backend_error
        made.append(manager)
        return manager

    yield make
    for manager in made:
        manager.close()


def test_a_change_reaches_another_process_by_notification(machine: Machine) -> None:
    alice, bob = machine("alice", poll=3600), machine("bob", poll=3600)
    assert titles(bob) == []  # bob's feed now listens; it would poll only in an hour

    write(alice, "project/deploy.md", DEPLOY)

    assert eventually(lambda: titles(bob) == ["Deploy with make"])


def test_a_missed_notification_is_caught_up_by_the_poll(
    machine: Machine, postgres_dsn: str
) -> None:
    bob = machine("bob", poll=0.2)
    assert titles(bob) == []
    with psycopg.connect(postgres_dsn) as connection:  # a write that notifies nobody
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        connection.execute(
            "INSERT INTO cairn_memory_namespaces (namespace, seq) VALUES ('team', 1) "
            "ON CONFLICT (namespace) DO UPDATE SET seq = 1"
        )
        connection.execute(
            "INSERT INTO cairn_memory_docs (namespace, scope, path, content, mtime, seq) "
            "VALUES ('team', 'project', 'project/deploy.md', %s, %s, 1)",
            (DEPLOY.encode(), time.time()),
        )

    assert eventually(lambda: titles(bob) == ["Deploy with make"])


def test_the_memory_databases_connections_carry_the_keepalive_options(
    machine: Machine, postgres_dsn: str
) -> None:
    """A database host that vanishes without a word is noticed (docs/memory.md); a DSN's own
    keepalive value wins."""
    with machine("alice").backend.connect() as connection:
        assert socket_keepalive(connection) == KEEPALIVE_PARAMETERS
    own = machine("bob", dsn=make_conninfo(postgres_dsn, keepalives_idle=7))
    with own.backend.connect() as connection:
        assert socket_keepalive(connection) == {**KEEPALIVE_PARAMETERS, "keepalives_idle": 7}


def test_namespaces_never_see_each_others_memories(machine: Machine) -> None:
    alice, eve = machine("alice", namespace="acme"), machine("eve", namespace="globex")
    write(alice, "project/deploy.md", DEPLOY)
    write(eve, "project/other.md", DEPLOY.replace("Deploy with make", "Globex secret"))

    alice.backend.pull_now(), eve.backend.pull_now()  # what each feed does: after both writes
    assert titles(alice) == ["Deploy with make"]
    assert titles(eve) == ["Globex secret"]
    assert "Globex" not in alice.system_prompt_section()


def test_a_plain_namespace_with_a_slash_never_reads_a_tenants_memory(machine: Machine) -> None:
    """#24 Medium: "tenant namespaces collide with plain PostgreSQL namespaces containing /":
    another project configured `acme/proj` read tenant acme's memory."""
    tenant = machine("daemon", namespace="proj", tenant="acme")
    write(tenant, "project/deploy.md", DEPLOY)
    plain = machine("other", namespace="acme/proj")
    reserved = machine("forged", namespace="tenants/acme/proj", refused=True)

    assert titles(tenant) == ["Deploy with make"]
    assert titles(plain) == []  # its first read pulled every row its namespace holds
    assert "tenants/" in reserved.backend_error and "reserved" in reserved.backend_error
    assert titles(reserved) == []


def test_row_level_security_hides_other_namespaces_even_from_a_query_without_a_filter(
    machine: Machine, postgres_dsn: str
) -> None:
    write(machine("alice", namespace="acme"), "project/deploy.md", DEPLOY)

    with psycopg.connect(postgres_dsn) as connection:  # as cairn's own (non-superuser) role
        connection.execute("SELECT set_config('cairn.namespace', 'globex', true)")
        seen = {table: _count(connection, table) for table in TABLES}
        connection.rollback()
        no_namespace = connection.execute("SELECT count(*) FROM cairn_memory_docs").fetchone()
        connection.rollback()
        connection.execute("SELECT set_config('cairn.namespace', 'globex', true)")
        with pytest.raises(psycopg.errors.InsufficientPrivilege):
            connection.execute(
                "INSERT INTO cairn_memory_docs (namespace, scope, path, content, seq) "
                "VALUES ('acme', 'project', 'project/x.md', 'x', 9)"
            )

    assert seen == dict.fromkeys(TABLES, 0)
    assert no_namespace == (0,)


def _count(connection: psycopg.Connection[Any], table: str) -> int:
    query = sql.SQL("SELECT count(*) FROM {}").format(sql.Identifier(table))
    row = connection.execute(query).fetchone()
    assert row is not None
    return int(row[0])


def test_a_write_committed_while_another_process_pulls_is_not_skipped(
    machine: Machine, postgres_dsn: str
) -> None:
    """Regression (#15): a pull read each table in its own snapshot (READ COMMITTED), so a write
    committed between its documents query and its index query was counted as pulled (its seq
    seen on the index row) while its document was not: the other machine never got it."""
    import threading

    bob = machine("bob", poll=3600)  # no poll: only the pulls this test makes
    assert titles(bob) == []
    with psycopg.connect(postgres_dsn) as writer, psycopg.connect(postgres_dsn) as observer:
        writer.execute("SELECT set_config('cairn.namespace', 'team', true)")
        writer.execute("LOCK TABLE cairn_memory_indexes IN ACCESS EXCLUSIVE MODE")
        writer.execute(
            "INSERT INTO cairn_memory_namespaces (namespace, seq) VALUES ('team', 1) "
            "ON CONFLICT (namespace) DO UPDATE SET seq = 1"
        )
        writer.execute(
            "INSERT INTO cairn_memory_docs (namespace, scope, path, content, mtime, seq) "
            "VALUES ('team', 'project', 'project/deploy.md', %s, %s, 1)",
            (DEPLOY.encode(), time.time()),
        )
        writer.execute(
            "INSERT INTO cairn_memory_indexes (namespace, scope, content, seq) "
            "VALUES ('team', 'project', '- [Deploy with make](project/deploy.md)', 1)"
        )
        pulling = threading.Thread(target=bob.backend.pull_now)  # type: ignore[attr-defined]
        pulling.start()
        # The pull has read the documents (not this uncommitted one) and waits on the index.
        assert eventually(lambda: _waiting_on_a_lock(observer) == 1)
        writer.commit()
        pulling.join(30)

    bob.backend.pull_now()  # type: ignore[attr-defined]

    assert titles(bob) == ["Deploy with make"]


def _waiting_on_a_lock(connection: psycopg.Connection[Any]) -> int:
    row = connection.execute(
        "SELECT count(*) FROM pg_stat_activity WHERE wait_event_type = 'Lock' "
        "AND query LIKE '%cairn_memory_indexes%'"
    ).fetchone()
    connection.rollback()
    assert row is not None
    return int(row[0])


def test_a_file_rewritten_in_place_at_once_with_the_same_size_is_still_stored(
    machine: Machine,
) -> None:
    """A commit skips reading the files whose stat signature is unchanged: a file rewritten in
    place right after a commit (same inode, same size) must still reach the database."""
    alice, bob = machine("alice"), machine("bob")
    first = DEPLOY.replace("FACT-2718", "FACT-1111")
    second = DEPLOY.replace("FACT-2718", "FACT-2222")  # the same size
    root = alice.roots.project
    assert root is not None
    path = root / "project/deploy.md"
    write(alice, "project/deploy.md", first)
    with hold_roots([root]):
        path.write_bytes(second.encode())  # in place: same inode, same size
        alice.store.rebuild_index_files()

    assert eventually(
        lambda: bool(bob.docs()) and bob.docs()[0].path.read_bytes() == second.encode()
    )


def test_a_failed_section_does_not_wait_for_a_pull_queued_behind_it(
    machine: Machine, caplog: pytest.LogCaptureFixture
) -> None:
    """Regression: the change feed took the backend's read lock and then waited for the local
    root locks, while a failed write section held those and waited for the read lock to put
    the mirror back: each failed write stalled until the feed gave up (30 s) and that pull
    was lost."""
    alice = machine("alice", poll=3600)
    write(alice, "project/deploy.md", DEPLOY)
    root = alice.roots.project
    assert root is not None
    pulled: list[object] = []
    caplog.set_level(logging.DEBUG, logger="filelock")  # it logs each wait for a held lock
    held = str(root_lock_path(root))

    def pull_waits() -> bool:  # for the root lock this section holds
        messages = [record.getMessage() for record in caplog.records]
        return any("not acquired" in m and held in m for m in messages)

    def feed_pull() -> None:  # what the change feed does when a notification arrives
        try:
            pulled.append(alice.backend.pull_now())
        except Exception as error:
            pulled.append(error)

    with pytest.raises(RuntimeError, match="disk full"), hold_roots([root]):
        (root / "project" / "deploy.md").write_text("half a change")
        feed = threading.Thread(target=feed_pull)
        feed.start()
        assert eventually(pull_waits)
        failed_at = time.monotonic()
        raise RuntimeError("disk full")
    rolled_back_in = time.monotonic() - failed_at
    feed.join(timeout=2 * LOCK_WAIT_SECONDS)

    assert (root / "project" / "deploy.md").read_bytes() == DEPLOY.encode()
    assert pulled == [[]]  # the pull ran after the section, and found nothing new
    # a deadlock guard, not a speed claim: the stall lasted until a lock wait gave up
    assert rolled_back_in < LOCK_WAIT_SECONDS / 2


def test_a_database_of_the_previous_schema_is_upgraded_with_row_level_security(
    machine: Machine, postgres_dsn: str
) -> None:
    """A version-1 database (before cairn_memory_files and the documents' full-text words)
    with memories in it gets the new table, with the namespace policy every table has, and
    the words of the memories already there, when a newer cairn first connects."""
    from cairn.memory.forget.selection import ForgetPlan, list_forget_candidates
    from cairn.memory.forget.tombstones import read_tombstones

    setup = machine("setup")
    write(setup, "project/cache.md", CACHE)  # its first write creates the current schema
    setup.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        _downgrade_to_v1(connection)

    alice = machine("alice")
    search = alice.backend.warm_up_search()
    assert search is not None
    assert [doc.title for doc, _ in search.search("redis cache", 8)] == ["Redis cache keys"]
    write(alice, "project/deploy.md", DEPLOY)
    deploy = [c for c in list_forget_candidates(alice.docs()) if c.title == "Deploy with make"]
    assert alice.apply_forget(ForgetPlan("deploy", deploy, "heuristic")).ok  # a new table's row

    with psycopg.connect(postgres_dsn) as connection:
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        tombstones = connection.execute(
            "SELECT count(*) FROM cairn_memory_files WHERE path = '.forgotten.jsonl'"
        ).fetchone()
        assert tombstones == (1,)
        connection.rollback()
        connection.execute("SELECT set_config('cairn.namespace', 'globex', true)")
        assert _count(connection, "cairn_memory_files") == 0
        connection.rollback()
        versions = connection.execute("SELECT max(version) FROM cairn_memory_schema").fetchone()
    assert versions == (SCHEMA_VERSION,)
    bob = machine("bob")
    assert bob.roots.project is not None
    bob.refresh()
    assert [t.title for t in read_tombstones(bob.roots.project)] == ["Deploy with make"]


def test_a_process_that_saw_an_older_schema_leaves_a_migrated_one_to_its_writers(
    machine: Machine, postgres_dsn: str
) -> None:
    """Regression: two machines connecting to a new database at once both found no schema;
    the second, given the migration lock once the first had migrated, ran the tables' DDL
    again (``ALTER TABLE`` waits for the table's exclusive lock) while the first was already
    writing, and PostgreSQL broke the deadlock by failing the write (CI,
    ``test_concurrent_writers_on_two_machines_lose_nothing[postgres]``)."""
    from cairn.memory.store.postgres.schema import migrate_under_lock

    setup = machine("setup")
    write(setup, "project/cache.md", CACHE)  # its first write creates the current schema
    with psycopg.connect(postgres_dsn) as writer, psycopg.connect(postgres_dsn) as late:
        writer.execute("SELECT set_config('cairn.namespace', 'team', true)")
        writer.execute("SELECT count(*) FROM cairn_memory_docs")  # its lock, as a write holds
        late.execute("SET lock_timeout = '5s'")
        late.commit()
        migrate_under_lock(late)  # what the second machine does after waiting for the lock
        writer.execute("UPDATE cairn_memory_docs SET mtime = mtime WHERE path = 'project/cache.md'")
        writer.commit()


CACHE = (
    "---\nname: Redis cache keys\ndescription: cache keys expire after an hour\n"
    "type: project\n---\n\nNothing else.\n"
)


def _downgrade_to_v1(connection: psycopg.Connection[Any]) -> None:
    """The tables as cairn's schema 1 left them (the data kept)."""
    connection.execute("DROP TABLE cairn_memory_files")
    connection.execute("DROP TRIGGER cairn_memory_docs_words ON cairn_memory_docs")
    connection.execute("DROP FUNCTION cairn_memory_docs_words()")
    connection.execute("ALTER TABLE cairn_memory_docs DROP COLUMN search")
    connection.execute("DELETE FROM cairn_memory_schema")
    connection.execute("INSERT INTO cairn_memory_schema (version) VALUES (1)")


def test_cairn_db_migrate_upgrades_a_v1_database_with_memories_to_full_text_search(
    machine: Machine, postgres_dsn: str
) -> None:
    """The migration runner's memory step 2, on a database its step 1 made before."""
    from cairn.database.migrations import migrate
    from cairn.memory.store.postgres.schema import memory_schema

    setup = machine("setup")
    write(setup, "project/cache.md", CACHE)
    setup.close()
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        _downgrade_to_v1(connection)
        connection.execute(
            "CREATE TABLE cairn_schema_versions (component text PRIMARY KEY, "
            "version integer NOT NULL, updated_at timestamptz NOT NULL DEFAULT now())"
        )
        connection.execute("INSERT INTO cairn_schema_versions VALUES ('memory', 1)")
    with psycopg.connect(postgres_dsn) as connection:
        applied = migrate(connection, [memory_schema()])
        assert applied == [f"memory 2: full-text search of memories (schema {SCHEMA_VERSION})"]
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        words = connection.execute(
            "SELECT count(*) FROM cairn_memory_docs WHERE search @@ to_tsquery('english', 'redis')"
        ).fetchone()
    assert words == (1,)
    fresh = machine("fresh")
    search = fresh.backend.warm_up_search()
    assert search is not None
    assert [doc.title for doc, _ in search.search("redis", 8)] == ["Redis cache keys"]


PICTURES = (
    "---\nname: Image storage\ndescription: Uploaded pictures are kept in an S3 bucket\n"
    "type: reference\n---\n\nOriginals are private.\n"
)


def test_a_vector_computed_by_one_process_is_taken_from_the_database_by_another(
    machine: Machine, postgres_dsn: str
) -> None:
    """Issue #26: with the PostgreSQL backend the vectors of semantic candidates live in the
    database (pgvector's type when the server has it, bytea otherwise), so a memory is embedded
    once for all processes."""
    from cairn.memory.recall.semantic import compute_vectors
    from cairn.memory.store.embedding import load_model

    alice, bob = machine("alice", poll=0.2), machine("bob", poll=0.2)
    write(alice, "reference/images.md", PICTURES)
    write(alice, "project/deploy.md", DEPLOY)
    alice.refresh()
    assert compute_vectors(alice.store) == 2  # embedded here, stored in the database
    assert eventually(lambda: len(titles(bob)) == 2)

    assert compute_vectors(bob.store) == 0  # none embedded again: all taken from the database

    model = load_model()
    assert model is not None
    [found] = bob.store.similar(model.embed(["where do user photos live?"])[0], limit=1)
    assert found.relative_path == "reference/images.md"
    with psycopg.connect(postgres_dsn, autocommit=True) as connection:
        kind = connection.execute(
            "SELECT udt_name FROM information_schema.columns "
            "WHERE table_name = 'cairn_memory_vectors' AND column_name = 'embedding'"
        ).fetchone()
        available = connection.execute(
            "SELECT 1 FROM pg_available_extensions WHERE name = 'vector'"
        ).fetchone()
    assert kind == (("vector",) if available else ("bytea",))


def test_an_edited_memory_is_embedded_again_not_taken_stale_from_the_database(
    machine: Machine,
) -> None:
    from cairn.memory.recall.semantic import compute_vectors

    alice, bob = machine("alice", poll=0.2), machine("bob", poll=0.2)
    write(alice, "reference/images.md", PICTURES)
    alice.refresh()
    compute_vectors(alice.store)
    write(bob, "reference/images.md", PICTURES.replace("S3 bucket", "GCS bucket"))
    bob.refresh()
    assert compute_vectors(bob.store) == 1  # the database's row was made from the old text
