"""Creating and upgrading cairn's tables from several processes at once, against a real
PostgreSQL: replicas started together behind a load balancer, ``cairn -p`` runs meeting a new
database, ``cairn db migrate`` from two machines, and an upgrade while an older cairn keeps
using the tables. Every starter succeeds and the schema is whole."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
from collections.abc import Callable
from typing import Any

import psycopg
import pytest

from cairn.cli.db_cmd import components
from cairn.daemon.replica import replica_schema
from cairn.database.migrations import Component, Migration, migrate, schema_status
from cairn.memory.store.postgres.backend import namespace_key
from cairn.memory.store.postgres.schema import LOCK_ORDER, SCHEMA_VERSION, TABLES, ensure_schema
from cairn.memory.store.postgres.vectors import ensure_vector_table
from cairn.recording.store.schema import TENANT_TABLES

from ..memory.postgres_helpers import postgres_dsn, postgres_server
from ..polling import eventually

__all__ = ["postgres_dsn", "postgres_server"]  # fixtures

pytestmark = [pytest.mark.slow, pytest.mark.timeout(120)]

# The advisory locks a starter may wait on: the runner's, the memory tables' and the vectors'.
LOCK_KEYS = (0x6361_6972_6E01, 0x6361_6972_6E00, 0x6361_6972_6E76)
STARTERS = 8


def start_at_once(dsn: str, starts: list[Callable[[psycopg.Connection[Any]], object]]) -> None:
    """Run each of ``starts`` on its own connection, in its own thread, all let go at once: the
    test holds every schema lock until each starter waits on one (or is done: nothing to do),
    then lets go. Raises the first starter's error."""
    errors: list[BaseException] = []
    done: list[object] = []

    def run(start: Callable[[psycopg.Connection[Any]], object]) -> None:
        try:
            with psycopg.connect(dsn, application_name="starter") as connection:
                start(connection)
        except BaseException as error:
            errors.append(error)
        finally:
            done.append(start)

    with psycopg.connect(dsn, autocommit=True) as gate:
        for key in LOCK_KEYS:
            gate.execute("SELECT pg_advisory_lock(%s)", (key,))
        threads = [threading.Thread(target=run, args=(start,)) for start in starts]
        for thread in threads:
            thread.start()
        assert eventually(lambda: _waiting(gate) + len(done) == len(starts)), errors
        for key in LOCK_KEYS:
            gate.execute("SELECT pg_advisory_unlock(%s)", (key,))
        for thread in threads:
            thread.join(60)
        assert not any(thread.is_alive() for thread in threads)
    if errors:
        raise errors[0]


def _waiting(connection: psycopg.Connection[Any]) -> int:
    """How many starters wait on a lock now."""
    found = connection.execute(
        "SELECT count(DISTINCT a.pid) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
        "WHERE a.application_name = 'starter' AND NOT l.granted"
    ).fetchone()
    return 0 if found is None else int(found[0])


def assert_schema_is_whole(dsn: str) -> None:
    with psycopg.connect(dsn, autocommit=True) as connection:
        status = schema_status(connection, components())
        assert all(s.up_to_date for s in status), status
        found = connection.execute("SELECT max(version) FROM cairn_memory_schema").fetchone()
        assert found == (SCHEMA_VERSION,)
        policies = {
            row[0] for row in connection.execute("SELECT tablename FROM pg_policies").fetchall()
        }
        assert policies >= {*TABLES, *TENANT_TABLES}


def sessions_and_memory(connection: psycopg.Connection[Any]) -> object:
    return migrate(connection, components())  # cairn db migrate


def replica(connection: psycopg.Connection[Any]) -> object:
    return migrate(connection, replica_schema())  # cairn serve --database, starting


def test_starters_on_an_empty_database_all_succeed(postgres_dsn: str) -> None:
    starts = [sessions_and_memory, replica, ensure_schema, ensure_vector_table] * (STARTERS // 4)
    start_at_once(postgres_dsn, starts)
    assert_schema_is_whole(postgres_dsn)
    with psycopg.connect(postgres_dsn) as connection:
        rows = connection.execute("SELECT count(*) FROM cairn_memory_schema").fetchone()
    assert rows == (1,)  # created once


def test_cairn_db_migrate_from_several_machines_at_once(postgres_dsn: str) -> None:
    command = [sys.executable, "-m", "cairn.cli.main", "db", "migrate", "--database", postgres_dsn]
    processes = [
        subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    results = [process.communicate(timeout=90) for process in processes]
    assert [p.returncode for p in processes] == [0, 0, 0], results
    outputs = sorted(out for out, _ in results)
    assert outputs[0] == "nothing to do: up to date\n" or "applied" in outputs[0]
    assert sum("the database is up to date" in out for out in outputs) >= 1
    assert_schema_is_whole(postgres_dsn)
    status = subprocess.run(
        [sys.executable, "-m", "cairn.cli.main", "db", "status", "--database", postgres_dsn],
        capture_output=True, text=True, timeout=60, env=os.environ,
    )  # fmt: skip
    assert status.returncode == 0, status.stderr


def _previous_memory_schema(dsn: str) -> None:
    """A database as cairn's memory schema 2 left it (before the documents' full-text words),
    with a memory in it, and the runner's record of it."""
    with psycopg.connect(dsn) as connection:
        migrate(connection, components())
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        connection.execute(
            "INSERT INTO cairn_memory_namespaces (namespace, seq) VALUES ('team', 1)"
        )
        connection.execute(
            "INSERT INTO cairn_memory_docs (namespace, scope, path, content, title, seq) "
            "VALUES ('team', 'project', 'cache.md', 'redis keys expire', 'Redis cache', 1)"
        )
        connection.commit()
        connection.execute("DROP TRIGGER cairn_memory_docs_words ON cairn_memory_docs")
        connection.execute("DROP FUNCTION cairn_memory_docs_words()")
        connection.execute("ALTER TABLE cairn_memory_docs DROP COLUMN search")
        connection.execute("UPDATE cairn_memory_schema SET version = 2")
        connection.execute(
            "UPDATE cairn_schema_versions SET version = 1 WHERE component = 'memory'"
        )
        connection.commit()


def test_starters_upgrading_the_previous_schema_while_an_older_cairn_writes_all_succeed(
    postgres_dsn: str,
) -> None:
    """Regression: the upgrade's DDL took its table locks one statement at a time (a share lock
    on the documents for an index, then the exclusive one for a new column) while an older cairn
    still wrote: its write section, having read the documents, waited to write them behind the
    upgrade's share lock, and the upgrade waited behind its read. PostgreSQL broke the deadlock
    by failing the upgrade: the new process did not start."""
    _previous_memory_schema(postgres_dsn)
    watch = psycopg.connect(postgres_dsn, autocommit=True)  # (a transaction's view is frozen)
    with watch, psycopg.connect(postgres_dsn) as older:  # a write section of a running cairn
        older.execute("SELECT set_config('cairn.namespace', 'team', true)")
        older.execute("SELECT pg_advisory_xact_lock(%s)", (namespace_key("team"),))
        older.execute("UPDATE cairn_memory_namespaces SET seq = seq + 1 WHERE namespace = 'team'")
        older.execute("SELECT path, content FROM cairn_memory_docs WHERE seq > 0").fetchall()

        errors: list[BaseException] = []
        starting = threading.Thread(target=_starters, args=(postgres_dsn, errors))
        starting.start()
        # the upgrade waits behind this section now (for the lock it needs first)
        assert eventually(lambda: _upgrade_waits(watch)), errors
        older.execute(
            "UPDATE cairn_memory_docs SET content = 'redis keys expire in an hour', seq = 2 "
            "WHERE path = 'cache.md'"
        )
        older.commit()  # the section's write went through
        starting.join(90)
        assert not starting.is_alive()
    if errors:
        raise errors[0]
    assert_schema_is_whole(postgres_dsn)
    with psycopg.connect(postgres_dsn) as connection:
        connection.execute("SELECT set_config('cairn.namespace', 'team', true)")
        words = connection.execute(
            "SELECT content FROM cairn_memory_docs WHERE search @@ to_tsquery('english', 'hour')"
        ).fetchall()
    assert words == [(b"redis keys expire in an hour",)]  # the upgrade saw the write


def _starters(dsn: str, errors: list[BaseException]) -> None:
    try:
        start_at_once(dsn, [sessions_and_memory, ensure_schema, ensure_schema, replica])
    except BaseException as error:
        errors.append(error)


def _upgrade_waits(connection: psycopg.Connection[Any]) -> bool:
    """Whether a starter waits on a table lock (the gate's advisory locks were let go)."""
    found = connection.execute(
        "SELECT count(*) FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
        "WHERE a.application_name = 'starter' AND NOT l.granted AND l.locktype = 'relation'"
    ).fetchone()
    return found is not None and found[0] > 0


def test_an_older_cairn_on_a_newer_database_runs_without_migrating(postgres_dsn: str) -> None:
    """Steps only ever add: a database a newer cairn migrated is current for an older one,
    which changes nothing (a rolling upgrade's old replicas keep serving)."""
    newer = Component(
        "sessions",
        (*replica_schema()[0].migrations, Migration(2, "a newer cairn's column", _add_column)),
    )
    with psycopg.connect(postgres_dsn) as connection:
        migrate(connection, replica_schema())
        assert migrate(connection, [newer]) == ["sessions 2: a newer cairn's column"]
        assert migrate(connection, replica_schema()) == []
        [status] = schema_status(connection, replica_schema())
        ensure_schema(connection)
        connection.execute("INSERT INTO cairn_memory_schema VALUES (%s)", (SCHEMA_VERSION + 1,))
        connection.commit()
        ensure_schema(connection)  # the memory tables a newer cairn upgraded: left as they are
        versions = connection.execute("SELECT version FROM cairn_memory_schema").fetchall()
    assert (status.current, status.expected, status.up_to_date) == (2, 1, True)
    assert sorted(versions) == [(SCHEMA_VERSION,), (SCHEMA_VERSION + 1,)]


def _add_column(connection: psycopg.Connection[Any]) -> None:
    connection.execute("ALTER TABLE cairn_sessions ADD COLUMN newer text")


def test_an_upgrade_locks_every_memory_table() -> None:
    assert sorted(LOCK_ORDER) == sorted(TABLES)
